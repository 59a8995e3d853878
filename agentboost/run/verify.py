"""The policy served is the policy trained: every weight sync attested, every step's log-probs checked.

- **Identity at every sync.** After the trainer publishes weight version v, it computes the fingerprint
  of what it means to serve (``models/fingerprint.py``: the adapter's factors, or every weight, as the
  engine's dtype holds them) and asks the engine for the fingerprint of what it actually holds under
  the name samplers will request; they must be equal, and the engine must say it serves version v.
  Each sync is a line of ``weights.jsonl`` in the run directory. Every sampled call records the
  version that sampled it; a call from a version that was never synced and verified, or from one the
  step may not use, stops the run.
- **Behaviour at every step.** A sample of the step's sampled tokens is recomputed with the trainer's
  own log-prob function, before the update; the mean, 99th percentile and largest |Δ| between the
  trainer's and the sampler's log-probs are logged, and a mean or 99th percentile above its bound
  (a default per engine and dtype, measured, ``DEFAULT_PARITY_BOUNDS``) stops the run with the figures.
  The bound is on the mean and a high quantile, not the maximum: in bfloat16 the largest |Δ| of a
  step is one rare token's rounding and grows with the number of tokens looked at (a bound on it
  would trip at random or be too loose to mean anything); the mean catches a systematic shift (a
  wrong temperature, raw instead of processed log-probs, stale weights), the 99th percentile a
  minority of tokens far off (one request in fifty served by other weights).
- ``check_run``: ``agentboost check RUN_DIR`` verifies a whole run from its files.

The engines are reached through the policy server's ``served_fingerprint(kind, seed)``; which
fingerprint the trainer expects depends on how the weights reach the engine (``expected``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Iterable

from ..errors import RunFailed
from ..files import atomic_write_text, iter_jsonl, open_append
from ..models import fingerprint as fp

LEDGER = "weights.jsonl"

# (engine, dtype) -> (bound on the mean |Δ|, bound on the 99th percentile |Δ|), nats, between the
# sampler's log-probs and the trainer's recomputation at the sampling temperature. Measured
# (docs/verification.md, benchmarks/logprob_parity.py), then given a margin; float16 takes
# bfloat16's (more mantissa bits, never worse).
DEFAULT_PARITY_BOUNDS: dict[tuple[str, str], tuple[float, float]] = {
    ("hf", "float32"): (1e-3, 1e-2),
    ("vllm", "float32"): (1e-3, 1e-2),
    ("hf", "bfloat16"): (0.1, 0.6),
    ("vllm", "bfloat16"): (0.1, 0.6),
}


class WeightsMismatch(RunFailed):
    """The engine does not hold the weights the trainer published (a fingerprint differs, the
    adapter is not loaded, the engine reports another version)."""


class UnsyncedVersion(RunFailed):
    """A sampled call reports a weight version that was never synced and verified, or one the step
    may not sample from."""


class LogprobParityFailed(RunFailed):
    """The sampler's log-probs and the trainer's differ by more than the bound."""


# -- identity ----------------------------------------------------------------------------------------
# how the weights reach the engine: "hf-lora" / "hf-full" (the trainer's own tensors, in process),
# "adapter" (a runtime LoRA adapter), "merged" (an adapter merged into full weights), "full" (full
# weights), "base" (nothing published yet: the weights the engine started from)
SYNCS = ("hf-lora", "hf-full", "adapter", "merged", "full", "base")


def base_tensors(model) -> Iterable[tuple[str, Any]]:
    """The base weights of a model (a peft model's without its adapter), by their Hugging Face names."""
    if hasattr(model, "peft_config"):
        state = model.get_base_model().state_dict()
        return [(k.replace(".base_layer", ""), v) for k, v in state.items() if "lora_" not in k]
    return list(model.state_dict().items())


def expected(model, sync: str, dtype: str, seeds: Iterable[int]) -> list[dict]:
    """Fingerprints (one per seed) of what the trainer means the engine to hold after a sync of kind
    ``sync``; the weights are read (or merged) once for all of them."""
    if sync in ("adapter", "hf-lora"):
        return [fp.of_lora(model, dtype, s) for s in seeds]
    if sync == "merged":
        from ..models.lora_merge import merged_state_dict

        tensors = list(merged_state_dict(model).items())
    elif sync in ("full", "hf-full"):
        tensors = list(model.state_dict().items())
    elif sync == "base":
        tensors = list(base_tensors(model))
    else:
        raise ValueError(f"unknown weight sync {sync!r}")
    return [fp.of_tensors(tensors, dtype, s) for s in seeds]


def fingerprint_seed(version: int, run_seed: int = 0) -> int:
    """The draw of a version's fingerprint: each version looks at other columns."""
    return run_seed * 1_000_003 + int(version)


class WeightLedger:
    """The run's weight versions: ``version -> record`` of each sync (several may be live at once),
    appended to ``weights.jsonl`` as they are verified."""

    def __init__(self, run_dir: str | Path, truncate_after_version: int | None = None):
        """``truncate_after_version``: the versions kept from an earlier attempt (a resume at step N
        keeps those before N: it verifies N's sync again, on its own engine)."""
        self.path = Path(run_dir) / LEDGER
        self.records: dict[int, dict[str, Any]] = {}
        kept = []
        if self.path.is_file():
            for _, row in iter_jsonl(self.path):
                if truncate_after_version is None or row["version"] <= truncate_after_version:
                    kept.append(row)
                    self.records[int(row["version"])] = row
        # a resumed run repeats the versions from its checkpoint on: their old lines go
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))  # a kill here keeps the old file
        # the last verified version's weights drawn as the next version will be: a sync that
        # never happened shows as the engine still holding them
        self._previous: tuple[int, dict] | None = None

    def add(self, record: dict[str, Any]) -> None:
        self.records[int(record["version"])] = record
        with open_append(self.path) as f:
            f.write(json.dumps(record) + "\n")

    def verified(self, version: int | None) -> bool:
        r = self.records.get(version) if version is not None else None
        return bool(r and r["match"])


