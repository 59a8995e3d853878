"""The live test of a candidate: what the serving log (``ab.jsonl``) says since the test began.

The outcomes (one per session: the value of its last outcome, in the order sessions first got
one) go to the sequential test (``evaluation.statistics.sequential_comparison``: an mSPRT, whose
p-value stays valid however often it is read, so the loop reads it after every poll). The
candidate is promoted when it is better at ``loop.alpha``, rolled back when it is worse at
``loop.rollback_alpha`` (looser: a worse candidate should leave sooner than a better one
arrives), or when a guard trips: over at least ``loop.guard_min_calls`` calls an arm, its error
rate above the baseline's by more than ``loop.guard_error_rate``, or its p95 latency, or its cost
per session (prompt and sampled tokens: what serving it costs), more than
``loop.guard_latency_ratio`` / ``loop.guard_cost_ratio`` times the baseline's. A test that reaches
``loop.window`` outcomes undecided ends inconclusive: the candidate is rolled back (production
stays what it was: it was never shown to be worse).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from ..evaluation.statistics import sequential_comparison
from ..run.config import LoopConfig


def rows_of_test(rows: list[dict[str, Any]], baseline: str, experiment: str) -> list[dict[str, Any]] | None:
    """The rows of the newest test whose arms serve ``baseline`` and ``experiment`` (a restart of
    the same test writes no new ``config``), or None when the log has not started it yet."""
    want = {"baseline": baseline, "experiment": experiment}
    for i in range(len(rows) - 1, -1, -1):
        r = rows[i]
        if r.get("event") == "config":
            arms = {n: a.get("spec") for n, a in (r.get("arms") or {}).items()}
            return rows[i:] if arms == want else None
    return None


def _value(r: dict[str, Any], metric: str) -> float:
    if metric == "success":
        return float(bool(r["success"])) if r.get("success") is not None else float((r.get("reward") or 0.0) >= 1.0)
    return float(r["reward"]) if r.get("reward") is not None else float(bool(r.get("success")))


def arm_figures(rows: list[dict[str, Any]], arm: str, sessions: int) -> dict[str, Any]:
    calls = [r for r in rows if r.get("event") == "call" and r.get("arm") == arm]
    ok = [r for r in calls if r.get("ok")]
    lat = [float(r["latency_s"]) for r in ok]
    tokens = sum(int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in ok)
    return {"calls": len(calls), "errors": len(calls) - len(ok),
            "error_rate": (len(calls) - len(ok)) / len(calls) if calls else 0.0,
            "latency_p95_s": float(np.quantile(lat, 0.95)) if lat else None,
            "tokens_per_session": tokens / sessions if sessions else None, "sessions": sessions,
            "tokens": tokens}


def live_test(rows: list[dict[str, Any]], loop: LoopConfig) -> dict[str, Any]:
    """The test's figures and, when it is decided, ``decision`` (``promote``, ``rollback``) and
    ``reason`` (one line). ``rows``: ``rows_of_test``'s."""
    first: dict[str, int] = {}  # session -> its place in the order of first outcomes
    last: dict[str, dict[str, Any]] = {}
    sessions = {"baseline": set(), "experiment": set()}
    for r in rows:
        kind = r.get("event")
        if kind == "assign" and r.get("arm") in sessions:
            sessions[r["arm"]].add(r["session"])
        elif kind == "feedback" and r.get("session") in sessions.get(r.get("arm"), ()):
            # a session assigned in this test: an outcome may come for one served before it (by other arms)
            first.setdefault(r["session"], len(first))
            last[r["session"]] = r
    order = sorted(first, key=first.get)
    flags = [last[s]["arm"] == "experiment" for s in order]
    values = [_value(last[s], loop.metric) for s in order]
    seq = sequential_comparison(flags, values, alpha=loop.alpha, alpha_worse=loop.rollback_alpha,
                                mixture_sd=loop.mixture_sd, min_per_arm=loop.min_outcomes)
    arms = {a: arm_figures(rows, a, len(sessions[a])) for a in ("baseline", "experiment")}
    for a in arms:
        vals = [v for f, v in zip(flags, values) if f == (a == "experiment")]
        arms[a]["outcomes"] = len(vals)
        arms[a]["mean"] = float(np.mean(vals)) if vals else None
    out: dict[str, Any] = {"outcomes": len(order), "arms": arms, "sequential": asdict(seq), "decision": None,
                           "reason": None, "metric": loop.metric}
    e, b = arms["experiment"], arms["baseline"]
    if min(e["calls"], b["calls"]) >= loop.guard_min_calls:
        guards = []
        if e["error_rate"] - b["error_rate"] > loop.guard_error_rate:
            guards.append(f"error rate {e['error_rate']:.3f} against the baseline's {b['error_rate']:.3f} "
                          f"(guard: at most {loop.guard_error_rate:g} more)")
        if e["latency_p95_s"] and b["latency_p95_s"] and e["latency_p95_s"] > loop.guard_latency_ratio * b["latency_p95_s"]:
            guards.append(f"p95 latency {e['latency_p95_s']:.2f} s against the baseline's {b['latency_p95_s']:.2f} s "
                          f"(guard: at most {loop.guard_latency_ratio:g}x)")
        if e["tokens_per_session"] and b["tokens_per_session"] and \
                e["tokens_per_session"] > loop.guard_cost_ratio * b["tokens_per_session"]:
            guards.append(f"cost per session {e['tokens_per_session']:.0f} tokens against the baseline's "
                          f"{b['tokens_per_session']:.0f} (guard: at most {loop.guard_cost_ratio:g}x)")
        if guards:
            out.update(decision="rollback", reason="guard: " + "; ".join(guards), guard=True)
            return out
    d = seq.mean_difference
    if seq.decision == "worse":
        out.update(decision="rollback", reason=f"significantly worse: {loop.metric} {d:+.3f}, always-valid p = "
                                               f"{seq.p_value:.4g} <= {loop.rollback_alpha:g} after {len(order)} outcomes")
    elif seq.decision == "better":
        out.update(decision="promote", reason=f"significantly better: {loop.metric} {d:+.3f}, always-valid p = "
                                              f"{seq.p_value:.4g} <= {loop.alpha:g} after {len(order)} outcomes")
    elif len(order) >= loop.window:
        out.update(decision="rollback", inconclusive=True,
                   reason=f"inconclusive after {len(order)} outcomes (loop.window): {loop.metric} "
                          f"{'-' if d is None else format(d, '+.3f')}, p = {seq.p_value:.3g}")
    return out
