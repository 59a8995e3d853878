"""Sandbox uids that no two runs share, on one machine, across processes.

When the trainer runs as root, each sandboxed run drops to an unprivileged uid of its own, so the
process-count limit counts exactly that run's processes and the sweep after it can only kill what
the run started. A uid is *leased*: an exclusive ``flock`` on ``<LEASE_DIR>/<uid>``, held for the
run and released by the kernel when the holder exits, however it exits. Two runs, in one process or
in two, never hold the same uid at once; a uid is never derived from a PID (the scheme before this
one gave processes whose PIDs were equal modulo 10,000 the same uids, and one run's sweep killed
the other's program).
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import time

UID_BASE = 200_000
UID_COUNT = 1 << 16  # the range's lease files are created once each and kept: bounded
LEASE_DIR = "/run/agentboost-sandbox/uids"


def processes_of_uid(uid: int) -> list[int]:
    """Live processes whose owner is ``uid`` (one ``stat`` per process)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{d}").st_uid
            if owner == 0:  # a process that made itself undumpable shows as root's: read its real uid
                with open(f"/proc/{d}/status") as f:
                    owner = int(next(line for line in f if line.startswith("Uid:")).split()[1])
            if owner != uid:
                continue
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError, StopIteration, ValueError):
            continue
        if state not in ("Z", "X"):  # dead, waiting to be reaped: holds nothing
            pids.append(int(d))
    return pids


def kill_until_gone(find, delay: float = 0.0002, rounds: int = 100) -> int:
    """SIGKILL the processes ``find()`` lists until it lists none (a forking survivor may add one
    between rounds); how many were killed."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    return len(killed)


def kill_uid(uid: int) -> int:
    """SIGKILL every process of ``uid`` until none is left; how many were killed. Only ever called
    with a uid this process holds the lease of."""
    return kill_until_gone(lambda: processes_of_uid(uid))


class UidLease:
    """An unprivileged uid held by this run until ``release``."""

    def __init__(self, lease_dir: str = LEASE_DIR, rng: random.Random | None = None, sweep: bool = True):
        os.makedirs(lease_dir, mode=0o700, exist_ok=True)
        rng = rng or random.SystemRandom()
        for _ in range(1000):
            uid = UID_BASE + rng.randrange(UID_COUNT)
            fd = os.open(os.path.join(lease_dir, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            # the lease was free, so whoever ran as this uid before has exited: anything still
            # running as it escaped an earlier run and must not share this one's identity. (In a
            # PID namespace of its own a run cannot name such a process: ``sweep=False``.)
            if sweep:
                kill_uid(uid)
            return
        raise OSError("no free sandbox uid: 1,000 tries found every one leased")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