def _compared_digest(mine: dict, engine: dict) -> str | None:
    """The engine's digest of the tensors the trainer's fingerprint names: equal to the trainer's
    exactly when they match. (An engine may hold more: vLLM keeps a LoRA slot, zeros, for every
    module it can adapt, which its own digest covers.)"""
    if not engine.get("tensors"):
        return engine.get("digest")
    return fp.combined({n: engine["tensors"][n] for n in mine["tensors"] if n in engine["tensors"]})


def verify_sync(server, model, version: int, sync: str, dtype: str, step: int, ledger: WeightLedger | None,
                seed: int = 0) -> dict[str, Any]:
    """Compare the trainer's fingerprint of weight version ``version`` with the engine's; record it in
    the ledger; raise ``WeightsMismatch`` naming what differs. ``server``: the policy server, whose
    ``served_fingerprint(kind, seed)`` gives what samplers will be served (``version``, ``name``,
    ``fingerprint``, or ``missing`` and ``loaded`` for an adapter the engine does not hold)."""
    t0 = time.perf_counter()
    draw, next_draw = fingerprint_seed(version, seed), fingerprint_seed(version + 1, seed)
    kind = fp.LORA if sync in ("adapter", "hf-lora") else fp.FULL
    mine, mine_next = expected(model, sync, dtype, (draw, next_draw))
    served = server.served_fingerprint(kind, draw)
    problems: list[str] = []
    if served.get("version") != version:
        problems.append(f"samplers are told version {served.get('version')}, not {version}")
    engine = served.get("fingerprint") or {}
    if served.get("problem"):
        problems.append(served["problem"])
    elif served.get("missing"):
        problems.append(f"adapter {served['missing']!r} is not loaded on the engine "
                        f"(loaded: {', '.join(served.get('loaded') or []) or 'none'})")
    elif not engine:
        problems.append("the engine reported no fingerprint")
    else:
        diff = fp.differences(mine, engine)
        if diff:
            previous = ledger._previous if ledger is not None else None
            if previous and previous[0] != version and not fp.differences(previous[1], engine):
                diff.insert(0, f"the engine still holds version {previous[0]}'s weights")
            problems += diff
    record = {"version": version, "step": step, "sync": sync, "kind": kind, "dtype": dtype, "seed": draw,
              "name": served.get("name"), "trainer_digest": mine["digest"],
              "engine_digest": _compared_digest(mine, engine), "tensors": len(mine["tensors"]), "match": not problems,
              "problem": "; ".join(problems) or None, "time_s": round(time.perf_counter() - t0, 4)}
    if ledger is not None:
        ledger.add(record)
    if problems:
        raise WeightsMismatch(f"weight version {version} ({sync} sync, served as {served.get('name')!r}): "
                              + "; ".join(problems))
    if ledger is not None:
        ledger._previous = (version, mine_next)
    return record


def ledger_record(run_dir: str | Path, version: int) -> dict[str, Any] | None:
    """The last record of ``version`` in a run's ``weights.jsonl`` (None without one)."""
    path = Path(run_dir) / LEDGER
    found = None
    if path.is_file():
        for _, row in iter_jsonl(path):
            if int(row["version"]) == version:
                found = row
    return found


