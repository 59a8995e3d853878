"""``agentboost eval``: a checkpoint (or model) against a baseline on the same held-out tasks, with
the same agent, reward, sampling parameters and seeds, and a paired test of the difference
(``statistics.py``: the test, its unit the task). Episodes are written as they finish and an
interrupted evaluation resumes (``progress.py``).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..agents.http_agent import HttpAgentSpec
from ..episodes.record import Episode, EpisodeWriter
from ..episodes.summary import finite_rewards, reasoning_metrics, success_ci95, tool_use_metrics
from ..files import atomic_write_text
from ..models.chat import chat_model_spec, is_chat_model_spec
from ..rewards.groups import apply_group_policy
from ..rollout.pool import StrandsProcessPool, collect
from ..run.assembly import (
    agent_spec,
    chat_sampler_spec,
    check_config_sandbox,
    environment,
    policy_pool,
    sampler_spec,
    sampling,
    start_policy_for_spec,
)
from ..run.checkpoint import CheckpointError, split_run_spec
from ..run.config import TrainConfig
from .progress import Progress, check_args, read_progress, rewrite_episodes, run_resumable
from .statistics import EvalInputError, paired_comparison


@dataclass
class PolicyReport:
    label: str
    success_rate: float | None  # None when no episode has an outcome (all aborted)
    mean_reward: float | None
    tool_call_rate: float
    episodes: int
    success_ci95: float | None = None  # half-width (episodes.summary.success_ci95); None below two episodes
    tool_use: dict[str, float] = field(default_factory=dict)  # tool_use_metrics and reasoning_metrics
    per_task: dict[str, list[float]] = field(default_factory=dict)
    aborted: int = 0  # episodes the serving side aborted (after the retries): in no statistic


def describe(episodes: list[Episode], label: str) -> PolicyReport:
    """Statistics over the episodes that have an outcome: an aborted one (the serving side was down)
    is counted in ``aborted`` and left out of everything else, never scored as a failure."""
    aborted = sum(ep.aborted for ep in episodes)
    episodes = [ep for ep in episodes if not ep.aborted]
    per_task: dict[str, list[float]] = {}
    for ep in episodes:
        per_task.setdefault(ep.task_id, []).append(float(ep.succeeded))
    rewards = finite_rewards(episodes)
    p = float(np.mean([ep.succeeded for ep in episodes])) if episodes else None  # every one aborted
    tools = {**tool_use_metrics(episodes), **reasoning_metrics(episodes)}
    return PolicyReport(label=label, success_rate=p, mean_reward=float(np.mean(rewards)) if rewards else None,
                        tool_call_rate=tools["tool_call_rate"], episodes=len(episodes),
                        success_ci95=success_ci95(episodes), tool_use=tools,
                        per_task=per_task, aborted=aborted)


def run_policy(spec: str, tasks: list[dict], cfg: TrainConfig, samples: int, seed: int, workers: int, slots: int,
               out: Path | None, log=print, prompt_policy=None, retries: int = 0, backoff_s: float = 5.0) -> list[Episode]:
    """``spec``: a policy (embedded name, model or run directory) or a chat model we do not train
    (``models.chat``: a file or mapping with ``provider``), whose episodes are text-level.
    ``prompt_policy``: a ``PromptPolicy`` the agent runs with (else the configuration's prompt).
    ``out``: episodes are appended there as they finish, and those already there are not run
    again (``progress``); aborted ones are retried ``retries`` times, ``backoff_s`` apart
    (doubling)."""
    progress = read_progress(out, tasks, samples) if out is not None else Progress()
    total = len(tasks) * samples
    if progress.resumed:
        rest = "; running the rest" if progress.resumed < total else ""
        log(f"{_label(spec)}: {progress.resumed} of {total} episodes already finished in {out}{rest}")
    if len(progress.done) == total:
        episodes = [progress.done[(str(t["task_id"]), k)] for t in tasks for k in range(samples)]
    else:
        with contextlib.ExitStack() as stack:
            pool = stack.enter_context(_chat_pool(spec, tasks, cfg, samples, seed, workers, slots, log, prompt_policy)
                                       if is_chat_model_spec(spec) else
                                       _policy_pool(spec, tasks, cfg, samples, seed, workers, slots, log, prompt_policy))

            def run_batch(jobs, on_episode):
                def finished(ep: Episode) -> None:  # written as it comes, failed ones with their reward
                    apply_group_policy([ep], "keep", failed_reward=cfg.reward.failed_reward)
                    on_episode(ep)

                return run_jobs(pool, jobs, finished)

            episodes = run_resumable(run_batch, tasks, samples, out, progress, retries=retries,
                                     backoff_s=backoff_s, log=log)
    env = environment(cfg)
    if env.scores_groups:  # a group-ranking judge scores whole groups, once all their members ran
        # the groups with a member still waiting for its score: judged whole (a member run again
        # after an outage is ranked with the others); groups a resumed file already holds judged are not
        waiting = {ep.group_id for ep in episodes if ep.reward is None and not (ep.failed or ep.aborted)}
        if waiting:
            env.score_groups({str(t["task_id"]): t for t in tasks}, [ep for ep in episodes if ep.group_id in waiting])
    apply_group_policy(episodes, "keep", failed_reward=cfg.reward.failed_reward)
    if env.scores_groups and out is not None:
        # the file was appended to as episodes finished (unscored, so that a kill loses none); now
        # it holds each (task, sample) once, with the group judge's score: what a reader of the
        # evaluation's episodes and a resumed run see
        rewrite_episodes(out, episodes)
    return episodes


def run_jobs(pool: StrandsProcessPool, jobs: list[tuple[dict, int]], on_episode) -> list[Episode]:
    """(task, sample) pairs on ``pool``, ``on_episode`` called as each finishes (every one of them
    before this returns); in job order."""
    return collect([pool.submit(task, group_id=str(task["task_id"]), sample=k) for task, k in jobs], on_episode)


def _label(spec) -> str:
    return chat_model_spec(spec).describe() if is_chat_model_spec(spec) else str(spec)


@contextlib.contextmanager
def _chat_pool(spec, tasks, cfg: TrainConfig, samples: int, seed: int, workers: int, slots: int, log,
               prompt_policy=None):
    """Workers that run the agent with a chat model through its Strands provider (text-level)."""
    chat = chat_model_spec(spec, "--model/--baseline")
    chat.api_key()  # a key that is not there: one line now, not an error in every episode
    warning = check_config_sandbox(cfg)
    if warning:
        log(f"warning: {warning}")
    log(f"evaluating {chat.describe()} on {len(tasks)} tasks x {samples} (chat model through Strands' "
        f"{chat.provider} provider; text-level episodes)")
    sampler = chat_sampler_spec(chat, sampling(cfg, "validation", seed=seed))
    agent = _with_prompt_policy(agent_spec(cfg), prompt_policy) if prompt_policy is not None else agent_spec(cfg)
    with policy_pool(cfg, agent, sampler, environment(cfg), workers=workers, slots=slots) as pool:
        yield pool


@contextlib.contextmanager
def _policy_pool(spec: str, tasks, cfg: TrainConfig, samples: int, seed: int, workers: int, slots: int, log,
                 prompt_policy=None):
    """The policy on its server (the configured engine, as in training), and workers sampling it."""
    warning = check_config_sandbox(cfg)  # before the model loads
    if warning:
        log(f"warning: {warning}")
    agent, env = agent_spec(cfg), environment(cfg)
    if prompt_policy is not None:
        agent = _with_prompt_policy(agent, prompt_policy)
    engine, server, desc, tokenizer_path, _ = start_policy_for_spec(spec, cfg, seed, workers * slots, workers * slots)
    trained = (Path(split_run_spec(spec)[0]) / "config.yaml").is_file()
    how = f", {server.sync} weights" if engine == "vllm" and trained else ""
    log(f"evaluating {desc} on {len(tasks)} tasks x {samples} ({engine} engine{how})")
    with server:
        # the same seed for both policies: common random numbers, so the difference is the models'
        sampler = sampler_spec(server, engine, tokenizer_path, sampling(cfg, "validation", seed=seed))
        with policy_pool(cfg, agent, sampler, env, workers=workers, slots=slots) as pool:
            yield pool


def _with_prompt_policy(agent, prompt_policy):
    if isinstance(agent, HttpAgentSpec):
        raise EvalInputError("--prompt-policy sets the prompt of an agent agentboost builds; an http agent "
                             "(agent.kind http) keeps its own")
    return prompt_policy.apply(agent)


def evaluate(model: str, baseline: str, tasks: list[dict], cfg: TrainConfig, samples: int = 2, seed: int = 0,
             alpha: float = 0.05, workers: int = 1, slots: int = 16, out_dir: str | Path | None = None,
             log=print, model_episodes: list[Episode] | None = None,
             prompt_policy: str | Path | None = None, retries: int = 2, backoff_s: float = 5.0,
             baseline_prompt_policy: str | Path | None = None) -> dict[str, Any]:
    """``model_episodes``: the model's side already sampled on ``tasks`` (the trainer's final
    validation, by the live policy); then only the baseline runs. ``prompt_policy``: the model's
    side runs with this prompt policy (``run/prompt_policy.py``), the baseline without it (or with
    ``baseline_prompt_policy``: two prompts of one model, as the continual loop's gate compares them).
    ``model`` and ``baseline`` may each be a chat model we do not train (``models.chat``).

    With ``out_dir``, the evaluation resumes: episodes already there are kept, the rest run
    (``progress``), and the report is the one an uninterrupted run gives. Episodes the serving
    side aborted are retried ``retries`` times (``backoff_s`` apart, doubling), then counted and
    left out: the paired test compares the tasks both sides have outcomes for."""
    from ..run.prompt_policy import load_prompt_policy

    policy = load_prompt_policy(prompt_policy) if prompt_policy is not None else None
    baseline_policy = load_prompt_policy(baseline_prompt_policy) if baseline_prompt_policy is not None else None
    if samples < 1:
        raise EvalInputError(f"--samples must be >= 1, got {samples}")
    if retries < 0 or backoff_s < 0:
        raise EvalInputError(f"--retries and --retry-backoff must be >= 0, got {retries} and {backoff_s}")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if model_episodes is None:  # a resumed evaluation must be the same evaluation
            check_args(out, eval_arguments(model, baseline, tasks, cfg, samples, seed, prompt_policy,
                                           baseline_prompt_policy))
    t0 = time.perf_counter()
    reports = []
    for label, spec in (("model", model), ("baseline", baseline)):
        if label == "model" and model_episodes is not None:
            eps = model_episodes
            if out is not None:
                with EpisodeWriter(out / "model_episodes.jsonl") as w:
                    for ep in eps:
                        w.write(ep)
        else:
            try:
                eps = run_policy(spec, tasks, cfg, samples, seed, workers, slots,
                                 out / f"{label}_episodes.jsonl" if out is not None else None, log,
                                 prompt_policy=policy if label == "model" else baseline_policy, retries=retries,
                                 backoff_s=backoff_s)
            except CheckpointError as e:
                raise EvalInputError(f"--{label} {spec}: {e}") from None
        reports.append(describe(eps, _label(spec)))
    # a task a side has no outcome for (all its episodes aborted) is compared on neither side
    common = set(reports[0].per_task) & set(reports[1].per_task)
    if not common:
        raise EvalInputError(f"no task has an outcome on both sides ({reports[0].aborted} of the model's and "
                             f"{reports[1].aborted} of the baseline's episodes were aborted by the serving side)")
    test = paired_comparison({t: v for t, v in reports[0].per_task.items() if t in common},
                             {t: v for t, v in reports[1].per_task.items() if t in common}, alpha=alpha, seed=seed)
    result = {"model": _public(reports[0]), "baseline": _public(reports[1]), "difference": test.__dict__,
              "samples_per_task": samples, "seed": seed, "tasks": len(tasks),
              "tasks_left_out": len(tasks) - len(common),
              "sampling": {"temperature": cfg.validation.temperature, "top_p": cfg.validation.top_p,
                           "max_new_tokens": cfg.validation.max_new_tokens},
              "wall_s": time.perf_counter() - t0}
    if policy is not None:
        result["prompt_policy"] = f"{policy.summary()} ({prompt_policy})"
    if out is not None:
        atomic_write_text(out / "eval.json", json.dumps(result, indent=1))  # a kill leaves no half report
    return result


def _public(r: PolicyReport) -> dict[str, Any]:
    return {"policy": r.label, "success_rate": r.success_rate, "success_ci95": r.success_ci95,
            "mean_reward": r.mean_reward, **r.tool_use, "episodes": r.episodes, "aborted": r.aborted}


def eval_arguments(model, baseline, tasks: list[dict], cfg: TrainConfig, samples: int, seed: int,
                   prompt_policy, baseline_prompt_policy=None) -> dict[str, Any]:
    """What makes two evaluations the same one (``progress.check_args``): the policies, the
    tasks, samples, seed, and the agent, reward and sampling of the configuration. A chat model's
    spec holds no key (only the variable's name), so this file holds none either."""
    import dataclasses
    import hashlib

    side = lambda s: chat_model_spec(s).as_dict() if is_chat_model_spec(s) else str(s)  # noqa: E731
    setup = json.dumps({"agent": dataclasses.asdict(cfg.agent), "reward": dataclasses.asdict(cfg.reward),
                        "validation": dataclasses.asdict(cfg.validation)}, sort_keys=True, default=str)
    return {"model": side(model), "baseline": side(baseline), "samples": samples, "seed": seed,
            "tasks": [str(t["task_id"]) for t in tasks], "prompt_policy": str(prompt_policy) if prompt_policy else None,
            **({"baseline_prompt_policy": str(baseline_prompt_policy)} if baseline_prompt_policy else {}),
            "setup_sha256": hashlib.sha256(setup.encode()).hexdigest()}
