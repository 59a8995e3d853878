"""The local trainer's checks that the policy served is the policy trained (``run/verify.py``), at the
two points of a step where they apply: after every weight publish (the engine's fingerprint against
the trainer's), and after every step's rollouts, before the update (each call's weight version, and
the log-prob parity of a sample of the sampled tokens, recomputed with the trainer's own
``token_logprobs``). On by default; ``verify.weights`` / ``verify.logprob_parity`` turn them off,
which the run says at its start.

The parity sample is whole rows drawn at random (seeded by the run's seed and the step) up to
``verify.parity_tokens`` tokens of forward pass, recomputed without gradients: a fraction of one
update's forward pass (benchmarks/verify_overhead.py measures what it adds to a step)."""

from __future__ import annotations

import random
import time
from typing import Any

import torch

from ..run import verify
from . import batch as batching
from .loss import token_logprobs


class StepVerifier:
    def __init__(self, cfg, run_dir, policy_server, engine_name: str, model, tokenizer, log=print,
                 metrics=None, resume_step: int | None = None):
        self.cfg, self.server, self.engine_name, self.model = cfg, policy_server, engine_name, model
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.log, self.metrics = log, metrics
        v = cfg.verify
        self.weights, self.parity = v.weights, v.logprob_parity
        self.dtype = policy_server.served_dtype()
        self.bounds = verify.parity_bounds(engine_name, self.dtype, v.parity_mean_bound, v.parity_p99_bound)
        self.ledger = (verify.WeightLedger(run_dir, -1 if resume_step is None else resume_step)
                       if self.weights else None)
        self.version: int | None = None  # the version the next rollouts sample (the last one verified)
        # the versions a step's calls may come from: the newest verified one, and with asynchronous
        # training (rollout.max_staleness K) the K before it, which episodes admitted earlier still sample
        self.window = cfg.rollout.max_staleness + 1
        self.versions: list[int] = []
        step = resume_step or 0
        for key, on, what in (("verify.weights", self.weights, "weight syncs are not fingerprinted: nothing checks "
                                                                 "that the engine serves the weights just trained"),
                              ("verify.logprob_parity", self.parity, "the sampler's log-probs are not compared "
                                                                     "with the trainer's")):
            if not on:
                warning = f"{key} is off: {what}"
                log(f"warning: {warning}")
                if metrics is not None:
                    metrics.log_event({"event": "warning", "step": step, "warning": warning})
        if self.weights or self.parity:
            parts = (["every weight sync fingerprinted"] if self.weights else []) + (
                [f"log-prob parity each step (bounds for {engine_name} {self.dtype}: mean |Δ| {self.bounds[0]:g}, "
                 f"p99 |Δ| {self.bounds[1]:g})"] if self.parity else [])
            log("verifying: " + "; ".join(parts))

    # -- after every weight publish --------------------------------------------------------------
    def after_publish(self, version: int, step: int) -> dict[str, Any]:
        """Check that the engine holds version ``version`` (raises ``WeightsMismatch``)."""
        self.version = version
        self.versions = ([v for v in self.versions if v != version] + [version])[-self.window:]
        if not self.weights:
            return {}
        record = verify.verify_sync(self.server, self.model, version, self.server.weight_sync(), self.dtype, step,
                                    self.ledger, seed=self.cfg.run.seed)
        return {"weights_version": version, "weights_fingerprint": record["engine_digest"],
                "time_verify_weights_s": record["time_s"]}

    # -- after every step's rollouts, before the update ------------------------------------------
    def check_calls(self, episodes, step: int) -> None:
        if self.weights:
            verify.check_calls(episodes, set(self.versions), self.ledger, step)

    def after_rollouts(self, episodes, step: int) -> dict[str, Any]:
        """Each call's version, then the log-prob parity gate (raises ``UnsyncedVersion`` or
        ``LogprobParityFailed``); the step's figures for its metrics."""
        self.check_calls(episodes, step)
        if not self.parity:
            return {}
        t0 = time.perf_counter()
        # only episodes sampled from the weights the trainer holds now: with asynchronous training an
        # older version's log-probs differ from these by the updates between (the correction's business)
        current = [ep for ep in episodes if ep.calls and not ep.text_level
                   and all(c.weight_version in (None, self.version) for c in ep.calls)]
        if not current:
            return {"parity_episodes": 0}
        rows = parity_sample(batching.rows_from_episodes(current), self.cfg.verify.parity_tokens,
                             self.cfg.run.seed * 1_000_003 + step)
        with self.server.weights_lock:
            trainer, sampler = recompute(self.model, rows, self.pad_id, self.cfg.sampling.temperature)
        stats = verify.parity_stats(trainer, sampler)
        stats.update({"parity_episodes": len(current), "parity_mean_bound": self.bounds[0], "parity_p99_bound": self.bounds[1],
                      "time_verify_parity_s": time.perf_counter() - t0})
        problem = verify.parity_problem(stats, self.bounds)
        if problem:
            if self.metrics is not None:
                self.metrics.log_event({"event": "parity", "step": step, **stats})
            raise verify.LogprobParityFailed(
                f"step {step}: the sampler's log-probs differ from the trainer's ({self.engine_name} engine, "
                f"{self.dtype}, version {self.version}): {problem}")
        return stats



def parity_sample(rows: list[batching.TrainRow], budget: int, seed: int) -> list[batching.TrainRow]:
    """Whole rows with sampled tokens, drawn at random, while their tokens fit ``budget`` (at least one row)."""
    rows = [r for r in rows if any(r.loss_mask)]
    random.Random(seed).shuffle(rows)
    out, tokens = [], 0
    for r in rows:
        if out and tokens + len(r.input_ids) > budget:
            continue
        out.append(r)
        tokens += len(r.input_ids)
    return out


def recompute(model, rows: list[batching.TrainRow], pad_id: int, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(the trainer's log-probs, the sampler's) of the rows' sampled tokens: ``token_logprobs`` as the
    update calls it, without gradients, in eval mode, one padded batch (a shared head runs once)."""
    if not rows:
        return torch.zeros(0), torch.zeros(0)
    batch = batching.pad_batch(rows, pad_id, device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logp = token_logprobs(model, batch, temperature, checkpoint_layers=False)
    finally:
        model.train(was_training)
    m = batch["response_mask"].bool()
    return logp[m].cpu(), batch["old_log_prob"][m].cpu()
