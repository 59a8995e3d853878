"""The judge harness: one sandboxed process runs all the tests of one problem.

This file is shipped into the sandbox as its ``main.py`` (the candidate's code beside it as
``solution.py``) and run there by ``sandbox.judge``; it uses the standard library only and imports
nothing from agentboost. Protocol:

- judge -> harness (stdin, each message ``marshal``-ed and prefixed by its length as 8 bytes,
  little-endian): first a configuration ``{"cpu_s", "wall_s", "output_bytes", "file_bytes",
  "fn_name", "sweep", "wipe"}`` (``sweep``: ``"namespace"`` when the harness has a PID namespace
  of its own, its own uid when the sandbox leased it one, else null; ``wipe``: the private tmpfs
  directories it empties after each test), then one request per test ``{"i", "kind", "input" | "args" | "code"}``;
- harness -> judge (stdout, one JSON object per line: the judge parses nothing but JSON from the
  sandbox): one reply per request ``{"i", "status", "timed_out", "time_s", "stdout", "stderr",
  "over", "result"}``, the raw facts of the run; the judge classifies and compares them.

The harness imports neither ``json`` nor ``threading`` nor ``tempfile`` unless a test needs them:
its start is the per-problem cost.

Each test runs in a forked process, so the interpreter start and the preamble's imports are paid
once per harness, while every test still starts from the same clean state and has its own limits:
CPU seconds (``RLIMIT_CPU``, counted from the fork), wall time (its parent kills the test's process
group), output size, and the address-space, file-size and process limits the sandbox put on the
harness. It is forked from a problem process, never from the harness, whose memory holds
everything the judge sent and every test's output (see "the zygote" below). A test that ends its
own process (``os._exit``, a segfault, ``MemoryError``) only ends that fork. A test that ends its
problem process or the harness (a signal to its parent) costs the harness; the judge then starts a
new one for the remaining tests.

Expected outputs never enter the sandbox: the judge sends a test's input only when that test
runs and compares the reply itself, so nothing the candidate can read tells it the answers.

Call-based tests (``kind: call``) see the import preamble, as LeetCode, APPS' testing utility and
LiveCodeBench's runner provide it: the public names of ``PREAMBLE_MODULES`` (never shadowing
a builtin, so ``pow`` stays the builtin), the modules themselves by name, and a recursion limit
of ``PREAMBLE_RECURSION_LIMIT``. The names are put in the module's namespace before the
candidate's code runs; the code's text is not changed. Stdin programs and scripts run as written.
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import resource
import select
import sys
import time
import types
from _json import encode_basestring_ascii as _json_string
from _json import make_scanner as _make_scanner
from _signal import (  # the C module: `signal` imports enum, a noticeable share of the start
    SIG_DFL,
    SIG_IGN,
    SIGCHLD,
    SIGKILL,
)
from _signal import signal as _set_signal

# LiveCodeBench's order (a later module's name wins over an earlier one's)
PREAMBLE_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                    "statistics", "itertools", "functools", "operator", "io", "sys", "json", "typing")
PREAMBLE_RECURSION_LIMIT = 50_000


def preamble_names() -> dict:
    """The names a call-based solution finds already defined."""
    names: dict = {}
    builtin_names = set(dir(builtins))
    for mod_name in PREAMBLE_MODULES:
        mod = __import__(mod_name)
        public = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for n in public:
            if n not in builtin_names and hasattr(mod, n):
                names[n] = getattr(mod, n)
    for mod_name in PREAMBLE_MODULES:
        names[mod_name] = __import__(mod_name)
    return names


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _run_test(req: dict, cfg: dict, compiled: dict, preamble: dict | None, result_fd: int) -> int:
    """In the forked child: run one test, return the exit code."""
    kind = req["kind"]
    if kind == "call":
        sys.setrecursionlimit(PREAMBLE_RECURSION_LIMIT)
        mod = types.ModuleType("solution")
        mod.__dict__.update(preamble or {})
        mod.__file__ = compiled["path"]
        sys.modules["solution"] = mod
        exec(compiled["solution"], mod.__dict__)
        fn_name = cfg.get("fn_name")
        fn = mod.__dict__.get(fn_name)
        if fn is None and isinstance(mod.__dict__.get("Solution"), type):
            fn = getattr(mod.__dict__["Solution"](), fn_name, None)
        if fn is None:
            raise SystemExit(f"the code defines no function or Solution method named {fn_name}")
        result = fn(*req["args"])
        import json

        os.write(result_fd, json.dumps(result, default=repr).encode())
        return 0
    main = types.ModuleType("__main__")
    main.__file__ = compiled["path"]
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    exec(compiled["program" if kind == "stdio" else "solution"], main.__dict__)
    if kind == "script":
        _serve(main.__dict__, req["_calls"], req["_answers"])
    return 0


# -- script tests: the check runs in a process of its own -----------------------------------------
#
# A script test (HumanEval's ``check``) holds the expected values in its own code. Run in the
# program's process, the program could read them (its caller's frame, the check's constants). So
# the program's process (forked first, before the check reaches the harness) only defines its
# functions and answers calls; the check runs in a second process, forked after, which calls the
# program's top-level functions through a pipe. The harness and the check are not dumpable: a
# process of the same uid can read neither's memory, file descriptors or environment. Values cross
# as JSON with tags for what JSON lacks (tuple, set, frozenset, bytes, complex, dicts with any
# keys); the check side never decodes anything but those data types.

_LINE_CAP = 64 << 20  # one call or answer; a longer line ends the test as a runtime error


def encode_value(v, depth: int = 0):
    if depth > 200:
        raise ValueError("the value is nested too deeply to pass between the program and its test")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    d = depth + 1
    if isinstance(v, list):
        return [encode_value(x, d) for x in v]
    if isinstance(v, tuple):
        return {"$t": [encode_value(x, d) for x in v]}
    if isinstance(v, dict):
        return {"$d": [[encode_value(k, d), encode_value(x, d)] for k, x in v.items()]}
    if isinstance(v, frozenset):
        return {"$fs": [encode_value(x, d) for x in v]}
    if isinstance(v, set):
        return {"$s": [encode_value(x, d) for x in v]}
    if isinstance(v, (bytes, bytearray)):
        return {"$b": bytes(v).hex()}
    if isinstance(v, complex):
        return {"$c": [v.real, v.imag]}
    raise TypeError(f"a {type(v).__name__} value cannot pass between the program and its test "
                    "(only None, bool, int, float, str, bytes, complex, list, tuple, dict, set)")


def decode_value(v):
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if isinstance(v, dict):
        if len(v) != 1:
            raise ValueError("malformed value")
        (tag, body), = v.items()
        if tag == "$t":
            return tuple(decode_value(x) for x in body)
        if tag == "$d":
            return {decode_value(k): decode_value(x) for k, x in body}
        if tag == "$s":
            return {decode_value(x) for x in body}
        if tag == "$fs":
            return frozenset(decode_value(x) for x in body)
        if tag == "$b":
            return bytes.fromhex(body)
        if tag == "$c":
            return complex(float(body[0]), float(body[1]))
        raise ValueError("malformed value")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError("malformed value")


class _ScanContext:
    """What the C JSON scanner reads from its context: the ``json`` package costs the harness 5 ms
    to import (it compiles regular expressions), the scanner nothing."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__
    memo: dict = {}


