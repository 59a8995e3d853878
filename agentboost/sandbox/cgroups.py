"""Whole-run memory and process limits: a control group per sandboxed run.

rlimits bind one process at a time (six children of 400 MB each fit under a 512 MB address-space
limit); a control group binds the program and all its children together, and counts the
out-of-memory kills inside it, which is how the judge tells ``memory_limit`` from a crash. Writing
control groups needs root (or a delegated subtree); where neither cgroup v2 nor v1's ``memory`` and
``pids`` controllers can be written, ``available()`` says why and runs keep the per-process limits.

The run's group is made under the trainer's own group, so limits set above (a container's, a job
scheduler's) still apply. The child joins it between fork and exec (``join``), before it can start
anything; after the run, ``kill_all`` ends whatever is left in the group (only this run's processes
can be there) and ``remove`` deletes it.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from functools import lru_cache

from .identities import kill_until_gone

_ROOT = "/sys/fs/cgroup"
_lock = threading.Lock()


def _own_path(controller: str | None) -> str | None:
    """This process's group for ``controller`` (v1) or its unified group (v2, ``None``)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if (controller is None and names == "") or (controller and controller in names.split(",")):
                    return path
    except OSError:
        pass
    return None


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK)


@lru_cache(maxsize=1)
def layout() -> tuple[str, dict[str, str]] | tuple[None, str]:
    """("v2", {"unified": parent dir}) or ("v1", {"memory": dir, "pids": dir}) where this process
    may make groups; else (None, why not)."""
    v2 = _own_path(None)
    if v2 is not None:
        for mount in (_ROOT, os.path.join(_ROOT, "unified")):
            parent = os.path.join(mount, v2.lstrip("/"))
            try:
                with open(os.path.join(mount, "cgroup.controllers")) as f:
                    controllers = f.read().split()
            except OSError:
                continue
            if {"memory", "pids"} <= set(controllers) and _writable_dir(parent):
                return "v2", {"unified": parent}
    dirs = {}
    for controller in ("memory", "pids"):
        own = _own_path(controller)
        parent = os.path.join(_ROOT, controller, (own or "/").lstrip("/"))
        if own is None or not _writable_dir(parent):
            return None, (f"no writable cgroup v2 with memory and pids, nor v1 '{controller}' controller "
                          f"({parent}); needs root or a delegated cgroup")
        dirs[controller] = parent
    return "v1", dirs


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class RunGroup:
    """One run's control group: at most ``memory_mb`` for all its processes together, at most
    ``processes`` of them (``None``: no process limit here, when the run's uid is its own and
    ``RLIMIT_NPROC`` counts exactly its processes: on v1 that saves moving the child into a second
    hierarchy, a few milliseconds per run), no swap."""

    def __init__(self, memory_mb: int, processes: int | None):
        version, where = layout()
        if version is None:
            raise OSError(where)
        name = f"agentboost-{uuid.uuid4().hex[:12]}"
        self.version = version
        self.dirs: list[str] = []
        try:
            with _lock:
                if version == "v2":
                    parent = where["unified"]
                    # v2 lets only leaves hold processes: the runs' groups sit under one of ours,
                    # whose controllers are turned on once
                    base = os.path.join(parent, "agentboost-runs")
                    os.makedirs(base, exist_ok=True)
                    if not {"memory", "pids"} <= set(_read(os.path.join(base, "cgroup.subtree_control")).split()):
                        _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
                    d = os.path.join(base, name)
                    os.mkdir(d)
                    self.dirs.append(d)
                    _write(os.path.join(d, "memory.max"), str(memory_mb << 20))
                    if os.path.exists(os.path.join(d, "memory.swap.max")):
                        _write(os.path.join(d, "memory.swap.max"), "0")
                    if processes is not None:
                        _write(os.path.join(d, "pids.max"), str(processes))
                else:
                    mem = os.path.join(where["memory"], name)
                    os.mkdir(mem)
                    self.dirs.append(mem)
                    _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory_mb << 20))
                    if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):
                        _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(memory_mb << 20))
                    if processes is not None:
                        pids = os.path.join(where["pids"], name)
                        os.mkdir(pids)
                        self.dirs.append(pids)
                        _write(os.path.join(pids, "pids.max"), str(processes))
        except BaseException:
            self.remove()
            raise
        self._procs_files = [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def join(self) -> None:
        """Move the calling process into the group (between fork and exec: system calls only)."""
        for path in self._procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # 0: the writer itself
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        """Processes the kernel killed in this group for want of memory so far."""
        events = "memory.events" if self.version == "v2" else "memory.oom_control"
        for line in _read(os.path.join(self.dirs[0], events)).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self._procs_files[0]).split() if p.isdigit()] if self.dirs else []

    def kill_all(self) -> int:
        """SIGKILL every process left in the group until it is empty; how many were in it when the
        sweep began. Counted from that first listing, not from the kills that succeed: killing one
        process can take others with it (bubblewrap's PID namespace ends with its reaper), so which
        kill lands first would otherwise change the count."""
        before = set(self.pids())
        return max(len(before), kill_until_gone(self.pids))

    def remove(self) -> None:
        for d in reversed(self.dirs):
            for _ in range(50):  # a killed process leaves its group a moment after it is reaped
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.dirs = []


@lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """Whether whole-run limits work here, and how (or why not), probed by making a group."""
    try:
        RunGroup(64, 8).remove()
    except OSError as e:
        return False, str(e)
    return True, f"cgroup {layout()[0]}"
