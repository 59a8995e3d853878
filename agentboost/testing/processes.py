"""Finding the processes a pool left behind: workers and whatever their tools started inherit an
environment variable set by the caller, and are found by it."""

import os
import time
from pathlib import Path


def processes_with_marker(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries ``marker`` (workers inherit it).

    multiprocessing's resource tracker is left out: it belongs to the process that owns the pool
    and ends with it, so it is no orphan while that process lives."""
    found = []
    needle = marker.encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle in (d / "environ").read_bytes():
                stat = (d / "stat").read_text()
                cmdline = (d / "cmdline").read_bytes()
                if b"resource_tracker" in cmdline and os.getppid() != int(d.name):
                    if int(stat.split(") ", 1)[1].split()[1]) == os.getpid():
                        continue
                if ") Z " not in stat:  # zombies hold nothing
                    found.append(int(d.name))
        except OSError:
            continue
    return found


def wait_no_processes(marker: str, timeout: float = 10.0) -> list[int]:
    deadline = time.time() + timeout
    while True:
        left = processes_with_marker(marker)
        if not left or time.time() > deadline:
            return left
        time.sleep(0.1)