_scan = _make_scanner(_ScanContext())


def _loads(text: str):
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip():
        raise ValueError("not one JSON value")
    return value


def _dumps(v) -> str:
    """JSON of None, bool, int, float, str, list and str-keyed dict (what ``encode_value`` makes);
    the base types' own methods, so a subclass cannot change what is written."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"
        return float.__repr__(v)
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, list):
        return "[" + ",".join(_dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_json_string(k) + ":" + _dumps(x) for k, x in v.items()) + "}"
    raise TypeError(f"cannot write a {type(v).__name__}")


def _send_line(fd: int, obj) -> None:
    data = (_dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _read_line(fd: int, buf: list) -> str | None:
    """The next line from ``fd`` (``buf``: bytes read past it); None at the end of the stream."""
    data = buf[0]
    while b"\n" not in data:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None
        data += chunk
        if len(data) > _LINE_CAP:
            raise ValueError("a message between the program and its test is too long")
    line, buf[0] = data.split(b"\n", 1)
    return line.decode("utf-8", "replace")


def _serve(namespace: dict, calls_fd: int, answers_fd: int) -> None:
    """In the program's process: announce its callables, then answer calls until the check ends."""
    names = sorted(n for n, v in namespace.items() if callable(v) and not n.startswith("__"))
    _send_line(answers_fd, {"names": names})
    buf = [b""]
    while True:
        line = _read_line(calls_fd, buf)
        if line is None:
            return
        call = _loads(line)
        try:
            fn = namespace[call["name"]]
            value = fn(*decode_value(call["args"]), **decode_value(call["kwargs"]))
            reply = {"value": encode_value(value)}
        except SystemExit as e:
            reply = {"error": ["SystemExit", str(e.code)]}
        except BaseException as e:
            reply = {"error": [type(e).__name__, str(e)[:2000]]}
        _send_line(answers_fd, reply)


