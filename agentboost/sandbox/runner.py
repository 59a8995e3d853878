"""The one sandbox for model-written code.

Every tool and reward that runs code goes through ``run_python`` (or ``SandboxProcess``, the judge
harness's long-lived form). A reward that can be read will be hacked, so the program sees nothing
of the host: ``protections()`` reports what holds here, ``agentboost sandbox info`` prints it.

| protection | root + bubblewrap | user + bubblewrap (user namespaces) | root, no bubblewrap | neither |
|---|---|---|---|---|
| own filesystem root: only /usr, the interpreter's prefix, ld.so.cache; no project, run, job or home dirs, no host unix sockets | yes | yes | no | no |
| own PID namespace and /proc: no other process visible or signalable | yes | yes | no | no |
| no network (own network namespace; abstract sockets too) | yes | yes | yes | no |
| fresh tmpfs work dir, /tmp and /dev/shm of ``disk_mb`` each | yes | yes | /tmp masked | no |
| identity of its own: a leased uid (no collision across processes) or a user namespace | yes (leased uid) | yes (user namespace) | yes (leased uid) | no |
| whole-run memory and process limits (control group; OOM kills counted) | yes | only with a delegated cgroup | yes | no |
| rlimits per process (CPU, address space, file size, no core), wall clock, output cap, minimal environment | yes | yes | yes | yes |
| no kernel keyring (a seccomp filter: ``sandbox.seccomp``) | yes | yes | yes | yes |

``isolated`` is true with the first two rows and the third; without it, ``require_isolation``
refuses runs that execute model-written code unless the user allows a weak sandbox
(``sandbox.allow_weak: true``). How each row is tested: ``tests/sandbox/test_attacks.py``.
"""

from __future__ import annotations

import ctypes
import json
import marshal
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import cgroups, isolation, seccomp
from .identities import UidLease, kill_uid, processes_of_uid

VERDICTS = ("ok", "runtime_error", "timeout", "memory_limit", "output_limit", "sandbox_error")

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MASKED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


@dataclass(frozen=True)
class SandboxLimits:
    cpu_s: float = 5.0
    wall_s: float = 10.0
    memory_mb: int = 512  # per process (address space) and, with a control group, all processes together
    output_bytes: int = 1_000_000
    file_bytes: int = 10_000_000
    processes: int = 32
    network: bool = False
    disk_mb: int = 64  # each writable tmpfs: the work dir, /tmp, /dev/shm


@dataclass
class SandboxResult:
    verdict: str
    exit_status: int | None  # the exit code, or -signal when killed by one
    stdout: str
    stderr: str
    time_s: float
    output_truncated: bool = False
    killed_processes: int = 0  # processes of this run alive when it was ended (past its wall time: the program too), killed by the sweep
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def _readable_by_all(path: str) -> bool:
    """Whether an unprivileged uid can run this interpreter (every parent directory searchable)."""
    p = Path(os.path.realpath(path))
    try:
        if not p.stat().st_mode & stat.S_IROTH or not p.stat().st_mode & stat.S_IXOTH:
            return False
        return all(d.stat().st_mode & stat.S_IXOTH for d in p.parents)
    except OSError:
        return False


@lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _probe(mode: str, python: str) -> tuple[bool, str]:
    """Run ``print('ok')`` under ``mode``; (worked, the error when not)."""
    try:
        run = _Run.start("print('ok')", None, SandboxLimits(), subprocess.PIPE, mode=mode, python=python,
                         group=False)
    except OSError as e:
        return False, str(e)
    try:
        out, err = run.proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        out, err = b"", b"the probe did not finish in 30 s"
    finally:
        run.finish()
    if out.decode(errors="replace").strip() == "ok":
        return True, ""
    return False, err.decode(errors="replace").strip()[-300:] or f"exit status {run.proc.returncode}"


