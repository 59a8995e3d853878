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

Each test runs in a process forked from the harness, so the interpreter start and the preamble's
imports are paid once per problem, while every test still starts from the same clean state and
has its own limits: CPU seconds (``RLIMIT_CPU``, counted from the fork), wall time (the harness
kills the test's process group), output size, and the address-space, file-size and process
limits the sandbox put on the harness. A test that ends its own process (``os._exit``, a
segfault, ``MemoryError``) only ends that fork. A test that ends the harness itself (a signal to
its parent) costs the harness; the judge then starts a new one for the remaining tests.

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
from _signal import (
    SIGKILL,  # the C module: `signal` imports enum, a noticeable share of the start
)

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
    code = compiled["solution"] if kind == "stdio" else compile(
        compiled["source"] + "\n\n" + req["code"], compiled["path"], "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__file__ = compiled["path"]
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    exec(code, main.__dict__)
    return 0


def _child(req: dict, cfg: dict, compiled: dict, preamble: dict | None, fds: tuple, channel: tuple,
           workdir: str) -> None:
    """The forked test process; never returns."""
    code = 1
    try:
        for fd in channel:
            os.close(fd)
        os.setpgid(0, 0)
        os.chdir(workdir)
        in_fd, out_fd, err_fd, result_fd = fds
        os.dup2(in_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        cpu = max(1, int(cfg["cpu_s"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        # the harness may write files as large as the largest input; the test only what the limits allow
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
        if "random" in sys.modules:  # imported by the preamble: fresh randomness, as a new process has
            sys.modules["random"].seed()
        try:
            if req["kind"] != "script" and isinstance(compiled["solution"], BaseException):
                raise compiled["solution"]
            code = _run_test(req, cfg, compiled, preamble, result_fd)
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
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
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code & 0xFF)


def _wait(pid: int, wall_s: float) -> tuple[int, bool]:
    """Wait for the test process up to ``wall_s``; (exit status or -signal, timed out)."""
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


def _sweep_uid(uid: int) -> None:
    """Kill every other process of ``uid``: what a test left behind, even outside its group.
    Only when the sandbox gave the harness a uid of its own: the judge passes that uid, and it must
    be the one this process runs as and in the sandbox's range, or nothing is killed."""
    me = os.getpid()
    if not isinstance(uid, int) or isinstance(uid, bool) or uid < SWEEP_MIN_UID or uid != os.getuid():
        return
    for _ in range(50):
        found = False
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                if os.stat(f"/proc/{d}").st_uid != uid:
                    continue
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        continue
                os.kill(int(d), SIGKILL)
                found = True
            except (OSError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.002)


def _sweep_namespace() -> None:
    """Kill every process of this PID namespace but its reaper (1) and the harness: what a test left
    behind, detached or not. Only the sandbox's own processes are in it."""
    me = os.getpid()
    for _ in range(50):
        found = False
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) in (1, me):
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        continue
                os.kill(int(d), SIGKILL)
                found = True
            except (OSError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.002)


def _empty_dir(path: str) -> None:
    """Remove what a test left in one of the sandbox's private tmpfs directories."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            _remove_tree(p)
        else:
            try:
                os.unlink(p)
            except OSError:
                pass


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


def _json_object(d: dict) -> str:
    """The reply as JSON without the json package (flat: str, int, float, bool, None values)."""
    def value(v) -> str:
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return _json_string(v)
        return repr(v)

    return "{" + ", ".join(f"{_json_string(k)}: {value(v)}" for k, v in d.items()) + "}"


def main() -> None:
    requests = os.fdopen(os.dup(0), "rb")
    reply_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    cfg = _receive(requests)
    with open("solution.py", encoding="utf-8", errors="surrogateescape") as f:
        source = f.read()
    home = os.getcwd()
    try:
        solution: object = compile(source, os.path.join(home, "solution.py"), "exec", dont_inherit=True)
    except BaseException as e:  # a SyntaxError is each test's runtime error, raised in its process
        solution = e
    # scripts compile source + test in the test process
    compiled = {"source": source, "solution": solution, "path": os.path.join(home, "solution.py")}
    preamble = None
    while True:
        req = _receive(requests)
        if req is None:
            return
        if req["kind"] == "call" and preamble is None:
            preamble = preamble_names()
        fds = tuple(_scratch_fd() for _ in range(4))
        if req["kind"] == "stdio":
            os.write(fds[0], req["input"].encode())
            os.lseek(fds[0], 0, os.SEEK_SET)
        sys.stdout.flush()
        sys.stderr.flush()
        workdir = os.path.join(home, f"test-{req['i']}")  # each test starts in an empty directory of its own
        _remove_tree(workdir)
        os.mkdir(workdir, 0o700)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(req, cfg, compiled, preamble, fds, (requests.fileno(), reply_fd), workdir)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child has set it, or is gone
        status, timed_out = _wait(pid, cfg["wall_s"])
        elapsed = time.perf_counter() - t0
        _kill_group(pid)
        if cfg.get("sweep") == "namespace":
            _sweep_namespace()
        elif cfg.get("sweep") is not None:
            _sweep_uid(cfg["sweep"])
        _reap_strays()
        _remove_tree(workdir)
        for d in cfg.get("wipe") or ():
            _empty_dir(d)
        stdout, out_over = _read_capped(fds[1], cfg["output_bytes"])
        stderr, err_over = _read_capped(fds[2], cfg["output_bytes"])
        result, res_over = _read_capped(fds[3], cfg["output_bytes"])
        for fd in fds:
            os.close(fd)
        reply = {"i": req["i"], "status": status, "timed_out": timed_out, "time_s": elapsed, "stdout": stdout,
                 "stderr": stderr, "over": out_over or err_over or res_over,
                 "result": result if req["kind"] == "call" and result else None}
        data = (_json_object(reply) + "\n").encode()
        while data:
            data = data[os.write(reply_fd, data):]


if __name__ == "__main__":
    main()
