"""The weights trainer: GRPO (RLOO, REINFORCE++) on one machine.

The trainer process holds the policy (LoRA via peft, or full fine-tuning), serves it through the hf
engine (behind the vLLM contract on loopback) or a vLLM server, and runs the agent in the worker pool.
Per step: a batch of tasks x ``group_size`` episodes -> rewards -> advantages and the clipped
policy loss (veRL's functions) -> one or more updates -> the engine samples the next step with the
new weights (the same model object). With ``rollout.max_staleness`` K > 0 the next steps' episodes
run during the update, each on a published snapshot of the weights at most K versions old, and the
update corrects for it (``async_rollouts.py``, docs/async.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..episodes.record import STATUSES, Episode, EpisodeWriter
from ..episodes.summary import (
    reasoning_metrics,
    split_metrics,
    tool_use_metrics,
)
from ..rewards.groups import apply_group_policy
from ..rewards.judge import judge_metrics
from ..run import assembly, health
from ..run.checkpoint import best_checkpoint, load_latest_intact, save_checkpoint, write_best
from ..run.config import TrainConfig
from ..run.lifecycle import RunLifecycle
from ..run.metrics import figure_text, rate_text, validation_figure, validation_metrics, validation_summary
from ..sampling.protocol import derive_seed
from ..tasks import load_tasks
from . import batch as batching
from . import loss as losses
from .async_rollouts import AsyncRollouts, staleness_metrics
from .verify import StepVerifier


def policy_update(model, optimizer, scheduler, rows: list[batching.TrainRow], cfg: TrainConfig, pad_id: int,
                  temperature: float, step: int, ref_model=None, weights_lock=None, parity=None,
                  correction=None) -> dict[str, Any]:
    """One update of ``model`` on ``rows`` (each with its advantage and the log-probs it was sampled
    with, at ``temperature``): ``optim.updates_per_step`` passes of the clipped policy loss (and the
    KL term) in token-budget micro-batches, the health checks before and after the weights change.
    The trainer's step, and the continual loop's candidate trained from served sessions
    (``continual/candidates.py``), are this function. ``weights_lock``: held while the weights
    change, so that an engine sampling this very model waits. ``parity`` (the verifier's
    ``ParityProbe``) reads the first pass's log-probs and is checked before the optimizer's first
    step. ``correction(batches, padded)``: the off-policy correction of asynchronous training,
    which rewrites the padded batches before the update and returns its figures."""
    a = cfg.algorithm
    actor = losses.actor_config(a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c, a.loss_agg_mode, a.policy_loss)
    device = next(model.parameters()).device
    batches = batching.micro_batches(rows, cfg.optim.micro_batch_tokens)
    padded = [batching.pad_batch(mb, pad_id, device=device) for mb in batches]
    total_rows = len(rows)
    stats = Counter()
    corrected = correction(batches, padded) if correction is not None else {}
    with weights_lock if weights_lock is not None else contextlib.nullcontext():  # no sampling while the weights change
        model.train()
        for n_pass in range(cfg.optim.updates_per_step):
            optimizer.zero_grad(set_to_none=True)
            pass_loss = 0.0
            for mb, batch in zip(batches, padded):
                logp = losses.token_logprobs(model, batch, temperature,
                                             checkpoint_layers=cfg.optim.gradient_checkpointing)
                if parity is not None and n_pass == 0:
                    parity.observe(mb, batch, logp)  # the weights that sampled them: nothing stepped yet
                loss, pg = losses.policy_loss(logp, batch, actor)
                kl_value = 0.0
                if cfg.algorithm.kl_coef > 0:
                    with torch.no_grad():
                        if cfg.model.lora:
                            with model.disable_adapter():
                                ref = losses.token_logprobs(model, batch, temperature)
                        else:
                            ref = losses.token_logprobs(ref_model, batch, temperature)
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
            if parity is not None:
                parity.check()  # the sampler's log-probs against these: the run stops before training on a mismatch
            params = [p for p in model.parameters() if p.requires_grad]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.optim.grad_clip)
            stats["grad_norm"] = float(grad_norm)
            health.check_loss_and_grad(pass_loss, stats["grad_norm"], step)  # before the weights change
            optimizer.step()
            health.check_weights(params, step)  # never checkpoint (or serve) broken weights
        if scheduler is not None:
            scheduler.step()
        model.eval()
    n = cfg.optim.updates_per_step
    return {"loss": stats["loss"] / n, "pg_clipfrac": stats["pg_clipfrac"] / n, "ppo_kl": stats["ppo_kl"] / n,
            "kl": stats["kl"] / n, "grad_norm": stats["grad_norm"], "trained_tokens": stats["trained_tokens"] // n,
            "micro_batches": len(batches), **corrected}


class Trainer(RunLifecycle):
    """The weights trainer: its step (rollouts, advantages, the update, the weight sync), its
    checkpoint (the adapter or the weights, the optimizer), its validation (and the best
    checkpoint). Start, budget, SIGTERM, failure and summary are the run's (``run/lifecycle.py``)."""

    # the asynchronous machinery even at max_staleness 0, where it must equal the synchronous
    # trainer exactly (what tests/trainer/test_async.py proves); runs use it only for K > 0
    pipeline_at_zero = False

    def __init__(self, cfg: TrainConfig | None, run_dir: str | Path, resume: bool = False, log=print):
        self.warm_started = False
        self.rollouts: AsyncRollouts | None = None  # rollout.max_staleness > 0: steps admitted ahead
        self.served_version = -1  # the newest weight version published to the engine (asynchronous)
        self.best: dict[str, Any] | None = None  # the checkpoint validation picked so far (checkpoints/best.json)
        self.policy_server = self.pool = self.val_pool = None
        super().__init__(cfg, run_dir, resume, log)
        try:
            # the served policy is the trained one: checked after every publish and every step's rollouts
            self.verifier = StepVerifier(self.cfg, self.run_dir, self.policy_server, self.engine_name, self.model,
                                         self.tokenizer, self.log, self.metrics,
                                         resume_step=self.step if self.resumed else None)
            self.verifier.after_publish(self.step, self.step)
        except BaseException:
            self.close()  # the policy server and the worker pools are already running
            raise

    def prepare(self) -> tuple[list[dict], list[dict]]:
        cfg = self.cfg
        train = load_tasks(cfg.data.train_file, question_field=cfg.data.question_field)
        val = (load_tasks(cfg.data.val_file, question_field=cfg.data.question_field)[: cfg.validation.max_tasks]
               if cfg.data.val_file else [])
        return train, val

    def seed(self) -> None:
        torch.manual_seed(self.cfg.run.seed)

    def restore(self) -> tuple[str, list[str]]:
        cfg = self.cfg
        self.best = best_checkpoint(self.run_dir)  # a resume goes on from the best picked so far
        ckpt, state, skipped = load_latest_intact(self.run_dir, self.model, self.optimizer, self.scheduler,
                                                  cfg.model.lora)
        for problem in skipped:
            self.log(f"warning: {problem}")
        self.step = state["step"]
        self.stream.load(state["data"])
        self.elapsed_before = state.get("elapsed_s", 0.0)
        self.warm_started = bool(state.get("warm_started", False))
        self.log(f"resumed {self.run_dir} at step {self.step} from {ckpt.name}")
        if self.engine_name == "hf" or self.step > 0 or self.warm_started:  # vLLM started with the base weights
            self.policy_server.publish(self.model, self.step)
        return ckpt.name, skipped

    # -- setup ------------------------------------------------------------------------------
    def build(self) -> None:
        from ..models.loading import load_policy, resolve_model_path

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
        # vllm: a server subprocess samples, the weights reach it after every update
        self.engine_name, self.policy_server = assembly.start_policy(
            cfg, self.model_path, model=model, tokenizer=self.tokenizer,
            lora_rank=cfg.model.lora_r if cfg.model.lora else 0, full_weight_sync=not cfg.model.lora,
            workdir=self.run_dir / "vllm")
        if self.engine_name == "vllm":
            self.log(f"vLLM server up in {self.policy_server.server.startup_s:.0f} s at {self.policy_server.url}, "
                     f"{self.policy_server.sync} weight sync "
                     f"(log {self.policy_server.server.log_path})")
        # the in-process hf engine, whose batching figures the step's metrics report; None on vLLM
        self.hf_engine = self.policy_server.engine if self.engine_name == "hf" else None
        spec, env = assembly.agent_spec(cfg), assembly.environment(cfg)

        def sampler(kind: str):
            return assembly.sampler_spec(self.policy_server, self.engine_name, self.model_path,
                                         assembly.sampling(cfg, kind))

        self.pool = assembly.policy_pool(cfg, spec, sampler("train"), env)
        # The HF engine samples from this process's RNG, whose state every checkpoint holds, so a resume
        # samples as the run would have. vLLM's RNG lives in its server, which a resume starts afresh (the
        # samples after a resume differed from the untouched run's: benchmarks/chaos.py --jobs train-vllm):
        # there each step's requests carry seeds, derived from (run seed, step, task, sample, call).
        self.step_seed = ((lambda step: derive_seed(cfg.run.seed, "train", step)) if self.engine_name == "vllm"
                          else (lambda step: None))
        self.val_pool = (assembly.policy_pool(cfg, spec, sampler("validation"), env, workers=1)
                         if self.val_tasks else None)
        if cfg.rollout.max_staleness > 0 or self.pipeline_at_zero:
            self.rollouts = AsyncRollouts(self.pool, self.stream, cfg.data.group_size, cfg.rollout.max_staleness,
                                          cfg.run.steps, seed_of=self.step_seed)
            # read by the pool's thread as each episode starts: the version it samples to its end
            self.pool.pin_version = lambda: self.served_version

    def release(self) -> None:
        for p in (self.pool, self.val_pool):
            if p is not None:
                p.close()
        if self.policy_server is not None:
            self.policy_server.close()

    def before_steps(self) -> None:
        if not self.warm_started:
            super().before_steps()  # the baseline: the model as given, before any warm start
        if self.cfg.warm_start.demonstrations and not self.warm_started and self.step == 0:
            self.warm_start()
        if self.rollouts is not None:
            self.publish(self.step)  # the weights the first steps sample (after any warm start)

    def publish(self, version: int) -> None:
        """Serve the weights as they are now as ``version`` (asynchronous training), keeping the
        K + 1 newest versions: the oldest an admitted step may still be running on."""
        self.hf_engine.publish_version(version, self.model, keep=self.cfg.rollout.max_staleness + 1)
        self.policy_server.publish(self.model, version)  # the version unpinned answers (validation) report
        self.served_version = version

    def after_steps(self) -> None:
        super().after_steps()
        if self.val_tasks and self.cfg.validation.compare_to_base and not self.stop_requested:
            self.compare_to_base(self._last_validation)

    def summary(self) -> dict[str, Any]:
        return {"best_checkpoint": self.best} if self.best is not None else {}

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
            res = run_warm_start(self.cfg, self.model, self.tokenizer, assembly.agent_spec(self.cfg),
                                 assembly.environment(self.cfg), self.model_path, self.run_dir, log=self.log)
        self.warm_started = True
        self.metrics.log_event({"event": "warm_start", "step": 0, **res})
        self.policy_server.publish(self.model, 0)  # vLLM samples the warm-started weights from the first step
        self.verifier.after_publish(0, 0)
        self.checkpoint()
        return res

    def checkpoint(self) -> None:
        # with steps in flight, the stream is ahead of the training: a resume draws their tasks again
        data = self.rollouts.resume_state() if self.rollouts is not None else self.stream.state()
        state = {"data": data, "elapsed_s": self.elapsed(), "warm_started": self.warm_started}
        path = save_checkpoint(self.run_dir, self.step, self.model, self.optimizer, self.scheduler, state,
                               self.cfg.model.lora, protect=(self.best["checkpoint"],) if self.best else ())
        self._saved_step = self.step
        self.log(f"checkpoint {path.name}")
        self.metrics.log_event({"event": "checkpoint", "step": self.step, "checkpoint": path.name})

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t_step = time.perf_counter()
        engine_before = dataclasses.replace(self.hf_engine.stats) if self.hf_engine is not None else None
        label = f"step {self.step + 1} rollouts"
        if self.rollouts is not None:
            self.rollouts.admit(self.served_version)
            tasks, futures = self.rollouts.take(self.step + 1)
            episodes = assembly.collect_episodes(self.pool, tasks, futures, label)
            stale = self._record_staleness(episodes)
        else:
            tasks = self.stream.next_batch()
            episodes = assembly.run_episodes(self.pool, tasks, cfg.data.group_size, label,
                                             seed=self.step_seed(self.step + 1))
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
        self.check_health(episodes, self.step + 1)  # written first: nothing lost
        for warning in health.step_warnings(episodes, adv.all_equal_groups, adv.groups):
            self.log(f"warning: step {self.step + 1}: {warning}")
            self.metrics.log_event({"event": "warning", "step": self.step + 1, "warning": warning})
        verified = self.verifier.after_rollouts(episodes, self.step + 1, rows)  # before anything trains on them
        t_up = time.perf_counter()
        update = self.update(rows, self.verifier.probe) if rows else {
            "loss": 0.0, "grad_norm": 0.0, "pg_clipfrac": 0.0, "ppo_kl": 0.0, "kl": 0.0, "trained_tokens": 0}
        verified.update(self.verifier.parity_figures())
        self.step += 1
        sync_s = 0.0
        if self.rollouts is not None:
            t_pub = time.perf_counter()
            self.publish(self.step)
            sync_s = time.perf_counter() - t_pub
            verified.update(self.verifier.after_publish(self.step, self.step))
            self.rollouts.admit(self.step)  # the steps these weights allow start now, before the logging
        elif rows:
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
            **(staleness_metrics(stale) if self.rollouts is not None else {}),
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
        self.log(f"step {self.step}/{cfg.run.steps}  reward {m['reward_mean']:.3f}  success {m['success_rate']:.2f}  "
                 f"loss {m['loss']:+.4f}  kl {m['ppo_kl']:+.4f}  clip {m['pg_clipfrac']:.3f}  grad {m['grad_norm']:.3f}  "
                 f"all-equal {m['all_equal_group_rate']:.2f}  tools {m['tool_call_rate']:.2f}  merge {m['merge_rate']:.2f}  "
                 f"tokens {m['sampled_tokens']}  {m['time_step_s']:.1f}s (rollout {t_roll:.1f}, update {t_update:.1f})"
                 + (f"  stale {m['staleness_mean']:.2f}/{m['staleness_max']}" if self.rollouts is not None else "")
                 + (f"  is {m['importance_ratio_mean']:.3f} (max {m['importance_ratio_max']:.2f}, truncated "
                    f"{m['importance_truncated_frac']:.3f})" if "importance_ratio_mean" in m else ""))
        return m

    def _record_staleness(self, episodes: list[Episode]) -> list[int]:
        """Each episode's staleness (versions between the weights that sampled it and the weights
        this update starts from), recorded on the episode; beyond ``max_staleness`` is a bug of the
        pacing and stops the run, never trained on."""
        stale = []
        for ep in episodes:
            if "weight_version" not in ep.metadata:  # never started (a broken pool): failed, unversioned
                continue
            ep.metadata["staleness"] = self.step - ep.metadata["weight_version"]
            stale.append(ep.metadata["staleness"])
        bad = [s for s in stale if not 0 <= s <= self.cfg.rollout.max_staleness]
        if bad:
            raise RuntimeError(f"step {self.step + 1}: episodes sampled {max(bad)} versions behind, beyond "
                               f"rollout.max_staleness={self.cfg.rollout.max_staleness}: the admission control failed")
        return stale

    def update(self, rows: list[batching.TrainRow], parity=None) -> dict[str, Any]:
        """One step's PPO update of ``rows`` (``policy_update``). ``parity`` (the verifier's
        ``ParityProbe``) reads the first pass's log-probs, or the correction's, and is checked
        before the optimizer's first step."""
        asynchronous = self.cfg.rollout.max_staleness > 0
        correction = (lambda batches, padded: self._off_policy_correction(batches, padded, parity)) if asynchronous else None
        # no sampling from the live model while the weights change; asynchronous training samples
        # only published snapshots, so its episodes go on during the update
        lock = self.policy_server.weights_lock if self.rollouts is None else None
        return policy_update(self.model, self.optimizer, self.scheduler, rows, self.cfg, self.tokenizer.pad_token_id,
                             temperature=self.cfg.sampling.temperature, step=self.step + 1, ref_model=self.ref_model,
                             weights_lock=lock, parity=parity, correction=correction)

    @torch.no_grad()
    def _off_policy_correction(self, batches: list[list[batching.TrainRow]], padded: list[dict[str, Any]],
                               parity=None) -> dict[str, float]:
        """Decoupled PPO with a token-level truncated importance weight, veRL's ``rollout_is_weights``
        on its registered loss: the episodes were sampled by older weights (the behaviour policy,
        whose log-probs the sampler recorded), so the clip is taken around the weights this update
        starts from (the proximal policy, recomputed here: its log-probs become ``old_log_prob``)
        and each token's loss is weighted by min(proximal / behaviour, ``algorithm.importance_cap``).
        Clipping around the stale sampler's log-probs instead would start each update with ratios
        already far from 1 and clip most of its tokens' gradient away. Changes each batch in place;
        returns the importance ratios' figures. ``parity`` reads the proximal log-probs of the rows
        sampled from these very weights (the only ones a parity bound applies to) and is checked here."""
        cap = self.cfg.algorithm.importance_cap
        ratios, truncated, tokens, top = 0.0, 0.0, 0.0, 0.0
        for mb, batch in zip(batches, padded):
            mask = batch["response_mask"]
            proximal = losses.token_logprobs(self.model, batch, self.cfg.sampling.temperature, checkpoint_layers=False)
            if parity is not None:
                parity.observe(mb, batch, proximal)
            ratio = torch.exp((proximal - batch["old_log_prob"]) * mask)  # 1 off the mask
            batch["rollout_is_weights"] = ratio.clamp(max=cap) * mask
            batch["old_log_prob"] = proximal * mask
            ratios += float((ratio * mask).sum())
            truncated += float(((ratio > cap).float() * mask).sum())
            tokens += float(mask.sum())
            top = max(top, float((ratio * mask).max()))
        if parity is not None:
            parity.check()
        return {"importance_ratio_mean": ratios / max(tokens, 1.0), "importance_ratio_max": top,
                "importance_truncated_frac": truncated / max(tokens, 1.0)}

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
        episodes = assembly.run_episodes(self.val_pool, self.val_tasks, k, "validation")
        apply_group_policy(episodes, "keep", failed_reward=self.cfg.reward.failed_reward)
        self.verifier.check_calls(episodes, self.step)
        self._last_validation = episodes  # the final one is compare_to_base's trained side
        with EpisodeWriter(self.run_dir / "episodes" / f"val_step_{self.step:06d}.jsonl") as w:
            for ep in episodes:
                w.write(ep)
        m = validation_metrics(self.cfg, self.step, episodes)
        self.metrics.log_validation(m)
        self._pick_best(m)
        self.validations.append(validation_summary(m))
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


