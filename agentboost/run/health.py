"""Run health: the checks that stop a run which cannot learn, and the warnings for steps that teach
little. A run never ends "completed" on broken weights or on episodes that all failed:

- a non-finite loss or gradient norm stops the update before the optimizer touches the weights;
  weights that an optimizer step made non-finite stop the run before anything is checkpointed, so
  the last checkpoint (``checkpoints/latest``) stays the last good one;
- a step in which the share of failed episodes (timeout, crash, error) reaches
  ``run.max_failed_share`` (default 1.0: every episode failed) stops the run, naming the commonest
  errors;
- a step whose groups all have equal rewards (no learning signal) or whose episodes are mostly
  truncated gets a warning on the console and in ``events.jsonl``.
"""

from __future__ import annotations

import errno
import math
from collections import Counter
from typing import Iterable

import torch

from ..episodes.record import Episode, Status
from ..errors import RunFailed

TRUNCATION_WARNING_SHARE = 0.5


class NonFiniteUpdate(RunFailed):
    """The loss, the gradients or the updated weights are not finite."""


class RunWriteFailed(RunFailed):
    """A run file could not be written (a full disk, a quota, a read-only file system): the run
    stops, the last intact checkpoint stays ``latest``, no half-written file is left."""


WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG}


def record_failure(e: BaseException, run_dir, metrics, step: int) -> RunWriteFailed | None:
    """A run that failed with ``e``: its ``failed`` event (with the named error where the run's
    files could not be written) and that named error, for the caller to raise instead of ``e``."""
    named = write_failure(e, run_dir)
    try:
        metrics.log_event({"event": "failed", "step": step,
                           "error": f"{type(named or e).__name__}: {named or e}"[:2000]})
    except OSError:
        pass  # the disk that failed the run may not take its last event either
    return named


def write_failure(e: BaseException, run_dir) -> RunWriteFailed | None:
    """The named error for an ``OSError`` of writing the run's files, else None."""
    if not isinstance(e, OSError) or e.errno not in WRITE_ERRNOS:
        return None
    from .checkpoint import latest_name

    where = e.filename or run_dir
    kept = latest_name(run_dir)
    return RunWriteFailed(f"cannot write {where}: {e.strerror}; "
                          + (f"the last intact checkpoint {kept} is kept (--resume continues from it)" if kept
                             else "no checkpoint was written yet"))


class EpisodesFailed(RunFailed):
    """Too many of a step's episodes failed for the step to teach anything."""


def check_loss_and_grad(loss: float, grad_norm: float, step: int) -> None:
    """Before the optimizer step: the weights are still the last good ones."""
    if not math.isfinite(loss) or not math.isfinite(grad_norm):
        raise NonFiniteUpdate(f"step {step}: the update's loss ({loss}) or gradient norm ({grad_norm}) is not finite; "
                              "the weights were not changed and nothing was checkpointed (lower optim.lr, check the "
                              "reward's values, or keep optim.grad_clip)")


def check_weights(params: Iterable[torch.Tensor], step: int) -> None:
    """After the optimizer step: every trainable weight finite."""
    bad = sum(int((~torch.isfinite(p.detach())).sum()) for p in params)
    if bad:
        raise NonFiniteUpdate(f"step {step}: the optimizer step made {bad} weights non-finite; the run stops before "
                              "checkpointing them (the last checkpoint is the last good one; lower optim.lr)")


def failure_reasons(episodes: list[Episode], most: int = 3) -> str:
    """The commonest statuses and error texts of the failed episodes, as one line."""
    reasons = Counter(f"{ep.status}: {(ep.error or 'no error text').splitlines()[0][:400]}"
                      for ep in episodes if ep.failed or ep.aborted)
    return "; ".join(f"{n}x {r}" for r, n in reasons.most_common(most))


def check_episode_failures(episodes: list[Episode], max_failed_share: float, step: int) -> None:
    # aborted ones too: they are not wrong answers, but a step without them cannot learn either
    failed = sum(ep.failed or ep.aborted for ep in episodes)
    if episodes and failed / len(episodes) >= max_failed_share:
        raise EpisodesFailed(f"step {step}: {failed} of {len(episodes)} episodes failed (run.max_failed_share="
                             f"{max_failed_share:g}); commonest: {failure_reasons(episodes)}")


class TooManySplits(RunFailed):
    """The run's share of split episodes passed ``run.max_split_share``: what is trained is many
    short sequences instead of whole episodes (a client rewriting its history, a template that
    re-renders), which the run would otherwise hide in its metrics."""


class SplitGate:
    """The merge-rate gate: counts the run's episodes (those with a model call) and the split ones
    (more than one training sequence) with their reasons; ``check`` fails the run once it has
    ``min_episodes`` and the split share is above ``max_share`` (1.0: never)."""

    def __init__(self, max_share: float, min_episodes: int = 16):
        self.max_share, self.min_episodes = max_share, min_episodes
        self.episodes = self.split = 0
        self.reasons: Counter = Counter()

    def add(self, episodes: list[Episode]) -> None:
        for ep in episodes:
            if not ep.calls:
                continue
            self.episodes += 1
            if ep.num_splits > 0:
                self.split += 1
                self.reasons.update(ep.split_reasons)

    @property
    def share(self) -> float:
        return self.split / self.episodes if self.episodes else 0.0

    def check(self, step: int) -> None:
        if self.max_share >= 1.0 or self.episodes < self.min_episodes or self.share <= self.max_share:
            return
        top = ", ".join(f"{r} ({n})" for r, n in self.reasons.most_common(3)) or "none recorded"
        raise TooManySplits(f"step {step}: {self.split} of the run's {self.episodes} episodes split into several "
                            f"training sequences ({self.share:.0%} > run.max_split_share={self.max_share:g}); "
                            f"commonest split reasons: {top} (docs/gateway.md says what each means and how to "
                            "keep an agent's history whole)")


def step_warnings(episodes: list[Episode], all_equal_groups: int, groups: int) -> list[str]:
    """Warnings for a step that teaches little (the run goes on)."""
    out = []
    if groups and all_equal_groups == groups:
        out.append(f"all {groups} groups have equal rewards: no learning signal this step (tasks too easy or too "
                   "hard for the policy, or a reward that gives everyone the same)")
    truncated = sum(ep.status == Status.TRUNCATED for ep in episodes)
    if episodes and truncated / len(episodes) > TRUNCATION_WARNING_SHARE:
        out.append(f"{truncated} of {len(episodes)} episodes were truncated (raise sampling.max_new_tokens or "
                   "agent.max_response_tokens)")
    return out