class _Remote:
    """A function of the program's, called from the check."""

    def __init__(self, name: str, calls_fd: int, answers_fd: int, buf: list):
        self.__name__ = self.__qualname__ = name
        self._fds, self._buf = (calls_fd, answers_fd), buf

    def __call__(self, *args, **kwargs):
        _send_line(self._fds[0], {"name": self.__name__, "args": encode_value(list(args)),
                                  "kwargs": encode_value(kwargs)})
        line = _read_line(self._fds[1], self._buf)
        if line is None:
            raise RuntimeError(f"the program ended during the call to {self.__name__}")
        reply = _loads(line)
        if isinstance(reply, dict) and "value" in reply:
            return decode_value(reply["value"])
        kind, message = reply["error"]
        exc = getattr(builtins, kind, None) if isinstance(kind, str) else None
        if isinstance(exc, type) and issubclass(exc, Exception):
            raise exc(message)  # the program's builtin exception, as the check would have seen it
        raise RuntimeError(f"{self.__name__} raised {kind}: {message}")


def check_needs(check_code: str, path: str, entry: str | None) -> set:
    """The program's names the check may be given: the entry point, and every other name the check
    uses but neither defines nor imports, that is not a builtin. A program that defines ``abs``
    does not change the ``abs`` of ``assert abs(candidate(x) - y) < 1e-6``: the check keeps the
    builtin (HumanEval's own harness, which runs the check after the program in one namespace,
    lets the program's ``abs`` replace it)."""
    import symtable

    top = symtable.symtable(check_code, path, "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used, tables = set(), [top]
    while tables:
        table = tables.pop()
        used.update(table.get_identifiers())
        tables.extend(table.get_children())
    needs = used - defined - set(dir(builtins))
    if entry:
        needs.add(entry)  # the function under test is the program's, whatever its name
    return needs


def _check(check_code: str, path: str, calls_fd: int, answers_fd: int, entry: str | None) -> int:
    """In the check's process: bind the program's functions the check needs (``check_needs``), run
    the check; the exit code."""
    buf = [b""]
    line = _read_line(answers_fd, buf)
    if line is None:
        print("the program ended before its test could call it", file=sys.stderr)
        return 1
    hello = _loads(line)
    names = hello.get("names") if isinstance(hello, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        print("the program answered its test out of protocol", file=sys.stderr)
        return 1
    code = compile(check_code, path, "exec", dont_inherit=True)
    needs = check_needs(check_code, path, entry)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update({n: _Remote(n, calls_fd, answers_fd, buf) for n in names if n in needs})
    exec(code, namespace)
    return 0


def _not_dumpable() -> None:
    """Make this process (and what it forks) unreadable to processes of its own uid."""
    if sys.platform.startswith("linux"):
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _close_all_but(keep: tuple) -> None:
    """Close every descriptor but ``keep``: a test's or a check's process holds no channel of the
    harness's (its messages, the zygote's, the problem process's)."""
    lo = 0
    for fd in sorted(set(keep)) + [max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], max(keep) + 1)]:
        if fd > lo:
            os.closerange(lo, fd)
        lo = fd + 1