def verify_served(server, model, version: int, run_dir: str | Path | None = None,
                  checkpoint_step: int | None = None) -> dict[str, Any]:
    """The identity of a policy served from a checkpoint (``eval``, ``serve``): the engine holds the
    weights loaded here (``verify_sync``), and, for a run's checkpoint the run fingerprinted, those
    weights are the ones the run trained and sampled as that version (its ``weights.jsonl`` record,
    recomputed with the record's draw). Raises ``WeightsMismatch``; returns ``{"version", "digest",
    "sync", "checkpoint_step", "run_verified"}``."""
    record = verify_sync(server, model, version, server.weight_sync(), server.served_dtype(), step=version,
                         ledger=None)
    run_verified = False
    if run_dir is not None and checkpoint_step is not None:
        trained = ledger_record(run_dir, checkpoint_step)
        # a merged sync's record is of W + B @ A as the trainer's process computed it: recomputed
        # elsewhere (another process, another thread count) the product may round differently, so
        # exact digests cannot tell; the engine's side is still verified above
        if trained is not None and trained.get("match") and trained["sync"] != "merged":
            mine = expected(model, trained["sync"], trained["dtype"], [trained["seed"]])[0]
            if mine["digest"] != trained["trainer_digest"]:
                raise WeightsMismatch(f"the checkpoint of step {checkpoint_step} is not the policy {run_dir} trained "
                                      f"as version {checkpoint_step}: fingerprint {mine['digest']}, the run recorded "
                                      f"{trained['trainer_digest']} ({LEDGER})")
            run_verified = True
    return {"version": version, "digest": record["engine_digest"], "sync": record["sync"],
            "checkpoint_step": checkpoint_step, "run_verified": run_verified}


