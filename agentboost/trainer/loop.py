"""The local trainer: GRPO (RLOO, REINFORCE++) on one machine.

The trainer process holds the policy (LoRA via peft, or full fine-tuning), serves it through the
batched local engine behind the vLLM contract on loopback, and runs the agent in the worker pool.
Per step: a batch of tasks x ``group_size`` episodes -> rewards -> advantages and the clipped
policy loss (veRL's functions) -> one or more updates -> the engine samples the next step with the
new weights (the same model object).
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..episodes.passk import pass_at_k
from ..episodes.record import STATUSES, Episode, EpisodeWriter, read_episodes
from ..episodes.summary import (
    reasoning_metrics,
    split_metrics,
    success_ci95,
    tool_use_metrics,
)
from ..files import atomic_write_text
from ..rewards.groups import apply_group_policy
from ..rewards.judge import judge_metrics
from ..rollout.pool import StrandsProcessPool, ensure_not_spawning
from ..run import health
from ..run.assembly import agent_spec, environment
from ..run.checkpoint import best_checkpoint, latest_name, load_latest_intact, save_checkpoint, write_best
from ..run.config import TrainConfig
from ..run.directory import prepare_run_dir, saved_config
from ..run.metrics import MetricsLogger, figure_text, rate_text, validation_figure, validation_sample
from ..run.preflight import preflight
from ..sampling.protocol import SamplingParams
from ..sampling.spec import SamplerSpec
from ..tasks import load_tasks
from . import batch as batching
from . import loss as losses
from .verify import StepVerifier


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
    """Why a run stops now (a requested stop, its steps, wall time or cost budget), else None; the
    weights trainer and the prompt trainer stop by the same rules. The cost is the machine's
    (elapsed hours x ``run.cost_per_hour``) plus ``tokens_usd``, what a chat model's provider
    charged for ``tokens_of``'s tokens (a prompt run's hosted policy)."""
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


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: str | Path, resume: bool = False, log=print):
        ensure_not_spawning("Trainer")
        self.cfg, self.run_dir, self.log = cfg, Path(run_dir), log
        self.stop_requested: str | None = None
        self.abandoned = False  # a stop past its grace: the step in progress was abandoned
        self._stopped = False  # run() has ended: a late signal changes nothing
        self._warned: set[float] = set()  # budget warning levels already given
        if resume:
            self.cfg = cfg = saved_config(self.run_dir)
        # every check before anything is written: a refused run leaves no run directory behind
        self.train_tasks = load_tasks(cfg.data.train_file, question_field=cfg.data.question_field)
        self.val_tasks = (load_tasks(cfg.data.val_file, question_field=cfg.data.question_field)[: cfg.validation.max_tasks]
                          if cfg.data.val_file else [])
        self.start_warnings = preflight(cfg, str(self.run_dir / "config.yaml") if resume else "config",
                                        load_data=False)
        for warning in self.start_warnings:
            log(f"warning: {warning}")
        prepare_run_dir(cfg, self.run_dir, resume, log)
        random.seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        torch.manual_seed(cfg.run.seed)
        self.stream = TaskStream(self.train_tasks, cfg.data.tasks_per_step, cfg.run.seed, cfg.data.shuffle)
        self.metrics = None
        self._build_policy()
        try:
            self._restore(resume)
        except BaseException:
            self.close()  # the policy server and the worker pools are already running
            raise

    def _restore(self, resume: bool) -> None:
        cfg = self.cfg
        self.step = 0
        self._saved_step = -1
        self.elapsed_before = 0.0
        self.warm_started = False
        self.validations: list[dict[str, Any]] = []  # step, pass@1 and tool-call rate of each validation
        self.history: list[dict[str, Any]] = []
        # the checkpoint validation picked so far (checkpoints/best.json): a resume goes on from it
        self.best: dict[str, Any] | None = best_checkpoint(self.run_dir) if resume else None
        skipped: list[str] = []
        if resume:
            ckpt, state, skipped = load_latest_intact(self.run_dir, self.model, self.optimizer, self.scheduler,
                                                      cfg.model.lora)
            for problem in skipped:
                self.log(f"warning: {problem}")
            self.step = state["step"]
            self.stream.load(state["data"])
            self.elapsed_before = state.get("elapsed_s", 0.0)
            self.warm_started = bool(state.get("warm_started", False))
            self.log(f"resumed {self.run_dir} at step {self.step} from {ckpt.name}")
        # the merge-rate gate counts the whole run: a resumed run counts the steps it already wrote
        self.split_gate = health.SplitGate(cfg.run.max_split_share, cfg.run.split_gate_min_episodes)
        for done in range(1, self.step + 1):
            path = self.run_dir / "episodes" / f"step_{done:06d}.jsonl"
            if path.is_file():
                self.split_gate.add(list(read_episodes(path)))
        if self.engine_name == "hf" or self.step > 0 or self.warm_started:  # vLLM started with the base weights
            self.policy_server.publish(self.model, self.step)
        self.metrics = MetricsLogger(self.run_dir, cfg, truncate_after_step=self.step)
        self.prometheus = None
        if cfg.run.prometheus_port:
            from ..run.prometheus import serve_run

            self.prometheus = serve_run(self.run_dir, cfg.run.prometheus_port)
        for warning in self.start_warnings:
            self.metrics.log_event({"event": "warning", "step": self.step, "warning": warning})
        if resume:
            self.metrics.log_event({"event": "resume", "step": self.step, "checkpoint": ckpt.name,
                                    "skipped_checkpoints": skipped})
        # the served policy is the trained one: checked after every publish and every step's rollouts
        self.verifier = StepVerifier(cfg, self.run_dir, self.policy_server, self.engine_name, self.model,
                                     self.tokenizer, self.log, self.metrics, resume_step=self.step if resume else None)
        self.verifier.after_publish(self.step, self.step)

    # -- setup ------------------------------------------------------------------------------
    def _build_policy(self) -> None:
        from ..models.loading import load_policy, resolve_model_path
        from ..run.policy_engine import server_options
        from ..sampling.policy_server import start_policy_server

        cfg = self.cfg
        self.model_path = str(resolve_model_path(cfg.model.path))
        model, self.tokenizer = load_policy(self.model_path, dtype=cfg.model.dtype, device=cfg.model.device)
        self.ref_model = None
        if cfg.model.lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha,
                                                     lora_dropout=cfg.model.lora_dropout, task_type="CAUSAL_LM",
                                                     target_modules=list(cfg.model.lora_target_modules)))
        elif cfg.algorithm.kl_coef > 0:
            import copy

            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        model.eval()
        self.model = model
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
        warm = cfg.optim.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm > 0 else 1.0)
        slots = cfg.run.workers * cfg.run.slots
        # vllm: a server subprocess samples, the weights reach it after every update
        self.engine_name, self.policy_server = start_policy_server(
            model_path=self.model_path, model=model, tokenizer=self.tokenizer, seed=cfg.run.seed, slots=slots,
            max_batch_size=min(slots, cfg.run.max_batch), lora_rank=cfg.model.lora_r if cfg.model.lora else 0,
            full_weight_sync=not cfg.model.lora, workdir=self.run_dir / "vllm", **server_options(cfg))
        policy_file = None
        if self.engine_name == "vllm":
            self.log(f"vLLM server up in {self.policy_server.server.startup_s:.0f} s at {self.policy_server.url}, "
                     f"{self.policy_server.sync} weight sync "
                     f"(log {self.policy_server.server.log_path})")
            policy_file = str(self.policy_server.policy_file)
        # the in-process hf engine, whose batching figures the step's metrics report; None on vLLM
        self.hf_engine = self.policy_server.engine if self.engine_name == "hf" else None
        self.url = self.policy_server.url
        spec, env = agent_spec(cfg), environment(cfg)
        train_sampling = SamplingParams(temperature=cfg.sampling.temperature, top_p=cfg.sampling.top_p,
                                        max_new_tokens=cfg.sampling.max_new_tokens)
        v = cfg.validation
        val_sampling = SamplingParams(temperature=v.temperature, top_p=v.top_p, max_new_tokens=v.max_new_tokens)
        self.pool = StrandsProcessPool(spec, SamplerSpec(tokenizer=self.model_path, sampling=train_sampling, url=self.url,
                                                   policy_file=policy_file),
                                       env, workers=cfg.run.workers, slots=cfg.run.slots)
        self.val_pool = (StrandsProcessPool(spec, SamplerSpec(tokenizer=self.model_path, sampling=val_sampling, url=self.url,
                                                                policy_file=policy_file),
                                            env, workers=1, slots=cfg.run.slots) if self.val_tasks else None)

    def close(self) -> None:
        for p in (self.pool, self.val_pool):
            if p is not None:
                p.close()
        self.policy_server.close()
        if self.metrics is not None:
            self.metrics.close()
        if getattr(self, "prometheus", None) is not None:
            self.prometheus.shutdown()

    # -- the loop ---------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self._t0

    def cost(self) -> float:
        return self.elapsed() / 3600 * self.cfg.run.cost_per_hour

    def _budget_warnings(self) -> None:
        run = self.cfg.run
        if not (run.max_cost and run.cost_per_hour):
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

    def _budget_reason(self) -> str | None:
        return budget_reason(self.cfg.run, self.step, self.elapsed(), self.stop_requested)

    def run(self, after_step: Callable[["Trainer", dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train to the budget. ``after_step(trainer, metrics)`` runs after every step's update (and
        its checkpoint), before the periodic validation: e.g. to keep a copy of the adapter as it was
        at that step (a benchmark's learning curve) without a checkpoint per step."""
        self._t0 = time.perf_counter()
        (self.run_dir / "result.json").unlink(missing_ok=True)  # a resumed run is running again
        try:
            if self.val_pool is not None and self.cfg.validation.at_start and self.step == 0 and not self.warm_started:
                self.validate()  # the baseline: the model as given, before any warm start
            if self.cfg.warm_start.demonstrations and not self.warm_started and self.step == 0:
                self.warm_start()
            while (reason := self._budget_reason()) is None:
                step_metrics = self.train_step()
                every = self.cfg.run.checkpoint_every
                if every and self.step % every == 0:
                    self.checkpoint()
                if after_step is not None:
                    after_step(self, step_metrics)
                if self.val_pool is not None and self.cfg.validation.every and self.step % self.cfg.validation.every == 0:
                    self.validate()
            self.log(f"stopping: {reason}")
            if self._saved_step != self.step:
                self.checkpoint()
            validated = self.cfg.validation.every and self.step % self.cfg.validation.every == 0
            compare = self.cfg.validation.compare_to_base and not self.stop_requested
            if self.val_pool is not None and (compare or not validated) and not self.stop_requested:
                if not validated:
                    self.validate()
                if compare:
                    self.compare_to_base(self._last_validation)
            from ..run.metrics import draw_plots

            draw_plots(self.run_dir)
            result = {"steps": self.step, "stopped": reason, "stop_requested": bool(self.stop_requested)}
            if self.validations:  # this session's first and last validation: what the run changed
                result["validation"] = {"first": self.validations[0], "last": self.validations[-1]}
            if self.best is not None:
                result["best_checkpoint"] = self.best
            if self.start_warnings:
                result["warnings"] = list(self.start_warnings)
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
                                f"run.stop_grace_s={self.cfg.run.stop_grace_s:g} s and was abandoned; the last "
                                f"checkpoint is {kept}") from e
        except BaseException as e:
            named = health.record_failure(e, self.run_dir, self.metrics, self.step)
            if named is not None:
                raise named from e
            raise
        finally:
            self._stopped = True
            self.close()

    def compare_to_base(self, episodes: list[Episode]) -> dict[str, Any]:
        """The trained policy against the model it started from, paired over the held-out tasks:
        the final validation's ``episodes`` are the trained side, so only the base model runs."""
        from ..evaluation.evaluate import evaluate

        cfg = self.cfg
        res = evaluate(str(self.run_dir), cfg.model.path, self.val_tasks, cfg, samples=cfg.validation.k,
                       seed=cfg.run.seed, workers=cfg.run.workers, slots=cfg.run.slots,
                       out_dir=self.run_dir / "compare_to_base", log=self.log, model_episodes=episodes)
        d = res["difference"]
        self.metrics.log_event({"event": "compare_to_base", "step": self.step, "model": res["model"]["success_rate"],
                                "baseline": res["baseline"]["success_rate"], "difference": d["mean_difference"],
                                "p_value": d["p_value"], "significant": d["significant"]})
        from ..evaluation.statistics import difference_text

        self.log(f"against {cfg.model.path}: " + difference_text(res["model"]["success_rate"],
                 res["baseline"]["success_rate"], d["mean_difference"], d["ci95"], d["p_value"], d["tasks"])
                 + (" (significant)" if d["significant"] else ""))
        return res

    def warm_start(self) -> dict[str, Any]:
        """Supervised steps on demonstrations (``trainer/warm_start.py``), then a checkpoint at step 0
        so that a resumed run does not repeat them."""
        from .warm_start import run_warm_start

        with self.policy_server.weights_lock:  # the hf engine samples from this very model
            res = run_warm_start(self.cfg, self.model, self.tokenizer, agent_spec(self.cfg), environment(self.cfg),
                                 self.model_path, self.run_dir, log=self.log)
        self.warm_started = True
        self.metrics.log_event({"event": "warm_start", "step": 0, **res})
        self.policy_server.publish(self.model, 0)  # vLLM samples the warm-started weights from the first step
        self.verifier.after_publish(0, 0)
        self.checkpoint()
        return res

    def checkpoint(self) -> None:
        state = {"data": self.stream.state(), "elapsed_s": self.elapsed(), "warm_started": self.warm_started}
        path = save_checkpoint(self.run_dir, self.step, self.model, self.optimizer, self.scheduler, state,
                               self.cfg.model.lora, protect=(self.best["checkpoint"],) if self.best else ())
        self._saved_step = self.step
        self.log(f"checkpoint {path.name}")
        self.metrics.log_event({"event": "checkpoint", "step": self.step, "checkpoint": path.name})

    def _rollouts(self, pool: StrandsProcessPool, tasks: list[dict], samples: int, label: str) -> list[Episode]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      transient=True, disable=not sys.stderr.isatty()) as progress:
            bar = progress.add_task(label, total=len(tasks) * samples)
            episodes = pool.run(tasks, samples=samples, on_episode=lambda ep: progress.advance(bar))
        if pool.env is not None and pool.env.scores_groups:  # a group-ranking judge: whole groups, now
            pool.env.score_groups({str(t["task_id"]): t for t in tasks}, episodes)
        return episodes

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t_step = time.perf_counter()
        engine_before = dataclasses.replace(self.hf_engine.stats) if self.hf_engine is not None else None
        tasks = self.stream.next_batch()
        episodes = self._rollouts(self.pool, tasks, cfg.data.group_size, f"step {self.step + 1} rollouts")
        t_roll = time.perf_counter() - t_step
        kept, groups = apply_group_policy(episodes, cfg.reward.group_policy, group_size=cfg.data.group_size,
                                          failed_reward=cfg.reward.failed_reward)
        adv = losses.compute_advantages(kept, cfg.algorithm.adv_estimator, cfg.algorithm.norm_adv_by_std,
                                        cfg.algorithm.gamma)
        rows = [r for r in batching.rows_from_episodes(kept) if r.group_id in adv.informative_groups]
        for r in rows:
            r.advantage = adv.by_episode[r.episode_id]
        with EpisodeWriter(self.run_dir / "episodes" / f"step_{self.step + 1:06d}.jsonl") as w:
            for ep in episodes:  # after the group policy: failed episodes carry their reward
                w.write(ep)
        health.check_episode_failures(episodes, cfg.run.max_failed_share, self.step + 1)  # written first: nothing lost
        self.split_gate.add(episodes)
        self.split_gate.check(self.step + 1)  # the run's share of split episodes: written first too
        for warning in health.step_warnings(episodes, adv.all_equal_groups, adv.groups):
            self.log(f"warning: step {self.step + 1}: {warning}")
            self.metrics.log_event({"event": "warning", "step": self.step + 1, "warning": warning})
        verified = self.verifier.after_rollouts(episodes, self.step + 1)  # before anything trains on them
        t_up = time.perf_counter()
        update = self.update(rows) if rows else {"loss": 0.0, "grad_norm": 0.0, "pg_clipfrac": 0.0, "ppo_kl": 0.0,
                                                  "kl": 0.0, "trained_tokens": 0}
        self.step += 1
        sync_s = 0.0
        if rows:
            # the next step samples with these weights: a new LoRA adapter (or reloaded weights) on vLLM
            self.policy_server.publish(self.model, self.step)
            sync_s = self.policy_server.last_sync_s
            verified.update(self.verifier.after_publish(self.step, self.step))
        t_update = time.perf_counter() - t_up
        rewards = [ep.reward for ep in episodes if ep.reward is not None]
        statuses = Counter(ep.status for ep in episodes)
        m = {
            "step": self.step,
            "reward_mean": float(np.mean(rewards)) if rewards else None,
            "reward_std": float(np.std(rewards)) if rewards else None,
            # over the episodes that have an outcome: an aborted one (an outage) is none
            "success_rate": sum(ep.succeeded for ep in episodes) / max(1, sum(not ep.aborted for ep in episodes)),
            "advantage_abs_mean": float(np.mean([abs(a) for a in adv.by_episode.values()])) if adv.by_episode else 0.0,
            **update,
            "sampled_tokens": sum(ep.num_response_tokens for ep in episodes),
            "all_equal_group_rate": adv.all_equal_groups / max(1, adv.groups),
            "groups": adv.groups, "dropped_groups": groups.dropped_groups, "aborted_episodes": groups.aborted_episodes,
            "statuses": {s: statuses.get(s, 0) for s in STATUSES},
            **split_metrics(episodes),
            **tool_use_metrics(episodes),
            **reasoning_metrics(episodes),
            **judge_metrics(episodes),
            "lr": self.scheduler.get_last_lr()[0],
            **(_sampler_metrics(engine_before, self.hf_engine.stats) if self.hf_engine is not None else {}),
            "time_weight_sync_s": sync_s,
            **verified,
            "time_rollout_s": t_roll,
            "time_reward_s": sum(ep.timings.get("reward_s", 0.0) for ep in episodes),
            "time_update_s": t_update,
            "time_step_s": time.perf_counter() - t_step,
            "elapsed_s": self.elapsed(),
        }
        self.metrics.log_step(m)
        self.metrics.log_event({"event": "progress", "step": self.step, "total_steps": cfg.run.steps,
                                **{k: m[k] for k in ("reward_mean", "success_rate", "loss", "sampled_tokens", "statuses",
                                                     "all_equal_group_rate", "time_rollout_s", "time_update_s",
                                                     "elapsed_s")}, "cost": self.cost()})
        self._budget_warnings()
        self.log(f"step {self.step}/{cfg.run.steps}  reward {m['reward_mean']:.3f}  success {m['success_rate']:.2f}  "
                 f"loss {m['loss']:+.4f}  kl {m['ppo_kl']:+.4f}  clip {m['pg_clipfrac']:.3f}  grad {m['grad_norm']:.3f}  "
                 f"all-equal {m['all_equal_group_rate']:.2f}  tools {m['tool_call_rate']:.2f}  merge {m['merge_rate']:.2f}  "
                 f"tokens {m['sampled_tokens']}  {m['time_step_s']:.1f}s (rollout {t_roll:.1f}, update {t_update:.1f})")
        return m

    def update(self, rows: list[batching.TrainRow]) -> dict[str, Any]:
        cfg = self.cfg
        a = cfg.algorithm
        actor = losses.actor_config(a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c, a.loss_agg_mode, a.policy_loss)
        pad = self.tokenizer.pad_token_id
        device = next(self.model.parameters()).device
        batches = batching.micro_batches(rows, cfg.optim.micro_batch_tokens)
        total_rows = len(rows)
        stats = Counter()
        with self.policy_server.weights_lock:  # no sampling while the weights change
            self.model.train()
            for _ in range(cfg.optim.updates_per_step):
                self.optimizer.zero_grad(set_to_none=True)
                pass_loss = 0.0
                for mb in batches:
                    batch = batching.pad_batch(mb, pad, device=device)
                    logp = losses.token_logprobs(self.model, batch, cfg.sampling.temperature,
                                                 checkpoint_layers=cfg.optim.gradient_checkpointing)
                    loss, pg = losses.policy_loss(logp, batch, actor)
                    kl_value = 0.0
                    if cfg.algorithm.kl_coef > 0:
                        with torch.no_grad():
                            if cfg.model.lora:
                                with self.model.disable_adapter():
                                    ref = losses.token_logprobs(self.model, batch, cfg.sampling.temperature)
                            else:
                                ref = losses.token_logprobs(self.ref_model, batch, cfg.sampling.temperature)
                        kl = losses.kl_loss(logp, ref, batch["response_mask"], cfg.algorithm.kl_type,
                                               cfg.algorithm.loss_agg_mode)
                        loss = loss + cfg.algorithm.kl_coef * kl
                        kl_value = float(kl.detach())
                    share = len(mb) / total_rows  # micro-batch losses are means over their rows
                    (loss * share).backward()
                    stats["loss"] += float(loss.detach()) * share
                    pass_loss += float(loss.detach()) * share
                    # not every registered loss reports these (gpg reports none)
                    stats["pg_clipfrac"] += float(pg.get("actor/pg_clipfrac", 0.0)) * share
                    stats["ppo_kl"] += float(pg.get("actor/ppo_kl", 0.0)) * share
                    stats["kl"] += kl_value * share
                    stats["trained_tokens"] += int(batch["response_mask"].sum())
                params = [p for p in self.model.parameters() if p.requires_grad]
                grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.optim.grad_clip)
                stats["grad_norm"] = float(grad_norm)
                health.check_loss_and_grad(pass_loss, stats["grad_norm"], self.step + 1)  # before the weights change
                self.optimizer.step()
                health.check_weights(params, self.step + 1)  # never checkpoint (or serve) broken weights
            self.scheduler.step()
            self.model.eval()
        n = cfg.optim.updates_per_step
        return {"loss": stats["loss"] / n, "pg_clipfrac": stats["pg_clipfrac"] / n, "ppo_kl": stats["ppo_kl"] / n,
                "kl": stats["kl"] / n, "grad_norm": stats["grad_norm"], "trained_tokens": stats["trained_tokens"] // n,
                "micro_batches": len(batches)}

    def _pick_best(self, m: dict[str, Any]) -> None:
        """The best checkpoint: the highest validation success rate (pass@1), a tie going to the
        later step (more training for the same score). The base model (step 0 without a warm
        start) is no checkpoint and never picked; a best step not checkpointed yet gets its
        checkpoint now, so that the best can always be served, and older checkpoints are deleted
        around it, never it."""
        if (self.step == 0 and not self.warm_started) or m["val_pass@1"] is None:  # None: every episode aborted
            return
        value = float(m["val_pass@1"])
        if self.best is not None and value < self.best["value"]:
            return
        if self._saved_step != self.step:
            self.checkpoint()
        self.best = {"checkpoint": f"step_{self.step:06d}", "step": self.step, "metric": "val_pass@1",
                     "value": value, "ci95": m["val_success_ci95"]}
        write_best(self.run_dir, self.best)
        self.metrics.log_event({"event": "best_checkpoint", **self.best})
        self.log(f"best checkpoint: {self.best['checkpoint']} (pass@1 {value:.3f})")

    def validate(self) -> dict[str, Any]:
        k = self.cfg.validation.k
        episodes = self._rollouts(self.val_pool, self.val_tasks, k, "validation")
        apply_group_policy(episodes, "keep", failed_reward=self.cfg.reward.failed_reward)
        self.verifier.check_calls(episodes, self.step)
        self._last_validation = episodes  # the final one is compare_to_base's trained side
        with EpisodeWriter(self.run_dir / "episodes" / f"val_step_{self.step:06d}.jsonl") as w:
            for ep in episodes:
                w.write(ep)
        aborted = sum(ep.aborted for ep in episodes)
        episodes = [ep for ep in episodes if not ep.aborted]  # an outage is no outcome (counted, left out)
        by_task: dict[str, list[Episode]] = {}
        for ep in episodes:
            by_task.setdefault(ep.task_id, []).append(ep)
        p1 = [pass_at_k(len(eps), sum(e.succeeded for e in eps), 1) for eps in by_task.values()]
        pk = [pass_at_k(len(eps), sum(e.succeeded for e in eps), k) for eps in by_task.values()]
        rewards = [ep.reward for ep in episodes if ep.reward is not None]
        m = {"step": self.step, "val_reward_mean": float(np.mean(rewards)) if rewards else None,
             "val_pass@1": float(np.mean(p1)) if p1 else None, f"val_pass@{k}": float(np.mean(pk)) if pk else None,
             **validation_sample(self.cfg, len(by_task), len(episodes), aborted),
             **{f"val_{name}": v for name, v in tool_use_metrics(episodes).items()},
             "val_success_ci95": success_ci95(episodes),
             **{f"val_{name}": v for name, v in reasoning_metrics(episodes).items()},
             **{f"val_{name}": v for name, v in split_metrics(episodes).items()}}
        self.metrics.log_validation(m)
        self._pick_best(m)
        self.validations.append({"step": self.step, "pass@1": m["val_pass@1"],
                                 "tool_call_rate": m["val_tool_call_rate"], "episodes": len(episodes),
                                 "figure": figure_text(validation_figure(m))})
        self.log(f"validation at step {self.step}: {figure_text(validation_figure(m))}; reward "
                 f"{rate_text(m['val_reward_mean'])}  pass@{k} {rate_text(m[f'val_pass@{k}'])}  "
                 f"tools {m['val_tool_call_rate']:.2f}")
        return m


def _sampler_metrics(before, after) -> dict[str, float]:
    batches = after.batches - before.batches
    return {"sampler_batches": batches,
            "sampler_mean_batch": (after.requests - before.requests) / batches if batches else 0.0,
            "sampler_busy_s": after.busy_s - before.busy_s,
            "sampler_shared_prefix_tokens": after.shared_prefix_tokens - before.shared_prefix_tokens}