def _checker_child(code: str, cfg: dict, path: str, fds: tuple, keep: tuple, workdir: str) -> None:
    """The forked check process (forked from the harness, after the program's process exists: the
    program's image never holds the check); never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        os.chdir(workdir)
        out_fd, err_fd = fds
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        _close_all_but((0, 1, 2, *keep))
        cpu = max(1, int(cfg["cpu_s"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        status = _status_of(lambda: _check(code, path, *keep, cfg.get("fn_name")))
    except BaseException:
        status = 1
    finally:
        _exit_now(status)


def _child(req: dict, cfg: dict, compiled: dict, preamble: dict | None, fds: list) -> None:
    """The forked test process (forked from the problem process); never returns. ``fds``: its
    stdin, stdout, stderr and result files, then a call's arguments or a script's two pipes."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(req["workdir"])
        in_fd, out_fd, err_fd, result_fd, *extra = fds
        os.dup2(in_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        _close_all_but((0, 1, 2, result_fd, *extra))
        if req["kind"] == "call":
            req["args"] = marshal.loads(_read_all(extra[0]))
            os.close(extra[0])
        elif req["kind"] == "script":
            req["_calls"], req["_answers"] = extra
        cpu = max(1, int(cfg["cpu_s"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        # the harness may write files as large as the largest input; the test only what the limits allow
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
        if "random" in sys.modules:  # imported by the preamble: fresh randomness, as a new process has
            sys.modules["random"].seed()
        def run() -> int:
            code = compiled["program" if req["kind"] == "stdio" else "solution"]
            if isinstance(code, BaseException):
                raise code
            return _run_test(req, cfg, compiled, preamble, result_fd)

        code = _status_of(run)
        # as at interpreter exit: wait for the program's threads (if it imported threading, as the
        # interpreter does), run its atexit hooks
        threading = sys.modules.get("threading")
        if threading is not None:
            for t in threading.enumerate():
                if t is not threading.main_thread() and not t.daemon:
                    t.join()
        atexit._run_exitfuncs()
    except BaseException:
        code = 1
    finally:
        _exit_now(code)


def _status_of(run) -> int:
    """The exit status of ``run()`` as an interpreter would give it: its SystemExit's code, 1 for an
    exception (its traceback printed, as at top level)."""
    try:
        return run()
    except SystemExit as e:
        return _exit_code(e)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1


def _exit_now(code: int) -> None:
    """End a forked process: its output flushed, no cleanup of the harness's state."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 0xFF)


def _wait(pid: int, wall_s: float | None) -> tuple[int, bool]:
    """Wait for the test process up to ``wall_s`` (None: until it ends); (exit status or -signal,
    timed out)."""
    if wall_s is None:
        return _exit_status(os.waitpid(pid, 0)[1]), False
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + wall_s
    if pidfd is not None:
        try:
            if not select.select([pidfd], [], [], wall_s)[0]:
                timed_out = True
        finally:
            os.close(pidfd)
    else:  # no pidfd (not Linux): poll
        delay = 0.0005
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return _exit_status(status), False
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
    if timed_out:
        _kill_group(pid)
    _, status = os.waitpid(pid, 0)
    return _exit_status(status), timed_out


def _exit_status(status: int) -> int:
    return -(status & 0x7F) if status & 0x7F else status >> 8


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, SIGKILL), lambda: os.kill(pid, SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


SWEEP_MIN_UID = 100_000  # the sandbox's own uids start at 200,000; a login or service uid is never swept


def _sweep_uid(uid: int, zygote: int) -> None:
    """Kill every other process of ``uid`` but the zygote and its children (the problem processes):
    what a test left behind, even outside its group. Only when the sandbox gave the harness a uid of
    its own: the judge passes that uid, and it must be the one this process runs as and in the
    sandbox's range, or nothing is killed."""
    if not isinstance(uid, int) or isinstance(uid, bool) or uid < SWEEP_MIN_UID or uid != os.getuid():
        return
    _kill_others(lambda pid, ppid: zygote not in (pid, ppid) and os.stat(f"/proc/{pid}").st_uid == uid)


def _sweep_namespace(zygote: int) -> None:
    """Kill every process of this PID namespace but its reaper (1), the harness, the zygote and its
    children (the problem processes): what a test left behind, detached or not. Only the sandbox's
    own processes are in it, and no test can become the zygote's child."""
    _kill_others(lambda pid, ppid: pid != 1 and zygote not in (pid, ppid))


def _kill_others(chosen) -> None:
    """SIGKILL every live process but this one for which ``chosen(pid, parent pid)`` holds, until none
    is left."""
    me = os.getpid()
    for _ in range(50):
        found = False
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
                if state in ("Z", "X") or not chosen(int(d), int(ppid)):
                    continue
                os.kill(int(d), SIGKILL)
                found = True
            except (OSError, IndexError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.002)


def _empty_dir(path: str, keep: tuple = ()) -> None:
    """Remove what a test left in one of the sandbox's private tmpfs directories."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        if name in keep:
            continue
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            _remove_tree(p)
        else:
            try:
                os.unlink(p)
            except OSError:
                pass


def _remove_ipc() -> None:
    """Remove the System V shared memory, queues and semaphores a test made: they outlive processes
    (its IPC namespace is the sandbox's own, so only tests made them). POSIX queues cannot be made:
    the sandbox's RLIMIT_MSGQUEUE is 0."""
    libc = None
    for kind, call in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        if not ids:
            continue
        if libc is None:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
        for ipc_id in ids:
            if kind == "sem":
                libc.semctl(ipc_id, 0, 0)  # IPC_RMID
            else:
                getattr(libc, call)(ipc_id, 0, None)


def _remove_tree(path: str) -> None:
    """Best effort: a test may leave anything in its directory, even unreadable or unwritable."""
    for root, dirs, _ in os.walk(path):  # a test may have taken its own rights to a directory away
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700)
            except OSError:
                pass
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files + dirs:
            p = os.path.join(root, name)
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    os.rmdir(p)
                else:
                    os.unlink(p)
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _scratch_fd() -> int:
    """An anonymous file for a test's input, output, errors or result (in memory where Linux allows;
    ``tempfile`` costs the harness's start more than all its other imports)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("test", os.MFD_CLOEXEC)
    import tempfile

    fd, path = tempfile.mkstemp()
    os.unlink(path)
    return fd


def _read_capped(fd: int, cap: int) -> tuple[str, bool]:
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    chunks, total = [], 0
    while total < min(size, cap):
        chunk = os.read(fd, min(cap - total, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace"), size > cap


def _reap_strays() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _receive(stream) -> dict | None:
    head = stream.read(8)
    if len(head) < 8:
        return None  # the judge closed the channel: done
    body = stream.read(int.from_bytes(head, "little"))
    return marshal.loads(body)


def _write_solution(path: str, source: str) -> None:
    """``solution.py`` as loaded (tracebacks quote its lines); a fresh file, whatever a test left there."""
    try:
        os.unlink(path)
    except OSError:
        pass
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(source)


def _restore_solution(compiled: dict) -> None:
    """Put ``solution.py`` back as loaded, should a test have changed it."""
    try:
        with open(compiled["path"], encoding="utf-8", errors="surrogateescape") as f:
            if f.read() == compiled["source"]:
                return
    except OSError:
        pass
    _write_solution(compiled["path"], compiled["source"])


def _compile_solution(path: str) -> dict:
    """In the problem process: the solution written at ``path``, compiled once for all its tests.
    ``program``: what a stdin test runs, the solution itself or, for a program with a top-level
    ``return``, ``program_with_return``'s."""
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        source = f.read()
    try:
        solution: object = compile(source, path, "exec", dont_inherit=True)
    except BaseException as e:  # a SyntaxError is each test's runtime error, raised in its process
        solution = e
    program = solution
    if isinstance(solution, SyntaxError) and solution.msg == "'return' outside function":
        program = program_with_return(source, path) or solution
    return {"solution": solution, "program": program, "path": path}


# -- a top-level ``return`` in a stdin program -------------------------------------------------------
#
# APPS's harness runs a standard-input program's body inside a function, so a top-level ``return``
# (accepted human solutions in APPS have one) ends the program. Wrapping every program would change
# what others do (their top-level names would become a function's locals: ``global x`` in their
# functions, ``locals()``, ``from m import *`` inside a function, class bodies), so only a program
# that does not compile as a module *because of* a top-level ``return`` is rewritten, and by its
# syntax tree, not its text (indenting the text would change its multi-line strings, as APPS's does):
#
#   <docstring, the leading import statements: left at module level, as APPS leaves them>
#   def <program>():
#       global <every name of the module's own scope>   # so its names stay module globals
#       <the rest of the program>
#   <program>()
#
# The ``global`` declaration keeps the module's semantics for everything else: assignments, defs,
# classes and imports bind globals, the program's functions see and rebind them as before, and
# ``__name__`` is still ``"__main__"``. ``<program>`` is not an identifier, so the program cannot
# name it. A top-level annotated assignment becomes a plain one (a declared global cannot be
# annotated). A program the rewrite cannot express (a ``from m import *`` after other code, a
# top-level ``yield`` or ``await``) keeps its SyntaxError.

_PROGRAM = "<program>"


class _TopLevel:
    """Rewrites the top-level statements of a program (not the bodies of its defs, classes and
    lambdas, which have scopes of their own)."""

    def __init__(self, ast):
        self.ast = ast

    def rewrite(self, statements: list) -> list:
        out = []
        for node in statements:
            out.extend(self.statement(node))
        return out

    def statement(self, node) -> list:
        ast = self.ast
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [node]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is None:  # ``x: int`` alone binds nothing
                return [ast.copy_location(ast.Pass(), node)]
            return [ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)]
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            raise SyntaxError("import * only allowed at module level")
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, field, None), list):
                setattr(node, field, self.rewrite(getattr(node, field)))
        for handler in getattr(node, "handlers", None) or ():
            handler.body = self.rewrite(handler.body)
        for case in getattr(node, "cases", None) or ():
            case.body = self.rewrite(case.body)
        return [node]


def program_with_return(source: str, path: str):
    """The program's code with its top-level ``return`` ending it, as APPS's harness runs it (see
    above); None when it cannot be expressed so (the caller keeps the SyntaxError)."""
    import ast
    import symtable

    try:
        tree = ast.parse(source, path)
        names = sorted(symtable.symtable(source, path, "exec").get_identifiers())
        head = 0
        while head < len(tree.body) and (isinstance(tree.body[head], (ast.Import, ast.ImportFrom)) or (
                head == 0 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant)
                and isinstance(tree.body[0].value.value, str))):
            head += 1
        rest = _TopLevel(ast).rewrite(tree.body[head:])
        fields = {"name": _PROGRAM, "args": ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                          kw_defaults=[], kwarg=None, defaults=[]),
                  "body": ([ast.Global(names=names)] if names else []) + rest, "decorator_list": [],
                  "returns": None}
        if "type_params" in ast.FunctionDef._fields:  # Python >= 3.12
            fields["type_params"] = []
        first = rest[0] if rest else tree.body[-1]
        fn = ast.copy_location(ast.FunctionDef(**fields), first)
        call = ast.copy_location(ast.Expr(ast.Call(func=ast.Name(_PROGRAM, ast.Load()), args=[], keywords=[])),
                                 tree.body[-1])
        tree.body = tree.body[:head] + [fn, call]
        code = compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    for const in code.co_consts:  # a top-level yield or await would make it a generator or coroutine
        if isinstance(const, types.CodeType) and const.co_name == _PROGRAM and const.co_flags & 0x3A0:
            return None
    return code


