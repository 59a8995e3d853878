"""What agentboost changes in rLLM's ``AgentPPOTrainer`` (rLLM 1fc3c4b): the trajectory -> batch
transform only (``modified_rllm_files/agent_ppo_trainer.py`` calls ``transform_trajectories``).

- One row per trajectory, in the order given (rLLM joins rows to its batch by position).
- The attention mask comes from the rows' lengths, not from ``token != pad``.
- Rows of agentboost episodes carry their status, error, splits and the calls left out of the row
  in the batch's non-tensor fields; failed episodes are rows with the failed reward, so no GRPO
  group loses a member. The episode records are written as JSONL beside rLLM's chat logs.
- An aborted episode (the serving side was down: no outcome, never a wrong answer) is a row with
  mask 0 (nothing of it trained) whose reward is its group's mean over the members that have an
  outcome: rLLM's GRPO (the fork's, by ``uid``) takes every row of a group into its mean, which that
  leaves as it would be without the row, and rLLM's rejection sampling (all solved / none solved)
  judges the group by its real outcomes. A group with no outcome at all keeps the failed reward on
  rows that are all masked out. Counted: ``agentboost/aborted_episodes``, ``.../aborted_groups``.
- ``is_last_step``/``is_pad_step`` are set (True/False per row) so that rLLM's padding to the
  world size marks its pad rows and veRL's actor zeroes their loss mask.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from .episode_rows import batch_tensors


def _aggregate(per_traj: list[dict[str, Any]]) -> dict[str, float]:
    import numpy as np

    out: dict[str, float] = {}
    for k in per_traj[0] if per_traj else []:
        values = [d.get(k) for d in per_traj]
        values = np.array([v for v in values if v is not None and v >= 0], dtype=float)
        if values.size:
            out.update({f"traj/{k}_mean": values.mean(), f"traj/{k}_min": values.min(), f"traj/{k}_max": values.max()})
    return out


def neutral_rewards(rewards: list[float], groups: list[str], aborted: list[bool]) -> tuple[list[float], int]:
    """``rewards`` with each aborted row's replaced by its group's mean over the rows that are not
    aborted (the group's baseline is then what it would be without it); also how many groups have
    no such row (their aborted rows keep their reward: every row of the group is masked out)."""
    outcomes: dict[str, list[float]] = {}
    for r, g, a in zip(rewards, groups, aborted):
        outcomes.setdefault(g, [])
        if not a:
            outcomes[g].append(r)
    out = [sum(outcomes[g]) / len(outcomes[g]) if a and outcomes[g] else r for r, g, a in zip(rewards, groups, aborted)]
    return out, sum(1 for g in outcomes if not outcomes[g])


def transform_trajectories(trainer: Any, trajectories: list[dict[str, Any]]):
    """``AgentPPOTrainer._transform_agent_trajectories``: returns ``(DataProto, metrics)``."""
    import numpy as np
    from verl import DataProto

    if not trajectories:
        raise ValueError("no trajectories to train on: the rollout returned none")
    cfg = trainer.config
    tok = trainer.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    episodes = [t.get("episode") for t in trajectories]
    ours = any(e is not None for e in episodes)
    if ours and not all(e is not None for e in episodes):
        raise ValueError("a batch mixes agentboost episodes with other rLLM trajectories")
    rewards = [float(t["trajectory_reward"]) for t in trajectories]
    aborted = [bool(t["row"].get("aborted")) for t in trajectories] if ours else [False] * len(trajectories)
    groups_without_outcome = 0
    if any(aborted):
        rewards, groups_without_outcome = neutral_rewards(rewards, [str(e["group_id"]) for e in episodes], aborted)
    tensors = batch_tensors(
        [t["prompt_tokens"].tolist() for t in trajectories], [t["response_tokens"].tolist() for t in trajectories],
        [t["response_masks"].tolist() for t in trajectories], rewards,
        int(cfg.data.max_prompt_length), int(cfg.data.max_response_length), pad)
    n = len(trajectories)
    non_tensors: dict[str, np.ndarray] = {
        "is_last_step": np.ones(n, dtype=bool),
        "is_pad_step": np.zeros(n, dtype=bool),
    }
    metrics = _aggregate([t.get("metrics") or {} for t in trajectories])
    if ours:
        rows = [t["row"] for t in trajectories]
        metrics["agentboost/aborted_episodes"] = sum(aborted)
        metrics["agentboost/aborted_groups"] = groups_without_outcome  # groups with no outcome at all
        non_tensors.update({
            "episode_id": np.array([e["episode_id"] for e in episodes], dtype=object),
            "episode_status": np.array([r["status"] for r in rows], dtype=object),
            "episode_error": np.array([r["error"] for r in rows], dtype=object),
            "episode_splits": np.array([r["splits"] for r in rows], dtype=np.int64),
            "calls_not_in_row": np.array([r["calls_total"] - r["calls_in_row"] for r in rows], dtype=np.int64),
        })
        counts = Counter(r["status"] for r in rows)
        for status, c in counts.items():
            metrics[f"agentboost/episodes_{status}"] = c
        metrics["agentboost/failed_fraction"] = sum(c for s, c in counts.items() if s not in ("ok", "aborted")) / n
        metrics["agentboost/splits"] = int(sum(r["splits"] for r in rows))
        metrics["agentboost/calls_not_in_row"] = int(sum(r["calls_total"] - r["calls_in_row"] for r in rows))
        metrics["agentboost/rows_cut"] = int(sum(bool(r["cut"]) for r in rows))
    out_dir = os.path.join(str(cfg.trainer.default_local_dir))
    step = getattr(trainer, "global_steps", 0)
    os.makedirs(os.path.join(out_dir, "chat_completions"), exist_ok=True)
    with open(os.path.join(out_dir, "chat_completions", f"{step}.jsonl"), "w") as f:
        for t in trajectories:
            f.write(json.dumps(t.get("chat_completions"), default=repr) + "\n")
    if episodes[0] is not None:
        os.makedirs(os.path.join(out_dir, "episodes"), exist_ok=True)
        # appended: training and validation of one step share the step number
        with open(os.path.join(out_dir, "episodes", f"{step}.jsonl"), "a") as f:
            for e in episodes:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
    data = DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)
    if hasattr(trainer, "visualize_trajectory"):
        trainer.visualize_trajectory(data)
    return data, metrics
