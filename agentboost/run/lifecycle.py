"""One run's lifecycle, shared by both trainers (the weights trainer, ``trainer/loop.py``; the prompt
trainer, ``trainer/prompt/loop.py``): a trainer supplies its step, its checkpoint and its
validation; everything around them is here, once.

- start: every check before anything is written (a refused run leaves no run directory behind),
  the run directory, seeds, the task stream, a resume from the newest intact checkpoint, metrics
  (JSONL, TensorBoard, W&B, Prometheus), the start's warnings;
- budget: the configured steps, wall time and cost (the machine's hours x ``run.cost_per_hour``,
  plus what a chat model's provider charged for a prompt run's hosted policy), warnings at 75% and
  90% of the cost, a requested stop;
- SIGTERM: the step in progress may finish (then a checkpoint) within ``run.stop_grace_s``; past
  it, or at a second SIGTERM, the step is abandoned and the run stops at its last checkpoint
  (``StepAbandoned``: the command line exits 143);
- health and failure: each step's episodes are checked (too many failed; the run's share of split
  episodes, the merge-rate gate); a run that cannot learn stops with a named error, recorded in the
  run's events and never "completed" (``health.record_failure``);
- summary: the final checkpoint and validation, plots, and ``result.json``, written only when the
  run ended cleanly.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..episodes.record import read_episodes
from ..files import atomic_write_text
from ..rollout.pool import ensure_not_spawning
from . import health
from .checkpoint import has_checkpoint, latest_name
from .config import TrainConfig
from .directory import prepare_run_dir, saved_config, set_aside_after
from .metrics import MetricsLogger
from .preflight import preflight


class StepAbandoned(Exception):
    """A stop request whose step did not finish within ``run.stop_grace_s``: the run stopped at its
    last checkpoint (the command line says so in one line, exit status 143)."""


class TaskStream:
    """Batches of tasks, reshuffled each epoch from (seed, epoch): resumable from its position."""

    def __init__(self, tasks: list[dict], per_step: int, seed: int, shuffle: bool):
        self.tasks, self.per_step, self.seed, self.shuffle = tasks, per_step, seed, shuffle
        self.epoch, self.offset = 0, 0

    def _order(self) -> list[int]:
        order = list(range(len(self.tasks)))
        if self.shuffle:
            random.Random(self.seed * 100_003 + self.epoch).shuffle(order)
        return order

    def next_batch(self) -> list[dict]:
        batch = []
        while len(batch) < self.per_step:
            order = self._order()
            if self.offset >= len(order):
                self.epoch, self.offset = self.epoch + 1, 0
                continue
            batch.append(self.tasks[order[self.offset]])
            self.offset += 1
        return batch

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    def load(self, state: dict[str, int]) -> None:
        self.epoch, self.offset = state["epoch"], state["offset"]


def budget_reason(run, step: int, elapsed_s: float, stop_requested: str | None,
                  tokens_usd: float = 0.0, tokens_of: str = "") -> str | None:
    """Why a run stops now (a requested stop, its steps, wall time or cost budget), else None. The
    cost is the machine's (elapsed hours x ``run.cost_per_hour``) plus ``tokens_usd``, what a chat
    model's provider charged for ``tokens_of``'s tokens (a prompt run's hosted policy)."""
    if stop_requested:
        return stop_requested
    if step >= run.steps:
        return f"reached {run.steps} steps"
    if run.max_wall_s and elapsed_s >= run.max_wall_s:
        return f"reached the wall-time budget of {run.max_wall_s:g} s"
    machine_usd = elapsed_s / 3600 * run.cost_per_hour
    if run.max_cost and (run.cost_per_hour or tokens_usd) and machine_usd + tokens_usd >= run.max_cost:
        spent = ([f"{run.cost_per_hour:g}/hour"] if run.cost_per_hour else []) + (
            [f"{tokens_usd:.4f} USD of {tokens_of}'s tokens"] if tokens_usd else [])
        return f"reached the cost budget of {run.max_cost:g}: {' + '.join(spent)}"
    return None


class RunLifecycle:
    """The lifecycle a trainer inherits. A trainer implements ``prepare`` (its checks and tasks,
    before anything is written), ``build`` (its policy and pools), ``restore`` (its state from a
    checkpoint), ``train_step``, ``checkpoint``, ``validate``, ``release`` (its resources) and may add
    to ``before_steps``, ``after_steps`` and ``summary``."""

    def __init__(self, cfg: TrainConfig | None, run_dir: str | Path, resume: bool = False, log=print):
        ensure_not_spawning(type(self).__name__)
        self.run_dir, self.log = Path(run_dir), log
        self.cfg = cfg = saved_config(self.run_dir) if resume else cfg
        self.stop_requested: str | None = None
        self.abandoned = False  # a stop past its grace: the step in progress was abandoned
        self._stopped = False  # run() has ended: a late signal changes nothing
        self._warned: set[float] = set()  # cost warning levels already given
        self.step, self._saved_step, self.elapsed_before = 0, -1, 0.0
        # a resume of a run stopped before its first checkpoint has nothing to resume from: it starts
        # over (with its saved config), and is no resume for what the trainer restores
        self.resumed = resume and has_checkpoint(self.run_dir)
        self.validations: list[dict[str, Any]] = []  # step, pass@1 and tool-call rate of each validation
        self.metrics: MetricsLogger | None = None
        self.prometheus = None
        # every check before anything is written: a refused run leaves no run directory behind
        self.train_tasks, self.val_tasks = self.prepare()
        self.start_warnings = preflight(cfg, str(self.run_dir / "config.yaml") if resume else "config",
                                        load_data=False)
        for warning in self.start_warnings:
            log(f"warning: {warning}")
        prepare_run_dir(cfg, self.run_dir, resume, log)
        random.seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        self.seed()
        self.stream = TaskStream(self.train_tasks, cfg.data.tasks_per_step, cfg.run.seed, cfg.data.shuffle)
        self.build()
        try:
            if resume and not self.resumed:
                log(f"warning: {self.run_dir} has no checkpoint (it was stopped before its first): "
                    "starting the run over from step 0 with its saved config")
            restored = self.restore() if self.resumed else None
            # what a stopped attempt recorded past the step resumed from is set aside, never appended to (a
            # new run in the directory of one stopped before its first checkpoint too: the same command again)
            aside, moved = set_aside_after(self.run_dir, self.step if self.resumed else -1)
            if moved:
                log(f"moved {len(moved)} episode file(s) of steps after step {self.step} (sampled by the stopped "
                    f"attempt, not trained on by the weights resumed) to {aside}")
            # the merge-rate gate counts the whole run: a resumed run counts the steps it already wrote
            self.split_gate = health.SplitGate(cfg.run.max_split_share, cfg.run.split_gate_min_episodes)
            for done in range(1, self.step + 1):
                path = self.run_dir / "episodes" / f"step_{done:06d}.jsonl"
                if path.is_file():
                    self.split_gate.add(list(read_episodes(path)))
            self.metrics = MetricsLogger(self.run_dir, cfg, truncate_after_step=self.step if self.resumed else -1)
            if cfg.run.prometheus_port:
                from .prometheus import serve_run

                self.prometheus = serve_run(self.run_dir, cfg.run.prometheus_port)
            for warning in self.start_warnings:
                self.metrics.log_event({"event": "warning", "step": self.step, "warning": warning})
            if restored is not None:
                checkpoint, skipped = restored
                self.metrics.log_event({"event": "resume", "step": self.step, "checkpoint": checkpoint,
                                        "skipped_checkpoints": skipped, "set_aside": moved})
            elif resume:
                self.metrics.log_event({"event": "restart", "step": 0, "reason": "no checkpoint", "set_aside": moved})
        except BaseException:
            self.close()  # the policy server and the worker pools are already running
            raise

    # -- what a trainer supplies -----------------------------------------------------------------
    def prepare(self) -> tuple[list[dict], list[dict]]:
        """The trainer's own checks and its (training, validation) tasks, before anything is written."""
        raise NotImplementedError

    def seed(self) -> None:
        """Seeds beyond Python's and NumPy's (a trainer that owns torch models seeds torch)."""

    def build(self) -> None:
        """The policy, its server and the worker pools."""
        raise NotImplementedError

    def restore(self) -> tuple[str, list[str]]:
        """The state of the newest intact checkpoint (``self.step``, ``self.elapsed_before``, the
        stream's position, ...); (its name, the checkpoints skipped as broken)."""
        raise NotImplementedError

    def train_step(self) -> dict[str, Any]:
        raise NotImplementedError

    def checkpoint(self) -> Any:
        raise NotImplementedError

    def validate(self) -> dict[str, Any]:
        raise NotImplementedError

    def release(self) -> None:
        """The trainer's resources: its pools and policy server."""

    def check_health(self, episodes: list, step: int) -> None:
        """A step's episodes (already written: nothing is lost) against the run's health: the share
        that failed (``run.max_failed_share``) and the run's share of split episodes, the merge-rate
        gate (``run.max_split_share``); either stops the run with a named error."""
        health.check_episode_failures(episodes, self.cfg.run.max_failed_share, step)
        self.split_gate.add(episodes)
        self.split_gate.check(step)

    def tokens_usd(self) -> tuple[float, str]:
        """What a provider charged for the policy's tokens so far, and whose they are (a prompt
        run's hosted policy); (0, "") for a policy served here."""
        return 0.0, ""

    def before_steps(self) -> None:
        """Before the first step: the baseline validation of a fresh run."""
        if self.val_tasks and self.cfg.validation.at_start and self.step == 0:
            self.validate()

    def after_steps(self) -> None:
        """After the last step: the final validation, unless this step had one or a stop was requested."""
        if self.val_tasks and not self.stop_requested and not (self.validations
                                                               and self.validations[-1]["step"] == self.step):
            self.validate()

    def summary(self) -> dict[str, Any]:
        """What the trainer adds to ``result.json``."""
        return {}

    # -- budget and stopping ---------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self._t0

    def cost(self) -> float:
        return self.elapsed() / 3600 * self.cfg.run.cost_per_hour + self.tokens_usd()[0]

    def budget_reason(self) -> str | None:
        usd, of = self.tokens_usd()
        # checked between steps: a step (with a prompt run's gates) may go past a budget
        return budget_reason(self.cfg.run, self.step, self.elapsed(), self.stop_requested, tokens_usd=usd,
                             tokens_of=of)

    def _budget_warnings(self) -> None:
        run = self.cfg.run
        if not (run.max_cost and (run.cost_per_hour or self.tokens_usd()[0])):
            return
        used = self.cost() / run.max_cost
        for level in (0.75, 0.9):
            if used >= level and level not in self._warned:
                self._warned.add(level)
                self.log(f"warning: {used:.0%} of the cost budget used ({self.cost():.2f} of {run.max_cost:g})")
                self.metrics.log_event({"event": "budget_warning", "step": self.step, "level": level,
                                        "cost": self.cost(), "budget": run.max_cost})

    def request_stop(self, reason: str) -> None:
        """Stop at the end of the current step with a checkpoint (e.g. on SIGTERM: a cancelled job)."""
        self.stop_requested = reason

    def stop_on_signals(self) -> None:
        """SIGTERM (a cancelled job, a scheduler's stop): finish the step, checkpoint, exit; if the
        step has not finished within ``run.stop_grace_s``, or at a second SIGTERM, abandon it (the
        run stops at its last checkpoint: bounded time, whatever the step's size). Main thread only."""
        import signal
        import threading

        main = threading.main_thread().ident

        def grace_over() -> None:
            # a real signal to the main thread: it wakes a wait that no flag would (a future's
            # result), and its handler below raises there
            if not self._stopped:
                signal.pthread_kill(main, signal.SIGTERM)

        def on_term(*_) -> None:  # Python runs it in the main thread
            if self._stopped:
                return
            if self.stop_requested:  # the grace is over, or a second SIGTERM: abandon the step
                self.abandoned = True
                raise KeyboardInterrupt
            self.request_stop("stopped by SIGTERM")
            timer = threading.Timer(self.cfg.run.stop_grace_s, grace_over)
            timer.daemon = True
            timer.start()

        signal.signal(signal.SIGTERM, on_term)

    def close(self) -> None:
        self.release()
        if self.metrics is not None:
            self.metrics.close()
        if self.prometheus is not None:
            self.prometheus.shutdown()

    # -- the run ---------------------------------------------------------------------------------
    def run(self, after_step: Callable[[Any, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train to the budget. ``after_step(trainer, metrics)`` runs after every step (and its
        checkpoint), before the periodic validation: e.g. to keep a copy of the adapter as it was at
        that step (a benchmark's learning curve) without a checkpoint per step."""
        self._t0 = time.perf_counter()
        (self.run_dir / "result.json").unlink(missing_ok=True)  # a resumed run is running again
        cfg = self.cfg
        try:
            self.before_steps()
            while (reason := self.budget_reason()) is None:
                step_metrics = self.train_step()
                self._budget_warnings()
                if cfg.run.checkpoint_every and self.step % cfg.run.checkpoint_every == 0:
                    self.checkpoint()
                if after_step is not None:
                    after_step(self, step_metrics)
                if self.val_tasks and cfg.validation.every and self.step % cfg.validation.every == 0:
                    self.validate()
            self.log(f"stopping: {reason}")
            if self._saved_step != self.step:
                self.checkpoint()
            self.after_steps()
            from .metrics import draw_plots

            draw_plots(self.run_dir)
            result = {"steps": self.step, "stopped": reason, "stop_requested": bool(self.stop_requested)}
            if self.validations:  # the first and last validation: what the run changed
                result["validation"] = {"first": self.validations[0], "last": self.validations[-1]}
            if self.start_warnings:
                result["warnings"] = list(self.start_warnings)
            result.update(self.summary())
            self.metrics.log_event({"event": "cancelled" if self.stop_requested else "completed", "step": self.step,
                                    "stopped": reason})
            atomic_write_text(self.run_dir / "result.json", json.dumps(result))  # the run ended cleanly
            return result
        except KeyboardInterrupt as e:
            if not self.abandoned:
                raise
            kept = latest_name(self.run_dir) or "none"
            self.metrics.log_event({"event": "cancelled", "step": self.step, "stopped": self.stop_requested,
                                    "abandoned_step": self.step + 1, "checkpoint": kept})
            raise StepAbandoned(f"{self.stop_requested}: step {self.step + 1} did not finish within "
                                f"run.stop_grace_s={cfg.run.stop_grace_s:g} s and was abandoned; the last "
                                f"checkpoint is {kept}") from e
        except BaseException as e:
            named = health.record_failure(e, self.run_dir, self.metrics, self.step)
            if named is not None:
                raise named from e
            raise
        finally:
            self._stopped = True
            self.close()