# -- the zygote: every test starts from an image that never held a message ---------------------------
#
# The harness reads everything the judge sends: every problem's solution, every test's input, every
# script's check (its expected values), and every test's output passes through it. A process forked
# from it starts with a copy of that memory (freed buffers included), and a program can read its own
# memory: forked from the harness, the next answer to the same task found the previous answer's
# check and output there. So no test is forked from the harness. Before it reads its first message,
# the harness forks the *zygote*, which reads nothing but one-byte requests from then on: for each
# problem it forks a *problem process* that reads the solution from ``solution.py``, compiles it
# and forks each of that problem's tests. A test's image is therefore the zygote's (the harness's
# code and the imports, never a message) plus its own problem's solution; its input, output and
# result files and a script's pipes reach it as descriptors (``SCM_RIGHTS``), never as bytes
# through the problem process. A script's check runs in a process forked from the harness, which,
# like the harness and every process of the harness, is not dumpable: a test can read neither.
#
#   harness (messages, replies, checks' processes) -> zygote (one byte a problem)
#                                                      -> problem process (its solution) -> test

import _socket

_FDS_MAX = 8


def _send(sock, data: bytes, fds: tuple = ()) -> None:
    anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))]
    sock.sendmsg([data], anc if fds else [])


def _recv(sock, size: int) -> tuple[bytes, list]:
    """One message of at most ``size`` bytes and the descriptors it carried; ``b""`` when the other
    side is gone. A longer message is an error: the reader never holds more than it asked for."""
    data, anc, flags, _ = sock.recvmsg(size, _socket.CMSG_SPACE(4 * _FDS_MAX), _socket.MSG_CMSG_CLOEXEC)
    fds = [int.from_bytes(body[i:i + 4], sys.byteorder) for level, kind, body in anc
           if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS for i in range(0, len(body) - 3, 4)]
    if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise OSError("a message between the harness's processes was longer than expected")
    return data, fds


