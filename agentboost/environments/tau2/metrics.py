"""tau2 metrics over episodes: pass^k as tau2 reports it (and pass@k), the null baseline, success on
non-trivial tasks, termination reasons, user signals and tool errors.

- success: reward within 1e-6 of 1 (tau2's rule); an episode that failed (timeout, crash, error)
  counts as a trial without success, as tau2 counts a simulation that scored 0;
- pass^k (tau2): per task, C(successes, k) / C(trials, k), averaged over tasks, for k = 1 .. the
  smallest number of trials any task has (tau2 lowers its max k the same way);
- pass@k: per task, 1 - C(trials - successes, k) / C(trials, k), averaged the same way (both from
  ``agentboost.episodes.passk``, the one implementation; k never exceeds a task's trials here);
- null baseline: the reward of doing nothing (the agent greets, the user states the request, the
  user stops), per task, scored by ``tau2_eval.score``; a task whose null reward is 1 is trivial,
  and ``nontrivial_success`` is the success rate over the other tasks."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

from ...episodes.passk import pass_at_k, pass_hat_k
from .evaluator import score


def is_success(reward: float | None) -> bool:
    return reward is not None and abs(reward - 1.0) <= 1e-6


def null_trajectory(row: dict) -> list[dict]:
    from .conversation import greeting

    return [{"role": "assistant", "content": greeting()},
            {"role": "user", "content": row.get("question") or "Hi."},
            {"role": "user", "content": "###STOP###"}]


def null_baseline(rows: Iterable[dict]) -> dict[str, float]:
    """task_id -> the reward of a do-nothing agent (the user stops right away)."""
    return {r["task_id"]: score(r, null_trajectory(r), "user_stop").reward for r in rows}


def _get(ep: Any, name: str, default=None):
    return ep.get(name, default) if isinstance(ep, dict) else getattr(ep, name, default)


def tau2_metrics(episodes: Iterable[Any], null: dict[str, float] | None = None) -> dict[str, Any]:
    """Metrics over tau2 episodes (``Episode`` objects or their dicts). ``null``: the null baseline
    per task (``null_baseline(rows)``), for the null mean and the non-trivial success rate."""
    by_task: dict[str, list[bool]] = defaultdict(list)
    rewards: list[float] = []
    terminations: Counter = Counter()
    signals: Counter = Counter()
    tool_errors = 0
    for ep in episodes:
        reward = _get(ep, "reward")
        status = _get(ep, "status")
        status = getattr(status, "value", status)
        ok = status in ("ok", "truncated")
        success = ok and is_success(reward)
        by_task[str(_get(ep, "task_id"))].append(success)
        rewards.append(float(reward) if ok and reward is not None else 0.0)
        conv = (_get(ep, "metadata") or {}).get("conversation") or {}
        terminations[conv.get("termination") or (f"failed ({status})" if not ok else "agent_stop")] += 1
        if conv.get("user_signal"):
            signals[conv["user_signal"]] += 1
        tool_errors += int(conv.get("tool_errors") or 0)
    n = len(rewards)
    out: dict[str, Any] = {"episodes": n, "tasks": len(by_task)}
    if not n:
        return out
    max_k = min(len(v) for v in by_task.values())
    out["avg_reward"] = sum(rewards) / n
    out["pass_hat_k"] = {k: sum(pass_hat_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task)
                         for k in range(1, max_k + 1)}
    out["pass_at_k"] = {k: sum(pass_at_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task)
                        for k in range(1, max_k + 1)}
    out["terminations"] = dict(terminations)
    out["user_signals"] = dict(signals)
    out["tool_errors_per_episode"] = tool_errors / n
    if null is not None:
        known = [t for t in by_task if t in null]
        out["null_baseline"] = sum(null[t] for t in known) / len(known) if known else None
        hard = [t for t in known if not is_success(null[t])]
        trials = [s for t in hard for s in by_task[t]]
        out["nontrivial_tasks"] = len(hard)
        out["nontrivial_success"] = sum(trials) / len(trials) if trials else None
    return out
