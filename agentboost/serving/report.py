"""``agentboost ab report``: an A/B test's figures from the router's event log (``ab.jsonl``).

Per arm: sessions, calls, errors and error rate, latency (mean, p50, p95), tokens, and from the
outcomes (the last feedback of each session): the success rate and mean reward with their 95%
intervals. The difference experiment minus baseline, its interval and p-value come from
``evaluation.statistics.unpaired_comparison``, the unpaired counterpart of ``eval``'s paired test (one
statistics module). The minimum effect declared when the test started (``serve --min-effect``) is
reached when the difference is significant and at least that large. The split is reported as
observed, overall and for each split setting in force (a live change starts a new phase).
A log holds every test served from its directory: the report is of the newest (from its last
``config`` event; a restart of the same test writes ``restart`` and goes on counting).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..episodes.summary import interval_text
from ..evaluation.statistics import rate_with_ci, unpaired_comparison
from ..files import iter_jsonl
from .policies import ARMS, FEEDBACK_BOUND


def _finite(x: Any) -> float | None:
    """A logged reward as a number, None for one no figure may use (a log written before feedback
    refused them, or edited): not a number, NaN, infinite, or beyond serve's bound."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and abs(x) <= FEEDBACK_BOUND else None


def _quantile(xs: list[float], q: float) -> float | None:
    return float(np.quantile(xs, q)) if xs else None


def ab_report(events: str | Path | list[dict[str, Any]], alpha: float = 0.05, seed: int = 0) -> dict[str, Any]:
    rows = list(events) if isinstance(events, list) else [r for _, r in iter_jsonl(events, growing=True)]
    starts = [i for i, r in enumerate(rows) if r.get("event") == "config"]
    rows = rows[starts[-1]:] if starts else rows  # new arms are a new test; a restart of the same test is no config
    config = rows[0] if starts else {}
    arms = list(config.get("arms") or ARMS)
    phases: list[dict[str, Any]] = [{"split": config.get("split"), "sessions": 0, "experiment": 0}]
    session_arm: dict[str, str] = {}
    outcome: dict[str, dict[str, Any]] = {}
    per: dict[str, dict[str, Any]] = {a: {"calls": 0, "errors": 0, "latency": [], "prompt_tokens": 0,
                                          "completion_tokens": 0} for a in arms}
    for r in rows:
        kind = r.get("event")
        if kind == "split":
            phases.append({"split": r["to"], "sessions": 0, "experiment": 0, "changed_at": r.get("t")})
        elif kind == "assign":
            session_arm[r["session"]] = r["arm"]
            phases[-1]["sessions"] += 1
            phases[-1]["experiment"] += r["arm"] == "experiment"
        elif kind == "call":
            a = per.setdefault(r["arm"], {"calls": 0, "errors": 0, "latency": [], "prompt_tokens": 0,
                                          "completion_tokens": 0})
            a["calls"] += 1
            if r.get("ok"):
                a["latency"].append(float(r["latency_s"]))
                a["prompt_tokens"] += int(r.get("prompt_tokens", 0))
                a["completion_tokens"] += int(r.get("completion_tokens", 0))
            else:
                a["errors"] += 1
        elif kind == "feedback":
            outcome[r["session"]] = r  # the last outcome of a session counts
    out_arms: dict[str, Any] = {}
    samples: dict[str, dict[str, list[float]]] = {}
    for arm, a in per.items():
        sessions = [s for s, x in session_arm.items() if x == arm]
        fb = [outcome[s] for s in sessions if s in outcome]
        succ = [float(f["success"]) for f in fb if f.get("success") is not None]
        posted = [_finite(f["reward"]) for f in fb if f.get("reward") is not None]
        rew = [x for x in posted if x is not None]  # never a NaN, an infinity or a non-number in a figure
        samples[arm] = {"success": succ, "reward": rew}
        sr, sr_ci = rate_with_ci(succ)
        mr, mr_ci = rate_with_ci(rew)
        lat = a["latency"]
        ok = a["calls"] - a["errors"]
        out_arms[arm] = {
            "description": (config.get("arms") or {}).get(arm, {}).get("description"),
            "sessions": len(sessions), "calls": a["calls"], "errors": a["errors"],
            "error_rate": a["errors"] / a["calls"] if a["calls"] else 0.0,
            "latency_mean_s": float(np.mean(lat)) if lat else None, "latency_p50_s": _quantile(lat, 0.5),
            "latency_p95_s": _quantile(lat, 0.95),
            "prompt_tokens_per_call": a["prompt_tokens"] / ok if ok else None,
            "completion_tokens_per_call": a["completion_tokens"] / ok if ok else None,
            "outcomes": len(fb), "success_rate": sr if succ else None, "success_ci95": sr_ci if succ else None,
            "mean_reward": mr if rew else None, "reward_ci95": mr_ci if rew else None,
            "invalid_rewards": len(posted) - len(rew),
        }
    total = sum(p["sessions"] for p in phases)
    report: dict[str, Any] = {
        "arms": out_arms, "sessions": total,
        "split": {"setting": phases[-1]["split"],
                  "observed": sum(p["experiment"] for p in phases) / total if total else None,
                  "phases": [{**p, "observed": p["experiment"] / p["sessions"] if p["sessions"] else None}
                             for p in phases]},
        "min_effect": config.get("min_effect"), "alpha": alpha,
    }
    if set(ARMS) <= set(samples):
        for metric in ("success", "reward"):
            e, b = samples["experiment"][metric], samples["baseline"][metric]
            if e and b:
                report[f"{metric}_difference"] = unpaired_comparison(e, b, alpha=alpha, seed=seed).__dict__
        d = report.get("success_difference")
        if d is not None and report["min_effect"] is not None:
            report["min_effect_reached"] = bool(d["significant"] and d["mean_difference"] >= report["min_effect"])
    return report


