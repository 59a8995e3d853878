"""A pool of persistent worker processes that run Strands episodes.

Every submitted task yields exactly one episode record, whatever happens:

- soft deadline (``StrandsAgentSpec.timeout_s``): the worker cancels the episode -> ``timeout``;
- hard deadline (``hard_timeout_s``, counted from the episode's start in its worker): the pool
  kills the worker's whole process group -> that episode is ``timeout``; the worker's other
  episodes were innocent and run again;
- a worker that dies (segfault, SIGKILL, out of memory): its in-flight episodes run again, each
  alone in a worker, so the one that kills workers is identified; an episode that was alone in a
  dying worker, or has used its ``crash_retries``, is returned ``crashed`` with the reason;
- closing the pool (normally, after an exception in the caller, or on Ctrl-C) returns every
  task not yet finished with its status and reason, and leaves no process behind.

Usable from synchronous code (``submit`` -> ``Future``, ``run``) and from async code
(``submit_async``, ``arun``).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import itertools
import multiprocessing as mp
import os
import signal
import threading
import time
import uuid
import weakref
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from statistics import quantiles
from typing import Any, Callable, Iterable

from ..agents.strands_agent import StrandsAgentSpec
from ..environments.strands_env import StrandsEnv
from ..episodes.record import Episode, Status
from ..sampling.spec import SamplerSpec


@dataclass
class _Job:
    key: int
    task: dict[str, Any]
    group_id: str
    episode_id: str
    future: Future
    submitted_at: float
    attempts: int = 0
    exclusive: bool = False
    history: list[str] = field(default_factory=list)
    started_at: float | None = None
    sample: int = 0  # which of the task's samples: with a sampling seed, it seeds the requests
    version: int | None = None  # the weight version it was pinned to when it was last dispatched
    seed: int | None = None  # in place of the sampler's seed (a training step's), its requests' seeds derive from it


@dataclass
class _Worker:
    wid: int
    proc: Any
    conn: Any
    inflight: dict[int, _Job] = field(default_factory=dict)
    given: int = 0
    ready: bool = False
    retiring: bool = False
    exclusive: bool = False
    stop_sent_at: float | None = None


DEADLINE_CHECK_S = 0.1  # how often the hard deadlines of in-flight episodes are looked at

# Workers are spawned: each imports the main module again. A script that starts training at its top
# level (no main guard) starts it again in every worker, which then never becomes ready.
MAIN_GUARD_HINT = ('if training is started from a script, put it under `if __name__ == "__main__":` '
                   "(pool workers are spawned processes that import the main module again)")


class SpawnedWorkerImport(RuntimeError):
    """Training was started while a spawned worker imported the main module (no main guard)."""


def ensure_not_spawning(what: str) -> None:
    """Refuse to start ``what`` inside a process that is still being spawned: there it would start
    training again in every worker, and the pool would wait for workers that never get ready."""
    import multiprocessing.process

    if getattr(multiprocessing.process.current_process(), "_inheriting", False):  # multiprocessing's own test
        raise SpawnedWorkerImport(f"{what} was called while a worker process was starting; {MAIN_GUARD_HINT}")


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "unknown exit"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def collect(futures: list[Future], on_episode: Callable[[Episode], None] | None = None) -> list[Episode]:
    """The episodes of ``futures`` in their order, ``on_episode`` called for each as it finishes, in
    this thread. Not a done-callback: a future's waiters wake before its callbacks run, so a caller
    could return (and close the file the callback writes to) before the last one had run. An
    interrupt (Ctrl-C) still hands over every episode that finished before it, then goes on."""
    if on_episode is None:
        return [f.result() for f in futures]
    handed: set[int] = set()
    try:
        for fut in as_completed(futures):
            handed.add(id(fut))
            on_episode(fut.result())
    except (KeyboardInterrupt, SystemExit):
        for fut in futures:
            if id(fut) not in handed and fut.done() and not fut.cancelled() and fut.exception() is None:
                handed.add(id(fut))
                on_episode(fut.result())
        raise
    return [f.result() for f in futures]


class StrandsProcessPool:
    def __init__(self, agent: StrandsAgentSpec, sampler: SamplerSpec, env: StrandsEnv | None = None,
                 workers: int = 2, slots: int = 4, max_queue: int = 10_000, recycle_after: int | None = None,
                 hard_timeout_s: float | None = None, crash_retries: int = 1, stop_grace_s: float = 5.0):
        if workers < 1 or slots < 1:
            raise ValueError(f"workers and slots must be >= 1, got workers={workers} slots={slots}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.agent = agent.validate()
        self.sampler = sampler.validate()
        self.env = env.validate() if env is not None else None
        self.n_workers, self.slots = workers, slots
        self.max_queue = max_queue
        self.recycle_after = recycle_after
        self.hard_timeout_s = hard_timeout_s if hard_timeout_s is not None else agent.timeout_s * 1.5 + 10
        self.crash_retries = crash_retries
        self.stop_grace_s = stop_grace_s
        # asynchronous training: the weight version an episode is pinned to, read when it is handed
        # to a worker (it starts then: a worker gets no more episodes than it has slots); None: the
        # policy server's current weights on every call, as before
        self.pin_version: Callable[[], int] | None = None
        self._ctx = mp.get_context("spawn")
        self._lock = threading.Condition()
        self._pending: collections.deque[_Job] = collections.deque()
        self._workers: dict[int, _Worker] = {}
        self._stopping: list[_Worker] = []
        self._wids = itertools.count()
        self._keys = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        self._closing = False
        self._closed = False
        self._next_deadline_check = 0.0
        self.broken: str | None = None  # set when workers cannot start; every task then returns error
        self._startup_failures = 0
        # statistics
        self._status_counts = collections.Counter()
        self._run_latencies: collections.deque[float] = collections.deque(maxlen=10_000)
        self._queue_waits: collections.deque[float] = collections.deque(maxlen=10_000)
        self.worker_starts = 0
        self.worker_deaths = 0
        self.retries = 0
        for _ in range(workers):
            self._spawn()
        self._manager = threading.Thread(target=self._manage, name="agentboost-pool", daemon=True)
        self._manager.start()
        atexit.register(_close_ref, weakref.ref(self))

    # -- public API -------------------------------------------------------------------------
    def submit(self, task: dict[str, Any], group_id: str | None = None, episode_id: str | None = None,
               block: bool = True, timeout: float | None = None, sample: int = 0,
               seed: int | None = None) -> Future | None:
        """Queue one episode; returns a Future of its ``Episode``. Blocks while the queue is full
        (back-pressure); with ``block=False`` returns None instead of waiting. ``seed``: the
        episode's sampling seed in place of the sampler's (each request's is derived from it)."""
        if "task_id" not in task:
            raise ValueError(f"task has no 'task_id': {sorted(task)}")
        job = _Job(key=next(self._keys), task=task, group_id=group_id or str(task["task_id"]),
                   episode_id=episode_id or uuid.uuid4().hex, future=Future(), submitted_at=time.monotonic(),
                   sample=sample, seed=seed)
        with self._lock:
            if self._closing:
                raise RuntimeError("the pool is closed")
            if self.broken is not None:  # nothing will ever run it: it fails now, never waits
                self._fail(job, Status.ERROR, f"pool: {self.broken}")
                return job.future
            if len(self._pending) >= self.max_queue:
                if not block:
                    return None
                if not self._lock.wait_for(lambda: len(self._pending) < self.max_queue or self._closing, timeout):
                    return None
                if self._closing:
                    raise RuntimeError("the pool is closed")
            self._pending.append(job)
        self._wake()
        return job.future

    async def submit_async(self, task: dict[str, Any], group_id: str | None = None,
                           episode_id: str | None = None, sample: int = 0) -> Episode:
        while True:
            fut = self.submit(task, group_id=group_id, episode_id=episode_id, block=False, sample=sample)
            if fut is not None:
                return await asyncio.wrap_future(fut)
            await asyncio.sleep(0.01)

    def run(self, tasks: Iterable[dict[str, Any]], samples: int = 1,
            on_episode: Callable[[Episode], None] | None = None) -> list[Episode]:
        """Run ``samples`` episodes of every task (one GRPO group per task); returns them in
        submission order. ``on_episode`` is called as each one finishes."""
        return collect(self.submit_groups(tasks, samples), on_episode)

    def submit_groups(self, tasks: Iterable[dict[str, Any]], samples: int = 1, seed: int | None = None) -> list[Future]:
        """Queue ``samples`` episodes of every task (one GRPO group per task); their futures in
        submission order. ``seed``: as ``submit``'s."""
        return [self.submit(task, group_id=str(task["task_id"]), sample=k, seed=seed)
                for task in tasks for k in range(samples)]

    async def arun(self, tasks: Iterable[dict[str, Any]], samples: int = 1) -> list[Episode]:
        return list(await asyncio.gather(*(self.submit_async(t, group_id=str(t["task_id"]), sample=k)
                                           for t in tasks for k in range(samples))))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            busy = sum(len(w.inflight) for w in self._workers.values())
            # dispatched jobs whose worker has said it started them (busy counts them from dispatch,
            # which can be before a new worker has finished starting)
            running = sum(1 for w in self._workers.values() for j in w.inflight.values() if j.started_at is not None)
            alive = sum(1 for w in self._workers.values() if w.proc.is_alive())
            lat = list(self._run_latencies)
            waits = list(self._queue_waits)
            return {
                "episodes": dict(self._status_counts),
                "queue_depth": len(self._pending),
                "busy_slots": busy,
                "running": running,
                "total_slots": self.n_workers * self.slots,
                "workers_alive": alive,
                "worker_starts": self.worker_starts,
                "worker_deaths": self.worker_deaths,
                "retries": self.retries,
                "latency_s": _percentiles(lat),
                "queue_wait_s": _percentiles(waits),
            }

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.proc.pid for w in self._workers.values() if w.proc.pid]

    def close(self) -> None:
        """Return every unfinished task with its status, stop the workers and their process
        groups. Safe to call twice, from ``__exit__``, ``atexit`` or after Ctrl-C."""
        with self._lock:
            if self._closed:
                return
            self._closing = True
            self._lock.notify_all()
        self._wake()
        self._manager.join()
        self._closed = True
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "StrandsProcessPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- manager thread ---------------------------------------------------------------------
    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _spawn(self) -> None:
        from .worker import worker_main

        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=worker_main, name="agentboost-worker",
                                 args=(child, self.agent, self.env, self.sampler, self.slots), daemon=True)
        proc.start()
        child.close()
        w = _Worker(wid=next(self._wids), proc=proc, conn=parent)
        self._workers[w.wid] = w
        self.worker_starts += 1

    def _manage(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closing:
                        break
                    self._dispatch()
                objs = [self._wake_r]
                for w in list(self._workers.values()) + self._stopping:
                    objs += [w.conn, w.proc.sentinel]
                ready = mp_wait(objs, timeout=0.25)
                if self._wake_r in ready:
                    os.read(self._wake_r, 65536)
                with self._lock:
                    self._receive(ready)
                    now = time.monotonic()
                    # every in-flight episode is looked at: with thousands in flight, doing so on every
                    # message cost more than the messages; deadlines are seconds long
                    if now >= self._next_deadline_check:
                        self._next_deadline_check = now + DEADLINE_CHECK_S
                        self._check_deadlines()
                    self._recycle()
                    self._reap_stopping()
        finally:
            self._shutdown()

    def _receive(self, ready: list) -> None:
        for w in list(self._workers.values()):
            if w.conn in ready:
                try:
                    while w.conn.poll():
                        self._on_message(w, w.conn.recv())
                except (EOFError, OSError):
                    pass  # the sentinel reports the death below
            if not w.proc.is_alive() and w.wid in self._workers:
                w.proc.join(timeout=1)
                self._on_death(w, f"worker {w.proc.pid} died ({_signal_name(w.proc.exitcode)})")
        for w in self._stopping:
            if w.conn in ready:
                try:
                    while w.conn.poll():
                        w.conn.recv()
                except (EOFError, OSError):
                    pass

    def _on_message(self, w: _Worker, msg: tuple) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
            self._startup_failures = 0
        elif kind == "fatal":
            self._break(msg[1])
        elif kind == "started":
            job = w.inflight.get(msg[1])
            if job is not None:
                job.started_at = time.monotonic()
        elif kind == "done":
            job = w.inflight.pop(msg[1], None)
            if job is None:
                return  # already resolved (its worker passed a hard deadline meanwhile)
            if job.exclusive:
                w.exclusive = False
            ep = Episode.from_dict(msg[2])
            if job.started_at is not None:
                self._run_latencies.append(time.monotonic() - job.started_at)
            self._resolve(job, ep)

    def _resolve(self, job: _Job, ep: Episode) -> None:
        ep.metadata.setdefault("sample", job.sample)  # which of the task's samples (a resumed eval matches on it)
        if job.history:
            ep.metadata["attempts"] = len(job.history) + 1
            ep.metadata["earlier_failures"] = list(job.history)
        self._status_counts[ep.status] += 1
        if not job.future.done():
            job.future.set_result(ep)

    def _fail(self, job: _Job, status: Status, reason: str) -> None:
        # unscored: the group policy gives failed episodes their reward
        ep = Episode(episode_id=job.episode_id, task_id=str(job.task.get("task_id")), group_id=job.group_id,
                     status=status, error=reason)
        self._resolve(job, ep)

    def _on_death(self, w: _Worker, reason: str, culprit: int | None = None) -> None:
        del self._workers[w.wid]
        self.worker_deaths += 1
        try:
            os.killpg(w.proc.pid, signal.SIGKILL)  # whatever its tools left running
        except (ProcessLookupError, PermissionError, OSError):
            pass
        w.conn.close()
        if not w.ready:
            self._startup_failures += 1
        jobs = [j for k, j in w.inflight.items() if k != culprit]
        alone = len(w.inflight) == 1 and culprit is None
        for job in jobs:
            job.history.append(reason)
            if culprit is not None:  # innocent bystanders of a hard-deadline kill
                job.started_at = None
                self._pending.appendleft(job)
                self.retries += 1
            elif alone or job.attempts >= self.crash_retries or self._closing:
                self._fail(job, Status.CRASHED, reason + ("" if alone else " while running this episode"))
            else:
                job.attempts += 1
                job.exclusive = True  # alone next time: a second death names the culprit
                job.started_at = None
                self._pending.appendleft(job)
                self.retries += 1
        w.inflight.clear()
        if self._startup_failures >= 3:
            self._break(f"workers keep dying before they are ready (last: {reason}); {MAIN_GUARD_HINT}")
        elif not self._closing and self.broken is None:
            self._spawn()

    def _break(self, message: str) -> None:
        self.broken = message
        for job in list(self._pending):
            self._fail(job, Status.ERROR, f"pool: {message}")
        self._pending.clear()
        for w in list(self._workers.values()):
            for job in w.inflight.values():
                self._fail(job, Status.ERROR, f"pool: {message}")
            w.inflight.clear()
        self._lock.notify_all()

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for w in list(self._workers.values()):
            late = [j for j in w.inflight.values()
                    if j.started_at is not None and now - j.started_at > self.hard_timeout_s]
            if not late:
                continue
            culprit = late[0]
            w.inflight.pop(culprit.key)
            reason = (f"episode passed its hard deadline of {self.hard_timeout_s:g} s; "
                      f"worker {w.proc.pid} was killed with its process group")
            self._fail(culprit, Status.TIMEOUT, reason)
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
            w.proc.join(timeout=5)
            w.inflight[culprit.key] = culprit  # so that _on_death skips it by key
            self._on_death(w, f"worker {w.proc.pid} killed: another episode passed its hard deadline",
                           culprit=culprit.key)

    def _recycle(self) -> None:
        if not self.recycle_after:
            return
        for w in list(self._workers.values()):
            if w.given >= self.recycle_after:
                w.retiring = True
            if w.retiring and not w.inflight:
                del self._workers[w.wid]
                self._send_stop(w)
                self._spawn()

    def _send_stop(self, w: _Worker) -> None:
        try:
            w.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        w.stop_sent_at = time.monotonic()
        self._stopping.append(w)

    def _reap_stopping(self) -> None:
        for w in list(self._stopping):
            if not w.proc.is_alive() or time.monotonic() - w.stop_sent_at > self.stop_grace_s:
                try:
                    os.killpg(w.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
                w.proc.join(timeout=5)
                w.conn.close()
                self._stopping.remove(w)

    def _dispatch(self) -> None:
        if self.broken is not None:
            return
        workers = [w for w in self._workers.values() if not w.retiring and w.proc.is_alive()]
        waiting_exclusive = any(j.exclusive for j in self._pending)
        reserved = None
        if waiting_exclusive and workers and not any(not w.inflight for w in workers):
            reserved = min(workers, key=lambda w: len(w.inflight))  # drain it for the exclusive job
        remaining: collections.deque[_Job] = collections.deque()
        while self._pending:
            job = self._pending.popleft()
            if job.exclusive:
                idle = [w for w in workers if not w.inflight]
                target = idle[0] if idle else None
            else:
                free = [w for w in workers if not w.exclusive and w is not reserved and len(w.inflight) < self.slots]
                target = min(free, key=lambda w: len(w.inflight)) if free else None
            if target is None:
                remaining.append(job)
                continue
            if job.exclusive:
                target.exclusive = True
            target.inflight[job.key] = job
            target.given += 1
            self._queue_waits.append(time.monotonic() - job.submitted_at)
            job.version = self.pin_version() if self.pin_version is not None else None
            try:
                target.conn.send(("run", job.key, job.task, job.group_id, job.episode_id, job.sample, job.version,
                                  job.seed))
            except (OSError, BrokenPipeError):
                pass  # the worker is dying; its death handler re-queues the job
        self._pending = remaining
        self._lock.notify_all()

    def _shutdown(self) -> None:
        with self._lock:
            for job in list(self._pending):
                self._fail(job, Status.ERROR, "the pool was closed before the episode ran")
            self._pending.clear()
            for w in list(self._workers.values()):
                self._send_stop(w)
            self._workers.clear()
        # in-flight episodes may still finish within the grace period; keep receiving them
        deadline = time.monotonic() + self.stop_grace_s
        while time.monotonic() < deadline:
            alive = [w for w in self._stopping if w.proc.is_alive()]
            if not alive:
                break
            ready = mp_wait([w.conn for w in alive] + [w.proc.sentinel for w in alive],
                            timeout=max(0.0, deadline - time.monotonic()))
            with self._lock:
                for w in alive:
                    if w.conn in ready:
                        try:
                            while w.conn.poll():
                                self._on_message(w, w.conn.recv())
                        except (EOFError, OSError):
                            pass
        with self._lock:
            for w in self._stopping:
                for job in w.inflight.values():
                    if not job.future.done():
                        self._fail(job, Status.CRASHED, "the pool was closed while the episode ran")
                w.inflight.clear()
                w.stop_sent_at = -1e9  # reap now
            self._reap_stopping()
            self._lock.notify_all()


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    if len(values) == 1:
        return {"p50": values[0], "p90": values[0], "p99": values[0]}
    q = quantiles(values, n=100, method="inclusive")
    return {"p50": q[49], "p90": q[89], "p99": q[98]}


def _close_ref(ref) -> None:
    pool = ref()
    if pool is not None:
        pool.close()


__all__ = ["StrandsProcessPool"]