def check_calls(episodes, allowed: Iterable[int], ledger: WeightLedger, step: int) -> None:
    """Every model call of the step's episodes must report a version that was synced and verified
    and that the step may sample from (``allowed``)."""
    allowed = set(allowed)
    bad: dict[Any, int] = {}
    for ep in episodes:
        for c in ep.calls:
            if c.weight_version not in allowed or not ledger.verified(c.weight_version):
                bad[c.weight_version] = bad.get(c.weight_version, 0) + 1
    if bad:
        parts = []
        for v, n in sorted(bad.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            why = ("no version reported" if v is None else "never synced" if v not in ledger.records
                   else "its fingerprint did not match" if not ledger.verified(v) else "not a version this step samples")
            parts.append(f"{n} call{'s' * (n != 1)} from version {v} ({why})")
        raise UnsyncedVersion(f"step {step}: " + "; ".join(parts) +
                              f"; expected version {' or '.join(map(str, sorted(allowed)))}")


# -- behaviour ---------------------------------------------------------------------------------------
def parity_bounds(engine: str, dtype: str, mean: float = 0.0, p99: float = 0.0) -> tuple[float, float]:
    """The bounds for ``engine`` serving ``dtype``: the configured ones (> 0), else the measured defaults."""
    key = (engine, "bfloat16" if dtype == "float16" else dtype)
    default = DEFAULT_PARITY_BOUNDS.get(key, DEFAULT_PARITY_BOUNDS[("vllm", "bfloat16")])
    return (mean if mean > 0 else default[0], p99 if p99 > 0 else default[1])


def parity_stats(trainer, sampler) -> dict[str, float]:
    """|Δ| statistics of two 1-D tensors of log-probs of the same tokens."""
    import torch

    d = (trainer.double() - sampler.double()).abs()
    if not d.numel():
        return {"parity_tokens": 0}
    return {"parity_tokens": int(d.numel()), "parity_mean_abs_diff": float(d.mean()),
            "parity_p99_abs_diff": float(torch.quantile(d, 0.99)), "parity_max_abs_diff": float(d.max())}


def parity_problem(stats: dict[str, float], bounds: tuple[float, float]) -> str | None:
    if not stats.get("parity_tokens"):
        return None
    mean, p99 = stats["parity_mean_abs_diff"], stats["parity_p99_abs_diff"]
    over = []
    if not math.isfinite(mean) or mean > bounds[0]:
        over.append(f"mean |Δ| {mean:.3g} > {bounds[0]:.3g}")
    if not math.isfinite(p99) or p99 > bounds[1]:
        over.append(f"p99 |Δ| {p99:.3g} > {bounds[1]:.3g}")
    if not over:
        return None
    return (", ".join(over) + f" (max |Δ| {stats['parity_max_abs_diff']:.3g} over {stats['parity_tokens']} tokens)")


# -- a whole run -------------------------------------------------------------------------------------
def _run_max_staleness(run_dir: Path) -> int:
    """The run's ``rollout.max_staleness`` from its ``config.yaml`` (0 where it has none: a synchronous run)."""
    import yaml

    path = run_dir / "config.yaml"
    config = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    rollout = config.get("rollout") if isinstance(config, dict) else None
    value = rollout.get("max_staleness", 0) if isinstance(rollout, dict) else 0
    return int(value or 0)


def check_run(run_dir: str | Path, max_staleness: int | None = None) -> tuple[list[str], dict[str, int]]:
    """(problems, counts) of a run directory: weight versions non-decreasing, each version's
    fingerprints equal, every call from a verified version no more than ``max_staleness`` (None: the
    run's own ``rollout.max_staleness``) behind its step, every episode on one version from start to
    end, every step's log-prob parity within its bound, every episode's token invariant."""
    from ..episodes.record import check_episode, read_episodes

    run_dir = Path(run_dir)
    if max_staleness is None:
        max_staleness = _run_max_staleness(run_dir)
    problems: list[str] = []
    counts = {"versions": 0, "steps": 0, "calls": 0, "episodes": 0}
    ledger_path = run_dir / LEDGER
    records: dict[int, dict[str, Any]] = {}
    if not ledger_path.is_file():
        problems.append(f"{LEDGER}: missing (verify.weights was off, or the run predates weight verification)")
    else:
        last = None
        for line, row in iter_jsonl(ledger_path):
            v = int(row["version"])
            if last is not None and v < last:
                problems.append(f"{LEDGER}:{line}: version {v} after version {last} (versions must not go back)")
            last = v
            records[v] = row
            if not row.get("match"):
                problems.append(f"{LEDGER}:{line}: version {v} did not match: {row.get('problem')}")
        counts["versions"] = len(records)
    metrics = {int(r["step"]): r for _, r in iter_jsonl(run_dir / "metrics.jsonl")} \
        if (run_dir / "metrics.jsonl").is_file() else {}
    for step, m in sorted(metrics.items()):
        counts["steps"] += 1
        if "parity_tokens" not in m:
            # parity_episodes 0: no episode of the step was sampled from the weights the update started
            # from (asynchronous training), so there was nothing a parity bound applies to
            if m.get("parity_episodes") != 0:
                problems.append(f"step {step}: no log-prob parity figures (verify.logprob_parity was off)")
            continue
        if m["parity_tokens"]:
            problem = parity_problem(m, (m["parity_mean_bound"], m["parity_p99_bound"]))
            if problem:
                problems.append(f"step {step}: log-prob parity {problem}")
    synced_at = sorted((int(r.get("step", v)), v) for v, r in records.items() if r.get("match"))
    for path in sorted((run_dir / "episodes").glob("*.jsonl")):
        name = path.stem  # step_000003 (sampled for step 3, after step 2's update) or val_step_000002
        step = int(name.rsplit("_", 1)[1])
        before = step - 1 if name.startswith("step_") else step
        # the newest version synced by then (a step without an update publishes none)
        newest = max((v for at, v in synced_at if at <= before), default=None)
        for ep in read_episodes(path):
            counts["episodes"] += 1
            for problem in check_episode(ep):
                problems.append(f"{path.name}: {ep.episode_id}: {problem}")
            versions = {c.weight_version for c in ep.calls if c.weight_version is not None}
            pinned = ep.metadata.get("weight_version")
            if len(versions) > 1:
                problems.append(f"{path.name}: {ep.episode_id}: calls from versions {sorted(versions)} "
                                "(an episode runs on one version from start to end)")
            elif pinned is not None and versions and versions != {pinned}:
                problems.append(f"{path.name}: {ep.episode_id}: pinned to version {pinned}, its calls report "
                                f"version {next(iter(versions))}")
            for c in ep.calls:
                counts["calls"] += 1
                v = c.weight_version
                if not records:
                    continue
                if v is None:
                    problems.append(f"{path.name}: {ep.episode_id}: a call reports no weight version")
                elif v not in records:
                    problems.append(f"{path.name}: {ep.episode_id}: version {v} was never synced")
                elif not records[v].get("match"):
                    problems.append(f"{path.name}: {ep.episode_id}: version {v}'s fingerprints differ")
                elif newest is None or not 0 <= newest - v <= max_staleness:
                    problems.append(f"{path.name}: {ep.episode_id}: version {v} sampled for step {step} "
                                    f"(the newest synced by then is {newest})")
    return problems, counts