def _channel() -> tuple:
    return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)


def _fork_process(run) -> tuple:
    """Fork a process of the harness's that runs ``run(its end of a new channel)`` and then exits;
    this side's end of the channel and the process's pid."""
    ours, theirs = _channel()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ours.close()
            run(theirs)
            code = 0
        except BaseException:
            pass
        finally:
            _exit_now(code)
    theirs.close()
    return ours, pid


def _start_zygote() -> tuple:
    """Fork the zygote (before the harness has read anything); the harness's end of its channel and
    its pid."""
    def zygote(channel) -> None:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # the judge's channel is the harness's alone
        os.dup2(devnull, 1)
        os.close(devnull)
        _zygote(channel)

    return _fork_process(zygote)


def _zygote(channel) -> None:
    """The zygote: on each one-byte request, fork a problem process and hand the harness its channel.
    After its first answer it imports the preamble of call-based tests (while the harness is busy with
    the first problem), so every later problem process has it at no cost."""
    preamble = None
    _set_signal(SIGCHLD, SIG_IGN)  # problem processes that end are reaped at once: no zombie holds a process

    def problem(theirs) -> None:
        _set_signal(SIGCHLD, SIG_DFL)  # it waits for its tests
        channel.close()
        _problem_process(theirs, preamble)

    while True:
        request, fds = _recv(channel, 1)
        for fd in fds:
            os.close(fd)
        if request != b"z":
            return
        ours, pid = _fork_process(problem)
        _send(channel, b"%d" % pid, (ours.fileno(),))
        ours.close()
        if preamble is None:
            preamble = preamble_names()


