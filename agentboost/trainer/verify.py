"""The local trainer's checks that the policy served is the policy trained (``run/verify.py``), at the
two points of a step where they apply: after every weight publish (the engine's fingerprint against
the trainer's), and after every step's rollouts, before any weight changes (each call's weight
version, and the log-prob parity of the sampled tokens against the trainer's own ``token_logprobs``).
On by default; ``verify.weights`` / ``verify.logprob_parity`` turn them off, which the run says at
its start.

The parity gate reads a forward pass the step runs anyway: the update's first pass (every micro-batch
of it is computed before the optimizer's first step, from exactly the weights that sampled the
step's current-version episodes), or with asynchronous training the proximal pass of the off-policy
correction. Every trained token of the current version is compared, and the run stops before the
optimizer steps. Only where the step trains on none of the current version's tokens, or its training
forward pass is not the sampler's (dropout), is a sample of whole rows recomputed without gradients,
up to ``verify.parity_tokens`` tokens (benchmarks/verify_overhead.py measures what each adds)."""

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
        self.ledger = (verify.WeightLedger(run_dir, -1 if resume_step is None else resume_step - 1)
                       if self.weights else None)
        self.version: int | None = None  # the version the next rollouts sample (the last one verified)
        # the versions a step's calls may come from: the newest verified one, and with asynchronous
        # training (rollout.max_staleness K) the K before it, which episodes admitted earlier still sample
        self.window = cfg.rollout.max_staleness + 1
        self.versions: list[int] = []
        self.probe: ParityProbe | None = None
        # the update's forward pass computes what the sampler computed only where training adds no
        # noise of its own (a dropout layer, or attention dropout, active in train mode); with
        # asynchronous training the correction's proximal pass (eval mode) is read instead
        self.update_forward = cfg.rollout.max_staleness > 0 or not _dropout_in_training(model)
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

    def after_rollouts(self, episodes, step: int, rows: list[batching.TrainRow] = ()) -> dict[str, Any]:
        """Each call's version (raises ``UnsyncedVersion``), then the parity gate's plan for the step:
        when ``rows`` (what the update will train on) hold tokens sampled from the trainer's current
        weights, ``self.probe`` reads them from the update's own forward pass (``update_forward``);
        otherwise a sample is recomputed now (raises ``LogprobParityFailed``). The figures known now."""
        self.check_calls(episodes, step)
        self.probe = None
        if not self.parity:
            return {}
        # only episodes sampled from the weights the trainer holds now: with asynchronous training an
        # older version's log-probs differ from these by the updates between (the correction's business)
        current = {ep.episode_id for ep in episodes if ep.calls and not ep.text_level
                   and all(c.weight_version in (None, self.version) for c in ep.calls)}
        if not current:
            return {"parity_episodes": 0}
        if self.update_forward and any(r.episode_id in current for r in rows):
            self.probe = ParityProbe(self, step, current, "correction" if self.cfg.rollout.max_staleness > 0 else "update")
            return {}
        t0 = time.perf_counter()
        sample = parity_sample(batching.rows_from_episodes([ep for ep in episodes if ep.episode_id in current]),
                               self.cfg.verify.parity_tokens, self.cfg.run.seed * 1_000_003 + step)
        with self.server.weights_lock:
            trainer, sampler = recompute(self.model, sample, self.pad_id, self.cfg.sampling.temperature)
        return self.judge(trainer, sampler, len({r.episode_id for r in sample}), step, "sample",
                          time.perf_counter() - t0)

    def parity_figures(self) -> dict[str, Any]:
        """The step's parity figures read from the update (judged, and raised on, before its optimizer step)."""
        return self.probe.check() if self.probe is not None else {}

    def judge(self, trainer: torch.Tensor, sampler: torch.Tensor, episodes: int, step: int, source: str,
              seconds: float) -> dict[str, Any]:
        stats = verify.parity_stats(trainer, sampler)
        stats.update({"parity_episodes": episodes, "parity_source": source, "parity_mean_bound": self.bounds[0],
                      "parity_p99_bound": self.bounds[1], "time_verify_parity_s": seconds})
        problem = verify.parity_problem(stats, self.bounds)
        if problem:
            if self.metrics is not None:
                self.metrics.log_event({"event": "parity", "step": step, **stats})
            raise verify.LogprobParityFailed(
                f"step {step}: the sampler's log-probs differ from the trainer's ({self.engine_name} engine, "
                f"{self.dtype}, version {self.version}): {problem}")
        return stats


class ParityProbe:
    """One step's parity read from a forward pass the step runs anyway (the update's first pass, or the
    off-policy correction's): ``observe`` each micro-batch as it is computed, ``check`` once all are,
    before the optimizer steps. The tokens compared are every trained token of the rows from the
    current version's episodes."""

    def __init__(self, verifier: StepVerifier, step: int, episode_ids: set[str], source: str):
        self.verifier, self.step, self.ids, self.source = verifier, step, episode_ids, source
        self.trainer: list[torch.Tensor] = []
        self.sampler: list[torch.Tensor] = []
        self.episodes: set[str] = set()
        self.seconds = 0.0
        self.figures: dict[str, Any] | None = None

    def observe(self, rows: list[batching.TrainRow], batch: dict[str, Any], logp: torch.Tensor) -> None:
        """``logp``: the trainer's log-probs of ``batch`` (``pad_batch`` of ``rows``, in order), before
        ``batch["old_log_prob"]`` (the sampler's) is replaced by anything."""
        if self.figures is not None:
            return
        t0 = time.perf_counter()
        picked = [i for i, r in enumerate(rows) if r.episode_id in self.ids]
        if picked:
            index = torch.tensor(picked, device=logp.device)
            mask = batch["response_mask"].index_select(0, index).bool()
            self.trainer.append(logp.detach().index_select(0, index)[mask].float().cpu())
            self.sampler.append(batch["old_log_prob"].index_select(0, index)[mask].float().cpu())
            self.episodes.update(rows[i].episode_id for i in picked)
        self.seconds += time.perf_counter() - t0

    def check(self) -> dict[str, Any]:
        """The figures (raises ``LogprobParityFailed`` over the bounds); judged once."""
        if self.figures is None:
            t0 = time.perf_counter()
            cat = (lambda xs: torch.cat(xs) if xs else torch.zeros(0))
            self.figures = {}  # judged: a raise below is not judged again
            self.figures = self.verifier.judge(cat(self.trainer), cat(self.sampler), len(self.episodes), self.step,
                                               self.source, self.seconds + time.perf_counter() - t0)
        return self.figures


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


def _dropout_in_training(model) -> bool:
    # peft's LoRA dropout is an nn.Dropout module like any other (an Identity at 0)
    if float(getattr(getattr(model, "config", None), "attention_dropout", 0.0) or 0.0) > 0:
        return True
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())
