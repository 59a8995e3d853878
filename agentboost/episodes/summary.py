"""The summary table printed after a rollout."""

from __future__ import annotations

import math
from collections import Counter
from statistics import mean

from .record import STATUSES, Episode, SplitReason


def tool_use_metrics(episodes: list[Episode]) -> dict[str, float]:
    """How an agent used its tools: ``tool_call_rate`` (episodes with at least one call),
    ``tool_success_rate`` (calls that returned a result, over all calls; 0.0 without calls),
    ``malformed_tool_call_rate`` (episodes with a call the parser could not read), ``mean_turns``
    (model calls per episode; a chat model's text-level episode: its assistant turns)."""
    n = len(episodes) or 1
    calls = [t for ep in episodes for t in ep.tool_calls]
    return {"tool_call_rate": sum(1 for ep in episodes if ep.tool_calls) / n,
            "tool_success_rate": sum(1 for t in calls if t.ok) / len(calls) if calls else 0.0,
            "malformed_tool_call_rate": sum(1 for ep in episodes if ep.malformed_tool_calls) / n,
            "mean_turns": sum(_turns(ep) for ep in episodes) / n}


def _turns(ep: Episode) -> int:
    """Model calls; a text-level episode (a chat model's) has no call records: its assistant turns."""
    if ep.text_level:
        return sum(1 for m in ep.messages if m.get("role") == "assistant")
    return len(ep.calls)


def reasoning_metrics(episodes: list[Episode]) -> dict[str, float]:
    """Reasoning, which is recorded and never acted on: ``calls_in_reasoning`` (tool calls drafted
    inside reasoning, not executed), ``unterminated_reasoning`` (turns whose reasoning never closed:
    no content) and ``unterminated_reasoning_rate`` (episodes with such a turn)."""
    n = len(episodes) or 1
    return {"calls_in_reasoning": sum(ep.calls_in_reasoning for ep in episodes),
            "unterminated_reasoning": sum(ep.unterminated_reasoning for ep in episodes),
            "unterminated_reasoning_rate": sum(1 for ep in episodes if ep.unterminated_reasoning) / n}


def success_ci95(episodes: list[Episode]) -> float | None:
    """Half-width of the 95% confidence interval of the success rate (normal approximation over
    episodes, sample standard deviation); None below two episodes."""
    return mean_ci95([float(ep.succeeded) for ep in episodes])