def _f(x: Any, fmt: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def report_text(r: dict[str, Any]) -> str:
    lines = [f"{r['sessions']} sessions; experiment share {_f(r['split']['observed'])} "
             f"(setting {_f(r['split']['setting'])})"]
    if len(r["split"]["phases"]) > 1:
        lines.append("split phases: " + ", ".join(f"{_f(p['split'], '.2f')}: {p['experiment']}/{p['sessions']}"
                                                   for p in r["split"]["phases"]))
    lines.append(f"{'arm':<11}{'sessions':>9}{'calls':>7}{'errors':>8}{'p50 s':>8}{'p95 s':>8}{'tok/call':>9}"
                 f"{'outcomes':>9}  {'success (95% CI)':<18}{'reward (95% CI)':<18}")
    for arm, a in r["arms"].items():
        lines.append(f"{arm:<11}{a['sessions']:>9}{a['calls']:>7}{a['errors']:>4} ({a['error_rate']:.0%})"
                     f"{_f(a['latency_p50_s']):>7}{_f(a['latency_p95_s']):>8}{_f(a['completion_tokens_per_call'], '.1f'):>9}"
                     f"{a['outcomes']:>9}  {_f(a['success_rate'])} ± {_f(a['success_ci95']):<8}"
                     f"{_f(a['mean_reward'])} ± {_f(a['reward_ci95'])}")
    for arm, a in r["arms"].items():
        if a.get("invalid_rewards"):
            lines.append(f"{arm}: {a['invalid_rewards']} posted rewards left out of every figure (not finite numbers "
                         "within serve's bound)")
    for metric in ("success", "reward"):
        d = r.get(f"{metric}_difference")
        if d is not None:
            n = min(d["n_experiment"], d["n_baseline"])
            lines.append(f"{metric} difference (experiment - baseline) {d['mean_difference']:+.3f} "
                         f"({interval_text(d['ci95'], n, 'outcomes')}), p = {d['p_value']:.4f} ({d['method']}): "
                         f"{'significant' if d['significant'] else 'not significant'} at alpha {d['alpha']:g}")
    if "min_effect_reached" in r:
        lines.append(f"minimum effect {r['min_effect']:+.3f}: {'reached' if r['min_effect_reached'] else 'not reached'}")
    return "\n".join(lines)