@lru_cache(maxsize=1)
def protections() -> dict[str, object]:
    """Which protections this machine gives; probed once by running a child under them."""
    linux = sys.platform.startswith("linux")
    root = linux and os.geteuid() == 0
    info: dict[str, object] = {"platform": sys.platform, "rlimits": True, "process_group": True,
                               "scratch_dir": True, "minimal_env": True, "mode": "weak"}
    python = isolation.interpreter()
    missing: list[str] = []
    bwrap = isolation.bwrap_path() if linux else None
    if bwrap is None:
        missing.append("bubblewrap (bwrap) not found: install it (apt-get install bubblewrap; "
                       "setup.sh does as root) or set AGENTBOOST_BWRAP")
    elif root and isolation.setpriv_path() is None:
        missing.append("setpriv (util-linux) not found: root needs it to drop to the sandbox uid")
    else:
        mode = "bwrap-root" if root else "bwrap-user"
        ok, error = _probe(mode, python)
        if ok:
            info["mode"] = mode
        else:
            why = ("user namespaces may be off (kernel.unprivileged_userns_clone, "
                   "user.max_user_namespaces, an AppArmor or SELinux policy)" if not root else "")
            missing.append(f"bubblewrap failed to start a sandbox: {error}" + (f"; {why}" if why else ""))
    if info["mode"] == "weak" and root:
        if not _readable_by_all(python):  # the weak mode runs it as the leased uid, on the host's files
            python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or python
        if _readable_by_all(python) and _probe("weak-root", python)[0]:
            info["mode"] = "weak-root"
    elif info["mode"] == "weak" and not linux:
        missing.append("the filesystem, process and network namespaces need Linux")
    isolated = str(info["mode"]).startswith("bwrap")
    info["python"] = python
    info["filesystem_view"] = info["pid_namespace"] = isolated
    info["network_namespace"] = info["private_tmp"] = isolated or info["mode"] == "weak-root"
    info["own_identity"] = info["mode"] != "weak"
    info["drop_user"] = info["mode"] in ("bwrap-root", "weak-root")
    groups_ok, how = cgroups.available() if linux else (False, "control groups need Linux")
    info["whole_run_limits"] = groups_ok
    info["whole_run_limits_how"] = how
    if not isolated:
        missing.append("without a filesystem view of its own the program can read every world-readable "
                       "host file (tasks, run and job directories) and see every process")
    info["isolated"] = isolated
    info["keyring_blocked"] = seccomp.supported()
    if not info["keyring_blocked"]:
        missing.append("the keyring filter does not know this machine's architecture (sandbox/seccomp.py): "
                       "programs of one uid can pass notes through the kernel keyring")
    info["missing"] = missing
    return info


def describe_protections() -> str:
    p = protections()
    how = {"bwrap-root": "bubblewrap as root, leased uid", "bwrap-user": "bubblewrap in a user namespace",
           "weak-root": "leased uid, network namespace, masked /tmp; no filesystem view",
           "weak": "rlimits only"}[str(p["mode"])]
    limits = (f"whole-run limits: {p['whole_run_limits_how']}" if p["whole_run_limits"]
              else f"whole-run limits: none ({p['whole_run_limits_how']}); per-process limits apply")
    text = f"sandbox: {'isolated' if p['isolated'] else 'NOT isolated'} ({how}); {limits}; python {p['python']}"
    if not p["isolated"]:
        text += "; missing: " + "; ".join(p["missing"])
    return text


WEAK_HINT = ("install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or accept a weak "
             "sandbox with sandbox.allow_weak: true (AGENTBOOST_SANDBOX_ALLOW_WEAK=1)")


def _weak_allowed() -> bool:
    return os.environ.get("AGENTBOOST_SANDBOX_ALLOW_WEAK", "").strip().lower() in ("1", "true", "yes")


def require_isolation(allow_weak: bool | None = None, what: str = "this run") -> str | None:
    """Refuse to run model-written code without isolation: raises ``InputError`` with one line,
    unless ``allow_weak`` (or ``AGENTBOOST_SANDBOX_ALLOW_WEAK=1``); then returns the warning to
    print at start and keep in the run summary. None when the sandbox isolates."""
    from ..errors import InputError

    p = protections()
    if p["isolated"]:
        return None
    allow_weak = _weak_allowed() if allow_weak is None else allow_weak or _weak_allowed()
    reason = "; ".join(str(m) for m in p["missing"][:1]) or "no filesystem view"
    if not allow_weak:
        raise InputError(f"{what} executes model-written code, but the sandbox cannot isolate it here "
                         f"({reason}): {WEAK_HINT}")
    return f"weak sandbox: model-written code is not isolated from the host ({reason})"


