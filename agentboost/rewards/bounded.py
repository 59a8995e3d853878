"""A reward's risky computation in a process that can be stopped.

Some grading work has no bound the caller can enforce from a thread: ``math-verify`` on
``\\boxed{9^{9^{9^{9}}}}`` builds an integer of hundreds of millions of digits in one C call that holds
the interpreter lock, so the thread never returns and the rest of the process (``serve``'s event
loop, ``score``'s other workers, the veRL agent loop) stops with it; math-verify's own timeouts use
``SIGALRM``, which only the main thread receives, and not inside such a call. So that work runs
here: in a helper process (this interpreter running ``serve``), started once and kept, one per
concurrent caller. ``call`` sends it the function's import path and JSON arguments; the helper stops
the function itself with ``SIGALRM`` at ``limit_s`` when the function lets it (it runs in the
helper's main thread), and the caller kills a helper that has not answered a second later (a fresh
one serves the next call). Either way ``Overrun`` is raised, which the reward turns into a score of
0 with a reason. Helpers also carry an address-space limit, so a memory bomb ends in their
``MemoryError``, not in the caller's.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HELPER_MEMORY_BYTES = 4 << 30  # each helper's address space
_START_S = 120.0  # a helper's start (its imports; not part of any call's limit)
_KILL_AFTER_S = 1.0  # past the limit, for a function the helper's own alarm could not stop
_MAX_IDLE = 8
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class Overrun(Exception):
    """The call did not end within its limit; its helper was killed."""


class HelperError(Exception):
    """The function raised in the helper (its type and message), or the helper ended."""


class _HelperEnded(HelperError):
    """The helper was gone before it answered (killed with the thread that started it, or crashed)."""


class _Helper:
    def __init__(self, preload: tuple[str, ...]):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from agentboost.rewards.bounded import serve; serve()", *preload],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        self._buf = b""
        self.killed = False
        try:
            ready = self._line(time.monotonic() + _START_S)
        except _HelperEnded:
            ready = None
        if ready is None or json.loads(ready).get("ready") is not True:
            self.kill()
            raise HelperError(f"the helper process did not start (preloading {', '.join(preload)})")

    def _line(self, deadline: float) -> bytes | None:
        """The next line of its output; None at ``deadline``; ``_HelperEnded`` at the end of it."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # (it may not be waitable yet: its files close before it exits)
                self.kill()
                raise _HelperEnded("the helper process ended during the call")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def call(self, target: str, args: list, limit_s: float) -> Any:
        try:
            self.proc.stdin.write(json.dumps({"target": target, "args": args, "limit_s": limit_s}).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            self.kill()
            raise _HelperEnded("the helper process had ended") from None
        line = self._line(time.monotonic() + limit_s + _KILL_AFTER_S)
        if line is None:
            self.kill()
            raise Overrun(f"did not finish within {limit_s:g} s")
        reply = json.loads(line)
        if reply.get("overrun"):
            raise Overrun(f"did not finish within {limit_s:g} s")
        if "error" in reply:
            raise HelperError(reply["error"])
        return reply["value"]

    def kill(self) -> None:
        self.killed = True
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


_idle: dict[tuple[str, ...], list[_Helper]] = {}
_lock = threading.Lock()


def call(target: str, args: list, limit_s: float, preload: tuple[str, ...] = ()) -> Any:
    """``target(*args)`` (an import path, ``module:function``; JSON arguments and result) in a helper
    process, ending within ``limit_s`` seconds of the request or raising ``Overrun``. ``preload``:
    modules a new helper imports before it serves (their import is not part of the limit). Any
    thread may call; each concurrent call has a helper of its own."""
    for attempt in (1, 2):
        helper = None
        with _lock:
            idle = _idle.setdefault(preload, [])
            while idle and helper is None:
                helper = idle.pop()
                if helper.proc.poll() is not None:  # ended while idle (its starting thread ended: see serve)
                    helper.kill()
                    helper = None
        if helper is None:
            helper = _Helper(preload)
        try:
            value = helper.call(target, args, limit_s)
        except Overrun:
            if helper.proc.poll() is None and not helper.killed:
                _keep(preload, helper)  # stopped by its own alarm: still good
            raise
        except _HelperEnded:
            if attempt == 2:  # twice: the function itself ends its process (a crash of the library)
                raise
            continue  # once: the helper may have died with the thread that started it
        except HelperError:
            _keep(preload, helper)  # the function's own error: the helper is fine
            raise
        except (OSError, ValueError):
            helper.kill()
            raise
        _keep(preload, helper)
        return value
    raise AssertionError("unreachable")


def _keep(preload: tuple[str, ...], helper: _Helper) -> None:
    with _lock:
        if len(_idle.setdefault(preload, [])) < _MAX_IDLE:
            _idle[preload].append(helper)
            return
    helper.kill()


def close_helpers() -> None:
    with _lock:
        helpers = [h for hs in _idle.values() for h in hs]
        _idle.clear()
    for h in helpers:
        h.kill()


def _forget() -> None:  # a forked child must not share its parent's helpers
    global _lock
    _idle.clear()
    _lock = threading.Lock()


atexit.register(close_helpers)
os.register_at_fork(after_in_child=_forget)


class _Alarm(BaseException):
    """Raised in the function at its limit (a BaseException: a library's ``except Exception`` keeps
    running nothing)."""


def _on_alarm(signum, frame):
    raise _Alarm()


def serve() -> None:
    """The helper's loop: preload the modules named on the command line, then answer one request a
    line, each stopped by an alarm at its limit."""
    import importlib
    import signal

    from ..imports import import_object

    resource.setrlimit(resource.RLIMIT_AS, (HELPER_MEMORY_BYTES, HELPER_MEMORY_BYTES))
    if sys.platform.startswith("linux"):
        import ctypes

        # killed with the caller: a computation the alarm cannot stop must not outlive a killed trainer.
        # (Linux ties this to the thread that started the helper: a helper left idle by a thread that
        # ended is found dead, and replaced, at its next call.)
        ctypes.CDLL(None).prctl(1, ctypes.c_ulong(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            return  # the caller is already gone
    for name in sys.argv[1:]:
        importlib.import_module(name)
    signal.signal(signal.SIGALRM, _on_alarm)
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            fn = import_object(request["target"], "bounded function")
            signal.setitimer(signal.ITIMER_REAL, float(request["limit_s"]))
            try:
                reply = {"value": fn(*request["args"])}
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _Alarm:
            reply = {"overrun": True}
        except BaseException as e:  # the function's error: its type and message
            reply = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()
