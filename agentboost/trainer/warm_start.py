"""The warm start: supervised steps on demonstrations before the first GRPO step.

GRPO reinforces what the policy already does sometimes; SmolLM2-135M never calls a calculator on
its own, so a run from it has no tool call to reinforce (``examples/tool_use`` measured 0 calls in
every validation). ``warm_start.demonstrations: N`` answers the first N tasks of
``warm_start.tasks_file`` (default ``data.train_file``) from the ``solution`` their rows carry,
through the run's own Strands agent, tools and reward (``agents/demonstrations.py``: the same
scripted policy as ``agentboost rollout --demonstrations``), then trains the policy on the
demonstrations that succeeded with the loop ``agentboost sft`` uses. It trains the run's own
parameters in place (the LoRA adapter GRPO then trains, or the full model), so checkpoints,
resume and weight sync need nothing new; the warm start has its own optimizer and GRPO's starts
fresh. With ``algorithm.kl_coef`` > 0 and LoRA the KL reference stays the base model.

This is the in-run form of ``rollout --demonstrations`` → ``sft`` → ``train model.path=<sft>``
(what ``examples/tool_use/run.sh`` does in three commands).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..agents.demonstrations import demonstration_sampler
from ..episodes.record import Episode, EpisodeWriter
from ..episodes.summary import tool_use_metrics
from ..errors import InputError
from ..files import atomic_write_text
from ..rollout.pool import StrandsProcessPool
from ..run.config import TrainConfig
from ..run.preflight import warm_start_tasks
from ..sampling.protocol import SamplingParams


class WarmStartError(InputError):
    """The warm start cannot teach anything: no demonstration succeeded."""


def demonstrate(cfg: TrainConfig, tasks: list[dict[str, Any]], spec, env, tokenizer_path: str,
                workdir: Path) -> list[Episode]:
    """Episodes of the scripted solution policy on ``tasks``, through the run's agent and reward."""
    workdir.mkdir(parents=True, exist_ok=True)
    tasks_path = workdir / "tasks.jsonl"  # the scripted policy reads its solutions from a file
    atomic_write_text(tasks_path, "".join(json.dumps(t) + "\n" for t in tasks))
    sampler = demonstration_sampler(tokenizer_path, str(tasks_path),
                                    SamplingParams(temperature=1.0, max_new_tokens=cfg.sampling.max_new_tokens),
                                    question_field=cfg.data.question_field, tool_parser=spec.tool_parser)
    pool = StrandsProcessPool(spec, sampler, env, workers=1, slots=cfg.run.slots)
    try:
        return pool.run(tasks, samples=1)
    finally:
        pool.close()


def run_warm_start(cfg: TrainConfig, model, tokenizer, spec, env, tokenizer_path: str, run_dir: Path,
                   log=print) -> dict[str, Any]:
    """Demonstrate, then train ``model`` in place on the successful demonstrations. Writes
    ``episodes/warm_start.jsonl`` (every demonstration, failed ones with their status and reason)
    and returns the figures the run's metrics record."""
    from ..run import health
    from .batch import rows_from_episodes
    from .sft import train_supervised

    ws = cfg.warm_start
    t0 = time.perf_counter()
    tasks = warm_start_tasks(cfg)
    episodes = demonstrate(cfg, tasks, spec, env, tokenizer_path, run_dir / "warm_start")
    with EpisodeWriter(run_dir / "episodes" / "warm_start.jsonl") as w:
        for ep in episodes:
            w.write(ep)
    good = [ep for ep in episodes if ep.succeeded]
    failed = len(episodes) - len(good)
    if not good:
        reasons = sorted({f"{ep.status}: {ep.error or 'reward ' + str(ep.reward)}" for ep in episodes})[:3]
        raise WarmStartError(f"warm start: none of the {len(episodes)} demonstrations succeeded "
                             f"({'; '.join(reasons)}); see {run_dir / 'episodes' / 'warm_start.jsonl'}")
    if failed:
        log(f"warning: warm start: {failed} of {len(episodes)} demonstrations did not succeed and are left out "
            f"(episodes/warm_start.jsonl keeps them)")
    t_demo = time.perf_counter() - t0
    rows = [r for r in rows_from_episodes(good) if any(r.loss_mask)]
    history = train_supervised(model, rows, tokenizer.pad_token_id, epochs=ws.epochs, lr=ws.lr,
                               batch_rows=ws.batch_rows, micro_batch_tokens=cfg.optim.micro_batch_tokens,
                               grad_clip=cfg.optim.grad_clip, log=log, label="warm start")
    health.check_weights([p for p in model.parameters() if p.requires_grad], 0)
    tools = tool_use_metrics(good)
    result = {"demonstrations": len(episodes), "succeeded": len(good), "rows": len(rows),
              "sft_steps": len(history), "first_loss": history[0]["loss"], "last_loss": history[-1]["loss"],
              "demo_tool_call_rate": tools["tool_call_rate"], "time_demonstrations_s": t_demo,
              "time_warm_start_s": time.perf_counter() - t0}
    log(f"warm start: {len(good)}/{len(episodes)} demonstrations, {len(rows)} model calls, "
        f"{len(history)} steps, loss {result['first_loss']:.3f} -> {result['last_loss']:.3f}, "
        f"{result['time_warm_start_s']:.0f}s")
    return result