def _child_setup(limits: SandboxLimits, uid: int | None, namespaces: bool, group: "cgroups.RunGroup | None",
                 nproc: int | None, keyring_filter: tuple | None = None):
    """Runs in the child between fork and exec: only system calls, no locks. ``keyring_filter``
    (``seccomp.prepared()``, the weak modes: bubblewrap loads it in the others) is installed last."""
    def setup() -> None:
        cpu = max(1, int(limits.cpu_s + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        mem = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # POSIX queues would outlive a test
        if group is not None:
            group.join()
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if namespaces:  # the weak mode: root without bubblewrap
            libc = _libc()
            flags = _CLONE_NEWNS | (0 if limits.network else _CLONE_NEWNET)
            if libc.unshare(flags) != 0:
                raise OSError(ctypes.get_errno(), "unshare failed")
            if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "making mounts private failed")
            for d in _MASKED_DIRS:
                if os.path.isdir(d):
                    if libc.mount(b"tmpfs", d.encode(), b"tmpfs", 0, b"size=16m,mode=1777") != 0:
                        raise OSError(ctypes.get_errno(), f"masking {d} failed")
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        if keyring_filter is not None:
            seccomp.install(keyring_filter, _libc())
    return setup


def _scratch_base() -> str:
    base = "/run/agentboost-sandbox"  # not under a masked directory
    try:
        os.makedirs(base, mode=0o711, exist_ok=True)
        return base
    except OSError:
        return tempfile.gettempdir()


def _tasks_of_uid(uid: int) -> int:
    """Threads of ``uid`` now: RLIMIT_NPROC counts them all, the trainer's too."""
    total = 0
    for pid in processes_of_uid(uid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                total += int(f.read().rsplit(")", 1)[1].split()[17])
        except (OSError, IndexError, ValueError):
            total += 1
    return total


def _memfd(name: str, content: str | bytes) -> int:
    fd = os.memfd_create(name)  # inheritable: bwrap reads it
    try:
        os.write(fd, content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape"))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Run:
    """One started program with what it holds: its process, its leased uid, its control group and
    (weak modes) its scratch directory on the host. ``finish`` releases all of them."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.scratch: str | None = None
        self.lease: UidLease | None = None
        self.group: cgroups.RunGroup | None = None
        self.killed = 0
        self.oom_killed = 0
        self._finished = False

    @property
    def uid(self) -> int | None:
        return self.lease.uid if self.lease else None

    @classmethod
    def start(cls, code: str, files: dict[str, str] | None, limits: SandboxLimits, stderr, *, mode: str,
              python: str, group: bool) -> "_Run":
        run = cls()
        fds: list[int] = []
        try:
            if mode in ("bwrap-root", "weak-root"):
                run.lease = UidLease(sweep=mode == "weak-root")
            if group:
                # + bwrap's two processes (its parent and the namespace's reaper); with a leased uid
                # RLIMIT_NPROC already counts exactly this run's processes
                run.group = cgroups.RunGroup(limits.memory_mb, None if run.lease else limits.processes + 3)
            contents = {"main.py": code, **(files or {})}
            nproc = nproc_inside = None
            if run.lease is not None:
                nproc = limits.processes  # the leased uid's processes are this run's alone
            elif mode == "bwrap-user":
                if isolation.prlimit_path():
                    nproc_inside = limits.processes + 2  # + bwrap's reaper and the program's first process
                elif run.group is None:
                    # no way to count only this run's: the user's processes now, and room for this run's
                    nproc = _tasks_of_uid(os.getuid()) + 5 * limits.processes
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0"}
            keyring = seccomp.supported()
            if mode.startswith("bwrap"):
                files_fds = {}
                for name, content in contents.items():
                    fd = _memfd(name, content)
                    fds.append(fd)
                    files_fds[name] = fd
                filter_fd = None
                if keyring:
                    filter_fd = _memfd("seccomp", seccomp.keyring_filter())
                    fds.append(filter_fd)
                cmd = isolation.command(isolation.bwrap_path() or "bwrap", python, files_fds, limits.disk_mb,
                                        limits.network, run.uid, ["main.py"], nproc_inside, filter_fd)
                env.update(HOME=isolation.WORKDIR, TMPDIR="/tmp")
                run.proc = subprocess.Popen(
                    cmd, cwd="/", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    start_new_session=True, close_fds=True, pass_fds=fds,
                    preexec_fn=_child_setup(limits, None, False, run.group, nproc))
            else:
                run.scratch = tempfile.mkdtemp(prefix="run-", dir=_scratch_base())
                for name, content in contents.items():
                    Path(run.scratch, name).write_text(content)
                if run.uid is not None:
                    for p in [run.scratch, *(os.path.join(run.scratch, n) for n in os.listdir(run.scratch))]:
                        os.chown(p, run.uid, run.uid)
                    os.chmod(run.scratch, 0o700)
                env.update(HOME=run.scratch, TMPDIR=run.scratch)
                run.proc = subprocess.Popen(
                    [python, "-I", "main.py"], cwd=run.scratch, env=env, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=stderr, start_new_session=True, close_fds=True,
                    preexec_fn=_child_setup(limits, run.uid, mode == "weak-root", run.group, nproc,
                                            seccomp.prepared() if keyring else None))
        except BaseException:
            run.finish()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return run

    def oom_kills(self) -> int:
        return self.group.oom_kills() if self.group is not None else 0

    def status(self) -> int | None:
        """The program's exit status, or -signal. bubblewrap exits with 128 + the signal that killed
        the program (a program exiting 129..192 by itself reads as a signal: none of ours do)."""
        code = self.proc.returncode if self.proc is not None else None
        if self.scratch is None and code is not None and 128 < code <= 128 + 64:
            return -(code - 128)
        return code

    def finish(self) -> float:
        """Kill what is left of the run (its process group, its control group, its uid), reap it,
        release its uid and group, remove its scratch; when the program was reaped."""
        ended = time.perf_counter()
        if self._finished:
            return ended
        self._finished = True
        try:
            if self.group is not None and self.proc is not None and self.proc.poll() is None:
                # the run is still going (its wall time ran out, or the caller closed it): the control
                # group is swept first, so what is counted is what was alive at this moment. Killing the
                # program first would let its PID namespace's teardown race the sweep for the rest
                # (bubblewrap's reaper dies with it), and the count would depend on which won.
                self.killed += self.group.kill_all()
            if self.proc is not None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the program's children too
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()
                ended = time.perf_counter()
            if self.group is not None:
                self.killed += self.group.kill_all()
                self.oom_killed = self.group.oom_kills()
            if self.lease is not None and self.group is None:
                # children that left the process group (the control group, where there is one,
                # holds them all, even those that made themselves unreadable in /proc)
                self.killed += kill_uid(self.lease.uid)
        finally:
            if self.group is not None:
                self.group.remove()
            if self.lease is not None:
                self.lease.release()
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        return ended


def _read_capped(stream, cap: int, sink: list, flag: list) -> None:
    total = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        if total < cap:
            sink.append(chunk[: cap - total])
        total += len(chunk)
        if total > cap:
            flag[0] = True  # keep draining so the child never blocks on a full pipe


@lru_cache(maxsize=1)
def _announce() -> None:
    # once per process, at first use: which protections this run of model-written code has
    print(f"agentboost {describe_protections()}", file=sys.stderr, flush=True)


def verdict_of(status: int | None, timed_out: bool, elapsed: float, wall_s: float, over: bool, stderr: str,
               oom_killed: bool = False) -> str:
    """The sandbox verdict of a finished program; the judge harness's tests are classified by it too.
    ``oom_killed``: the run's control group saw an out-of-memory kill."""
    if timed_out or status == -signal.SIGXCPU or status == -signal.SIGKILL and elapsed >= wall_s:
        return "timeout"
    if over:
        return "output_limit"
    if status != 0 and (oom_killed or "MemoryError" in stderr):
        return "memory_limit"
    if status != 0:
        return "runtime_error"
    return "ok"


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` for ``proc`` to end; whether it did. A pidfd wakes us the moment it
    ends (``Popen.wait`` with a timeout polls, with sleeps of up to 50 ms)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            select.select([pidfd], [], [], timeout)
        finally:
            os.close(pidfd)
    try:
        proc.wait(timeout=0 if pidfd is not None else timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def _launch(code: str, files: dict[str, str] | None, limits: SandboxLimits, stderr=subprocess.PIPE) -> _Run:
    """Start ``code`` as ``main.py`` in a fresh work directory under ``limits``, with every
    protection this machine has. The caller owns the result and must ``finish`` it."""
    prot = protections()
    _announce()
    # the last line of defence: the entry points refuse such runs at start (``require_isolation``)
    if not prot["isolated"] and not _weak_allowed():
        raise OSError(f"the sandbox cannot isolate model-written code here ({(prot['missing'] or ['?'])[0]}); "
                      f"{WEAK_HINT}")
    return _Run.start(code, files, limits, stderr, mode=str(prot["mode"]), python=str(prot["python"]),
                      group=bool(prot["whole_run_limits"]))


def run_python(code: str, stdin: str = "", limits: SandboxLimits = SandboxLimits(),
               files: dict[str, str] | None = None) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a fresh work directory under ``limits``."""
    t0 = time.perf_counter()
    try:
        run = _launch(code, files, limits)
    except (OSError, subprocess.SubprocessError) as e:
        return SandboxResult("sandbox_error", None, "", f"could not start the sandbox: {e}", 0.0)
    proc = run.proc
    try:
        out, err, out_over, err_over = [], [], [False], [False]
        readers = [threading.Thread(target=_read_capped, args=(proc.stdout, limits.output_bytes, out, out_over)),
                   threading.Thread(target=_read_capped, args=(proc.stderr, limits.output_bytes, err, err_over))]
        for t in readers:
            t.daemon = True
            t.start()
        try:
            if stdin:
                proc.stdin.write(stdin.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the program did not read its input
        timed_out = not _wait(proc, limits.wall_s)
    finally:
        ended = run.finish()
    elapsed = ended - t0
    for t in readers:
        t.join(timeout=2)
    stdout = b"".join(out).decode("utf-8", "replace")
    stderr = b"".join(err).decode("utf-8", "replace")
    over = out_over[0] or err_over[0]
    status = run.status()
    verdict = verdict_of(status, timed_out, elapsed, limits.wall_s, over, stderr, run.oom_killed > 0)
    return SandboxResult(verdict, status, stdout, stderr, elapsed, over, run.killed)


class SandboxProcess:
    """A sandboxed program that keeps running while the caller talks to it (the judge harness):
    messages to its stdin ``marshal``-ed with an 8-byte little-endian length first, replies from
    its stdout one JSON object per line (only JSON is parsed from the sandbox). Same containment as
    ``run_python``; the caller enforces time with the deadlines it gives ``request``."""

    def __init__(self, code: str, limits: SandboxLimits, files: dict[str, str] | None = None):
        self._err = tempfile.TemporaryFile()  # a file, not a pipe: nothing to drain while we wait on stdout
        try:
            self._run = _launch(code, files, limits, stderr=self._err)
        except BaseException:
            self._err.close()
            raise
        self.proc = self._run.proc
        self.uid = self._run.uid
        mode = protections()["mode"]
        # what the harness sweeps after each test: its own PID namespace, else its leased uid
        self.sweep: object = "namespace" if str(mode).startswith("bwrap") else self.uid
        # what it empties after each test: the private tmpfs it alone sees
        self.wipe: list[str] = ["/tmp", "/dev/shm"] if str(mode).startswith("bwrap") else []
        self._buf = b""
        self._closed = False
        self._stderr = ""
        self.killed_processes = 0
        self.timed_out = False  # it missed a deadline
        self.bad_reply = False  # it answered something that is not one JSON object
        os.set_blocking(self.proc.stdin.fileno(), False)

    def send(self, message: dict, deadline: float) -> bool:
        """Write one message by ``deadline`` (``time.monotonic()``); False when the program ended
        or did not read it in time (then ``timed_out`` is set)."""
        body = marshal.dumps(message, 4)
        data = len(body).to_bytes(8, "little") + body
        fd_in = self.proc.stdin.fileno()
        try:
            while data:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd_in], [], left)[1]:
                    self.timed_out = True
                    return False
                data = data[os.write(fd_in, data[:65536]):]
        except OSError:  # broken pipe: it ended
            return False
        return True

    def request(self, message: dict, deadline: float, max_reply_bytes: int) -> dict | None:
        """Send one message, return the next JSON line of reply; None when the program ended,
        missed ``deadline`` (then ``timed_out`` is set) or answered something that is not one JSON
        object of at most ``max_reply_bytes``. The caller closes it after a None."""
        if not self.send(message, deadline):
            return None
        fd_out = self.proc.stdout.fileno()
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd_out], [], [], left)[0]:
                    self.timed_out = True
                    return None
                chunk = os.read(fd_out, 1 << 20)
                if not chunk:
                    return None
                if len(self._buf) + len(chunk) > max_reply_bytes:
                    self.bad_reply = True
                    return None
                self._buf += chunk
        except OSError:  # broken pipe: it ended
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.bad_reply = True
            return None
        return reply

    def close(self) -> tuple[int | None, str]:
        """Kill it and everything it started; (exit status, stderr up to 64 KiB)."""
        if not self._closed:
            self._closed = True
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self._run.finish()
            self.killed_processes = self._run.killed
            self._err.seek(0)
            self._stderr = self._err.read(65536).decode("utf-8", "replace")
            self._err.close()
        return self._run.status(), self._stderr

    def oom_kills(self) -> int:
        """Out-of-memory kills in its control group so far (0 without one)."""
        return self._run.oom_kills()

    @property
    def oom_killed(self) -> int:
        """The count at ``close``."""
        return self._run.oom_killed

    def __enter__(self) -> "SandboxProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