def _problem_process(channel, preamble: dict | None) -> None:
    """A problem process: compiles its problem's solution once and forks each test, waits for it
    (its wall limit; a script's program ends when the harness ends it, after its check) and reports
    the test's pid, then its exit status. It holds the zygote's image, its own solution and each
    test's index, kind and directory: never a test's input, output or check."""
    # rehearse while it waits (it was forked ahead, during the previous problem): its first compile and
    # file read would otherwise pay the copy-on-write faults of those paths on the problem's time
    compile("x = 1\n", "<rehearsal>", "exec", dont_inherit=True)
    with open("/proc/self/stat") as f:
        f.read()
    data, _ = _recv(channel, 1 << 16)
    if not data:
        return
    cfg = marshal.loads(data)
    compiled = _compile_solution(cfg["path"])
    while True:
        data, fds = _recv(channel, 1 << 16)
        if not data:
            return
        req = marshal.loads(data)
        if req["kind"] == "call" and preamble is None:
            preamble = preamble_names()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(req, cfg, compiled, preamble, fds)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child has set it, or is gone
        script = req["kind"] == "script"
        if script:  # the harness ends a script's program when its check ends
            _send(channel, b"pid %d" % pid)
        status, timed_out = _wait(pid, None if script else cfg["wall_s"])
        elapsed = time.perf_counter() - t0
        _kill_group(pid)  # what the test left in its process group
        _send(channel, b"done %d %d %.9f" % (status, timed_out, elapsed))