def mean_ci95(xs: list[float]) -> float | None:
    """Half-width of the 95% confidence interval of a mean (normal approximation, sample standard
    deviation); None below two values: there is no interval from one value, and a report says so
    (``ci95_text``) rather than print ``nan``. The one interval of a rate: validation, ``eval``,
    an A/B arm."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return 1.96 * (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 / len(xs) ** 0.5


def ci95_text(half: float | None, n: int, unit: str = "episodes") -> str:
    """``± 0.123``, or why there is no interval (``no 95% CI from 1 task``): every report prints
    an interval this way, never ``nan``."""
    if half is None or half != half:
        return f"no 95% CI from {n} {unit if n != 1 else unit.rstrip('s')}"
    return f"± {half:.3f}"


def interval_text(ci95: tuple[float, float] | None, n: int, unit: str = "tasks") -> str:
    """``95% CI -0.100 .. +0.300`` for a difference, or why there is none."""
    if ci95 is None:
        return f"no 95% CI from {n} {unit if n != 1 else unit.rstrip('s')}"
    lo, hi = ci95
    return f"95% CI {lo:+.3f} .. {hi:+.3f}"


def split_metrics(episodes: list[Episode]) -> dict:
    """How often a model call extended the previous one (``merge_rate``: extended calls over calls
    after the first of their episode; 1.0 when there are none) and why the others were split."""
    later = sum(max(0, len(ep.calls) - 1) for ep in episodes)
    extended = sum(ep.extended_calls for ep in episodes)
    reasons = Counter()
    for ep in episodes:
        reasons.update(ep.split_reasons)
    return {"merge_rate": extended / later if later else 1.0,
            "split_reasons": {r.value: reasons.get(r.value, 0) for r in SplitReason}}


def finite_rewards(episodes: list[Episode]) -> list[float]:
    """The rewards a figure may use: scoring never gives a NaN or an infinite reward now (the
    episode errs: rewards.registry.as_result), but a file written before may hold one."""
    return [float(ep.reward) for ep in episodes
            if isinstance(ep.reward, (int, float)) and not isinstance(ep.reward, bool) and math.isfinite(ep.reward)]


def summarize(episodes: list[Episode]) -> dict:
    statuses = Counter(ep.status for ep in episodes)
    tools: Counter = Counter()
    for ep in episodes:
        for t in ep.tool_calls:
            tools[(t.name, "ok" if t.ok else "error")] += 1
    rewards = finite_rewards(episodes)
    return {
        "episodes": len(episodes),
        "statuses": {s: statuses.get(s, 0) for s in STATUSES},
        "calls": sum(len(ep.calls) for ep in episodes),
        "prompt_tokens": sum(len(c.prompt_ids) for ep in episodes for c in ep.calls),
        "response_tokens": sum(ep.num_response_tokens for ep in episodes),
        "tool_calls": dict(tools),
        "malformed_tool_calls": sum(ep.malformed_tool_calls for ep in episodes),
        **{k: v for k, v in reasoning_metrics(episodes).items() if k != "unterminated_reasoning_rate"},
        "splits": sum(ep.num_splits for ep in episodes),
        **split_metrics(episodes),
        "reward_mean": mean(rewards) if rewards else None,
        "rewards": rewards,
    }


def print_summary(episodes: list[Episode], wall_s: float, out: str, groups=None, pool_stats=None) -> None:
    from rich.console import Console
    from rich.table import Table

    s = summarize(episodes)
    console = Console()
    table = Table(title=f"{s['episodes']} episodes in {wall_s:.1f} s -> {out}", show_header=True)
    table.add_column("what")
    table.add_column("value", justify="right")
    for status, n in s["statuses"].items():
        table.add_row(f"status {status}", str(n))
    table.add_row("model calls", str(s["calls"]))
    table.add_row("response tokens", str(s["response_tokens"]))
    table.add_row("tokens/s (sampled, wall)", f"{s['response_tokens'] / wall_s:.1f}" if wall_s > 0 else "-")
    for (name, outcome), n in sorted(s["tool_calls"].items()):
        table.add_row(f"tool {name} {outcome}", str(n))
    table.add_row("malformed tool calls", str(s["malformed_tool_calls"]))
    if s["calls_in_reasoning"] or s["unterminated_reasoning"]:
        table.add_row("tool calls drafted in reasoning (not run)", str(s["calls_in_reasoning"]))
        table.add_row("turns whose reasoning never closed", str(s["unterminated_reasoning"]))
    table.add_row("segment splits", str(s["splits"]))
    table.add_row("merge rate (calls that extended the previous)", f"{s['merge_rate']:.1%}")
    for reason, n in s["split_reasons"].items():
        if n:
            table.add_row(f"split: {reason}", str(n))
    if s["reward_mean"] is not None:
        rw = s["rewards"]
        table.add_row("reward mean", f"{s['reward_mean']:.3f}")
        table.add_row("reward min / max", f"{min(rw):.3f} / {max(rw):.3f}")
        for value, n in sorted(Counter(round(r, 3) for r in rw).items()):
            table.add_row(f"reward = {value:g}", str(n))
    if groups is not None:
        table.add_row("groups (with failures)", f"{groups.groups} ({groups.groups_with_failures})")
    if pool_stats:
        lat = pool_stats.get("latency_s") or {}
        if lat:
            table.add_row("episode latency p50 / p90 / p99 (s)", f"{lat['p50']:.2f} / {lat['p90']:.2f} / {lat['p99']:.2f}")
        table.add_row("worker starts / deaths / retries",
                      f"{pool_stats['worker_starts']} / {pool_stats['worker_deaths']} / {pool_stats['retries']}")
    console.print(table)
