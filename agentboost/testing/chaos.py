"""Chaos: a job run once untouched, then again and again, each time killed (SIGKILL of every process
it started) at a chosen moment and resumed until it ends; each outcome is audited and compared with
the untouched run (``benchmarks/chaos.py`` at N seeded random moments, ``tests/run/test_chaos.py``
at a handful of named ones).

A job is the command lines of its first attempt and of its resume, and three readings of its
output directory: ``phase`` (where a kill landed, read while the job is frozen by SIGSTOP, so the
files are as the kill leaves them), ``summary`` (what must equal the untouched run's: episodes'
tokens, metrics without their timings, the final weights' SHA-256, a report) and ``audit`` (prompts
lost, trained twice, files corrupted, counted against the untouched run).

"The whole process tree" is every process that carries the attempt's marker in its environment
(``testing.processes``): a process that left the session (a sandbox, a server started with
``setsid``) is found all the same.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..files import is_temporary, iter_jsonl
from .processes import processes_with_marker

MARKER = "AGENTBOOST_CHAOS_ATTEMPT"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Job:
    """A job the chaos harness kills and resumes. ``start(out)`` and ``resume(out)`` are argv lists
    for an output directory ``out``; ``env`` is added to the environment of both."""

    name: str
    start: Callable[[Path], list[str]]
    resume: Callable[[Path], list[str]]
    summary: Callable[[Path], dict[str, Any]]
    audit: Callable[[Path, dict[str, Any]], dict[str, list[str]]]
    phase: Callable[[Path], str]
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 900.0
    tolerance: str = "equal"  # what "equal" means for this job (stated in the benchmark's table)


@dataclass
class KillAt:
    """When to kill: ``after_s`` seconds after the start, or as soon as ``when(out)`` holds (polled
    every few milliseconds; ``label`` names it)."""

    after_s: float | None = None
    when: Callable[[Path], bool] | None = None
    label: str = ""

    def describe(self) -> str:
        return self.label or f"{self.after_s:.2f} s"


@dataclass
class Outcome:
    kill: str
    phase: str  # where the kill landed ("" when the job had already ended)
    killed: bool
    processes_killed: int = 0
    lost: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    corrupted: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    resume_s: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not (self.lost or self.twice or self.corrupted or self.differences or self.error)

    def line(self) -> str:
        what = "ok" if self.ok else "; ".join(
            f"{k}: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''}" for k, v in
            (("lost", self.lost), ("trained twice", self.twice), ("corrupted", self.corrupted),
             ("differs", self.differences), ("error", [self.error] if self.error else [])) if v)
        where = self.phase if self.killed else "the job had ended"
        return f"kill at {self.kill:>10} [{where}]: {what}"


def _env(job: Job, token: str) -> dict[str, str]:
    return {**os.environ, **job.env, MARKER: token}


def _sweep(token: str) -> int:
    """SIGKILL every process that carries ``token``, and the process group of each, until none is
    left: how many there were. The groups: vLLM's engine core sets its process title over its
    environment block, so the marker no longer shows there; it is in the group its server's
    watchdog leads, and the watchdog, killed here too, cannot take it down (a killed vLLM attempt
    left its engine core running, 2.3 GB each, until the machine swapped)."""
    seen: set[int] = set()
    mine = os.getpgrp()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = processes_with_marker(f"{MARKER}={token}")
        if not pids:
            return len(seen)
        groups = set()
        for pid in pids:
            seen.add(pid)
            try:
                groups.add(os.getpgid(pid))
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for group in groups - {mine}:  # never the harness's own
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"processes of attempt {token} outlived SIGKILL for 30 s")


def _freeze(token: str) -> None:
    """SIGSTOP every process of the attempt (repeated: one may fork while the first ones stop)."""
    for _ in range(3):
        for pid in processes_with_marker(f"{MARKER}={token}"):
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass


def run_to_end(job: Job, argv: list[str], log: Path) -> tuple[int, float]:
    """Run an attempt to its end (no kill): (exit status, seconds)."""
    token = uuid.uuid4().hex
    t0 = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=str(REPO), env=_env(job, token), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            rc = -9
        finally:
            _sweep(token)  # nothing an ended attempt left running may touch the next one's files
    return rc, time.monotonic() - t0


def untouched(job: Job, out: Path) -> tuple[dict[str, Any], float]:
    """The job run once without a kill: (its summary, its seconds)."""
    rc, took = run_to_end(job, job.start(out), out.with_name(out.name + ".log"))
    if rc != 0:
        raise RuntimeError(f"{job.name}: the untouched run exited {rc}; see {out}.log")
    return job.summary(out), took


def kill(job: Job, out: Path, argv: list[str], at: KillAt) -> tuple[bool, str, int]:
    """Run ``argv`` (an attempt of ``job`` on ``out``) and kill all its processes at ``at``: (whether it
    was still running, where it landed, how many processes were killed)."""
    log = out.with_name(out.name + ".log")
    token = uuid.uuid4().hex
    t0 = time.monotonic()
    with open(log, "ab") as f:
        proc = subprocess.Popen(argv, cwd=str(REPO), env=_env(job, token), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = t0 + job.timeout_s
        while proc.poll() is None and time.monotonic() < deadline:
            if at.after_s is not None and time.monotonic() - t0 >= at.after_s:
                break
            if at.when is not None and at.when(out):
                break
            time.sleep(0.005 if at.when is not None else min(0.05, max(0.0, t0 + (at.after_s or 0)
                                                                         - time.monotonic())))
        killed = proc.poll() is None
        phase = ""
        if killed:
            try:  # the job's own process group at once (it writes the files), then everything it started
                os.killpg(proc.pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            _freeze(token)  # the files as the kill leaves them
            phase = job.phase(out)
        n = _sweep(token)
        proc.wait()
    return killed, phase, n


def killed_and_resumed(job: Job, out: Path, at: KillAt, reference: dict[str, Any]) -> Outcome:
    """Start the job, kill its processes at ``at``, resume it to the end, audit and compare."""
    killed, phase, n = kill(job, out, job.start(out), at)
    outcome = Outcome(kill=at.describe(), phase=phase, killed=killed, processes_killed=n)
    t1 = time.monotonic()
    log = out.with_name(out.name + ".log")
    rc, _ = run_to_end(job, job.resume(out), log)
    outcome.resume_s = time.monotonic() - t1
    if rc != 0:
        outcome.error = f"the resume exited {rc} (see {log})"
        return outcome
    try:
        found = job.audit(out, reference)
        outcome.lost, outcome.twice, outcome.corrupted = found["lost"], found["twice"], found["corrupted"]
        outcome.differences = differences(reference, job.summary(out))
    except Exception as e:  # a reading that fails is a finding, not a crash of the harness
        outcome.error = f"{type(e).__name__}: {e}"
    return outcome


def differences(want: Any, got: Any, where: str = "") -> list[str]:
    """Where two summaries differ, as paths (``metrics[2].loss: 0.1 != 0.2``)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for k in sorted(set(want) | set(got), key=str):
            if k not in got or k not in want:
                out.append(f"{where}.{k}: {'missing' if k not in got else 'extra'}")
            else:
                out += differences(want[k], got[k], f"{where}.{k}" if where else str(k))
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(got)} items, not {len(want)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{where}[{i}]")]
    return [] if want == got else [f"{where}: {str(got)[:60]} != {str(want)[:60]}"]


def random_moments(seed: int, n: int, span_s: float) -> list[KillAt]:
    """``n`` kill moments drawn uniformly over ``span_s`` (the untouched run's duration), in the order
    drawn: a benchmark stopped part way has tried a uniform sample, not the earliest moments."""
    rng = random.Random(seed)
    return [KillAt(after_s=rng.uniform(0.0, span_s)) for _ in range(n)]


# -- readings shared by the jobs ------------------------------------------------------------------
def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


def torn_or_invalid(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """JSONL files under ``root`` (outside ``skip``) that do not read whole: a torn last line, a line
    that is not JSON."""
    bad = []
    for path in sorted(root.rglob("*.jsonl")):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in skip:
            continue
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            bad.append(f"{rel} (torn last line)")
            continue
        try:
            for _ in iter_jsonl(path):
                pass
        except ValueError as e:
            bad.append(f"{rel} ({e})")
    return bad


def temporaries(root: Path) -> list[str]:
    """What an interrupted atomic write left (``.NAME.tmp-*``, ``.NAME.stale-*``)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if is_temporary(p.name))


def count_differences(want: Counter, got: Counter) -> tuple[list[str], list[str]]:
    """(what ``got`` lacks of ``want``, what it has more often): lost and twice."""
    lost = [f"{k} x{want[k] - got[k]}" for k in sorted(want) if got[k] < want[k]]
    twice = [f"{k} x{got[k] - want[k]}" for k in sorted(got) if got[k] > want[k]]
    return lost, twice


def stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """Stop a job's server as a service manager does: SIGTERM, SIGKILL after ``timeout_s``. (SIGINT
    would do nothing to a process started in the background, as the benchmark's are: a background
    job gets SIGINT ignored, and Python then installs no handler for it.)"""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentboost.cli", *args]