class _Problem:
    """The harness's side of a problem process. One is always asked for ahead (``ask``, then
    ``take``): the zygote forks the next problem's process while the harness runs this one's tests."""

    @staticmethod
    def ask(zygote) -> None:
        _send(zygote, b"z")

    def __init__(self, zygote):
        data, fds = _recv(zygote, 32)
        if not data or len(fds) != 1:
            raise SystemExit("the zygote did not fork a problem process")
        self.pid = int(data)
        self.channel = _socket.socket(fileno=fds[0])

    def load(self, cfg: dict) -> None:
        _send(self.channel, marshal.dumps(cfg))

    def start(self, req: dict, fds: list) -> int | None:
        """Have it fork the test; a script test's pid (its program, which the harness ends)."""
        _send(self.channel, marshal.dumps(req), tuple(fds))
        return int(self._reply(b"pid")[0]) if req["kind"] == "script" else None

    def ready(self) -> bool:
        return bool(select.select([self.channel], [], [], 0)[0])

    def done(self) -> tuple[int, bool, float]:
        """The test's exit status (or -signal), whether it ran out of wall time, its seconds."""
        status, timed_out, elapsed = self._reply(b"done")
        return int(status), timed_out == b"1", float(elapsed)

    def _reply(self, kind: bytes) -> list:
        data, fds = _recv(self.channel, 64)
        for fd in fds:
            os.close(fd)
        words = data.split()
        if not words or words[0] != kind:
            # a test ended it (a signal to its parent): the judge starts a new harness for the rest
            raise SystemExit("the problem process ended during a test")
        return words[1:]

    def close(self) -> None:
        self.channel.close()  # it ends when it reads the end of its channel


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def main() -> None:
    # not dumpable, before anything is forked: no process of the harness (the zygote, problem
    # processes, tests, checks) can read another's memory, trace it or reach its descriptors
    _not_dumpable()
    zygote, zygote_pid = _start_zygote()
    _Problem.ask(zygote)  # the first problem's process, forked while the judge's first message comes
    requests = os.fdopen(os.dup(0), "rb")
    reply_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    cfg = _receive(requests)
    home = os.getcwd()
    solution: dict | None = None
    problem: _Problem | None = None
    while True:
        req = _receive(requests)
        if req is None:
            return
        if "solution" in req:  # the next problem
            if problem is not None:
                problem.close()
            solution = {"source": req["solution"], "path": os.path.join(home, "solution.py")}
            cfg["fn_name"] = req.get("fn_name")
            _write_solution(solution["path"], solution["source"])
            problem = _Problem(zygote)
            problem.load({"path": solution["path"], "fn_name": cfg["fn_name"], "cpu_s": cfg["cpu_s"],
                          "wall_s": cfg["wall_s"], "file_bytes": cfg["file_bytes"]})
            _Problem.ask(zygote)  # the next one's
            _write_reply(reply_fd, {"loaded": True, "cpu_s": _own_cpu_s()})
            continue
        kind = req["kind"]
        fds = [_scratch_fd() for _ in range(4)]
        if kind == "stdio":
            os.write(fds[0], req["input"].encode())
            os.lseek(fds[0], 0, os.SEEK_SET)
        workdir = os.path.join(home, f"test-{req['i']}")  # each test starts in an empty directory of its own
        _remove_tree(workdir)
        os.mkdir(workdir, 0o700)
        extra: list = []
        if kind == "call":
            extra = [_scratch_fd()]
            os.write(extra[0], marshal.dumps(req["args"]))
        elif kind == "script":
            calls_r, calls_w = os.pipe()
            answers_r, answers_w = os.pipe()
            extra = [calls_r, answers_w]
        t0 = time.perf_counter()
        pid = problem.start({"i": req["i"], "kind": kind, "workdir": workdir}, fds + extra)
        for fd in extra:
            os.close(fd)
        check_fds: tuple = ()
        if kind == "script":
            # the program's process exists: only now may the check's code come
            _write_reply(reply_fd, {"i": req["i"], "ready": True})
            message = _receive(requests)
            if message is None:
                return
            check_fds = (_scratch_fd(), _scratch_fd())
            import symtable  # noqa: F401  (check_needs reads the check with it: imported once, here, not per check)

            kpid = os.fork()
            if kpid == 0:
                _checker_child(message["code"], cfg, solution["path"], check_fds, (calls_w, answers_r), workdir)
            del message
            try:
                os.setpgid(kpid, kpid)
            except OSError:
                pass
            os.close(calls_w)
            os.close(answers_r)
            status, timed_out = _wait(kpid, cfg["wall_s"])
            _kill_group(kpid)
            ended_first = problem.ready()  # the program ended before its check did
            _kill_group(pid)
            program_status = problem.done()[0]
            if status != 0 and ended_first and program_status < 0:
                status = program_status  # the program was killed (its CPU limit): that is why
            elapsed = time.perf_counter() - t0
        else:
            status, timed_out, elapsed = problem.done()
        if cfg.get("sweep") == "namespace":
            _sweep_namespace(zygote_pid)
        elif cfg.get("sweep") is not None:
            _sweep_uid(cfg["sweep"], zygote_pid)
        _reap_strays()
        _remove_tree(workdir)
        for d in cfg.get("wipe") or ():
            _empty_dir(d)
        if cfg.get("wipe"):  # the sandbox's own namespaces: the next test finds nothing of this one's
            _empty_dir(home, keep=("main.py", "solution.py"))
            _remove_ipc()
            _restore_solution(solution)
        stdout, out_over = _read_capped(fds[1], cfg["output_bytes"])
        stderr, err_over = _read_capped(fds[2], cfg["output_bytes"])
        result, res_over = _read_capped(fds[3], cfg["output_bytes"])
        if check_fds:  # what the check said (its assertion) follows the program's own errors
            check_err, check_over = _read_capped(check_fds[1], cfg["output_bytes"])
            stderr, err_over = (stderr + "\n" + check_err if stderr else check_err), err_over or check_over
        for fd in fds + list(check_fds):
            os.close(fd)
        reply = {"i": req["i"], "status": status, "timed_out": timed_out, "time_s": elapsed, "stdout": stdout,
                 "stderr": stderr, "over": out_over or err_over or res_over,
                 "result": result if kind == "call" and result else None, "cpu_s": _own_cpu_s()}
        _write_reply(reply_fd, reply)


def _own_cpu_s() -> float:
    """The harness's own CPU seconds so far: the judge retires it well before its CPU limit."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write_reply(fd: int, reply: dict) -> None:
    data = (_dumps(reply) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


if __name__ == "__main__":
    main()
