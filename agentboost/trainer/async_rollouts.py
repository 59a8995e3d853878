"""Asynchronous rollouts with bounded staleness (``rollout.max_staleness: K``).

The synchronous trainer samples a step's groups, waits for the slowest episode, then updates while
the sampler idles. Here the episodes of the next steps run while a step's update runs: step ``s``
(trained by the update from weight version ``s - 1`` to ``s``) is *admitted* (its tasks drawn, its
episodes queued on the pool) as soon as version ``s - 1 - K`` is published. That is the pacing: a
step is never produced before the weights it may use exist, so no episode is ever more than ``K``
versions behind the update that trains on it, and nothing is produced only to be thrown away. At
``K = 0`` a step is admitted only after the previous update: the synchronous trainer, through this
same machinery (a CI test checks they are equal, token for token and weight for weight).

Each episode is pinned to one weight version from start to end: the pool reads the newest published
version when it hands the episode to a worker (when it starts), and every model call of the episode
names that version (``HFEngine.publish_version`` keeps the ``K + 1`` newest versions servable:
snapshots that share the frozen weights). Pinning at the start (not at admission) gives each episode
the freshest weights that exist when it starts; the pacing bounds how old that can be. The simpler
alternative, admitting episodes only at version boundaries, would make every update wait for the
step's slowest episode: the very wait this removes.

The task stream's position saved with a checkpoint is the one before the first step not yet trained
(``resume_state``): a run stopped with steps in flight draws their tasks again when it resumes, none
skipped, none trained twice.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class _Admitted:
    step: int
    tasks: list[dict]
    futures: list[Future]
    stream_before: dict[str, int]  # the stream's position before this step's tasks were drawn


class AsyncRollouts:
    """The steps admitted to a pool, ahead of the updates by at most ``max_staleness`` versions."""

    def __init__(self, pool, stream, group_size: int, max_staleness: int, last_step: int,
                 seed_of: Callable[[int], int | None] = lambda step: None):
        self.pool, self.stream, self.seed_of = pool, stream, seed_of  # seed_of(step): its episodes' sampling seed
        self.group_size, self.max_staleness, self.last_step = group_size, max_staleness, last_step
        self._admitted: dict[int, _Admitted] = {}
        self._next = None  # the next step to admit (set by the first admit)

    def admit(self, published: int) -> None:
        """Queue every step whose episodes may start now that version ``published`` is served:
        step ``s`` needs version ``s - 1 - K``; none past the run's last step."""
        if self._next is None:
            self._next = published + 1  # the first step after the checkpoint the run starts from
        while self._next <= self.last_step and self._next - 1 - self.max_staleness <= published:
            before = self.stream.state()
            tasks = self.stream.next_batch()
            futures = self.pool.submit_groups(tasks, self.group_size, seed=self.seed_of(self._next))
            self._admitted[self._next] = _Admitted(self._next, tasks, futures, before)
            self._next += 1

    def take(self, step: int) -> tuple[list[dict], list[Future]]:
        """The tasks of ``step`` (admitted) and its episodes' futures, in submission order."""
        admitted = self._admitted.pop(step, None)
        if admitted is None:
            raise RuntimeError(f"step {step} was not admitted (admitted: {sorted(self._admitted)})")
        return admitted.tasks, admitted.futures

    def in_flight_steps(self) -> list[int]:
        return sorted(self._admitted)

    def resume_state(self) -> dict[str, Any]:
        """The stream's position for a checkpoint: before the first admitted step not yet taken."""
        if self._admitted:
            return dict(self._admitted[min(self._admitted)].stream_before)
        return self.stream.state()


def staleness_metrics(staleness: list[int]) -> dict[str, float]:
    """A step's staleness: how many versions behind the trained weights its episodes sampled."""
    if not staleness:
        return {"staleness_mean": 0.0, "staleness_max": 0}
    return {"staleness_mean": sum(staleness) / len(staleness), "staleness_max": max(staleness)}
