"""The loop's live test from a serving log (no model): promotion on a better candidate at the
sequential test's level, rollback on a worse one at the looser level, each guard (error rate,
latency, cost per session) with its reason, an undecided test ended at the window, and the test's
rows found by its arms (a restart of the same test writes no new config)."""

import numpy as np

from agentboost.continual.decision import live_test, rows_of_test
from agentboost.run.config import LoopConfig

P, C = "prod:step_000001", "cand:step_000001"


def log(outcomes, *, latency=(0.5, 0.5), tokens=(100, 100), errors=(0, 0), calls=2, seed=0):
    """A test's ab.jsonl rows: ``outcomes`` (arm, value) per session, each with ``calls`` calls."""
    rng = np.random.default_rng(seed)
    rows = [{"event": "config", "arms": {"baseline": {"spec": P}, "experiment": {"spec": C}}}]
    for i, (arm, value) in enumerate(outcomes):
        k = arm == "experiment"
        rows.append({"event": "assign", "session": f"s{i}", "arm": arm})
        for j in range(calls):
            failed = j == 0 and rng.random() < errors[k]
            rows.append({"event": "call", "session": f"s{i}", "arm": arm, "ok": not failed,
                         "latency_s": latency[k] * (0.8 + 0.4 * rng.random()), "prompt_tokens": tokens[k] // 2,
                         "completion_tokens": tokens[k] // 2})
        rows.append({"event": "feedback", "session": f"s{i}", "arm": arm, "reward": float(value),
                     "success": bool(value)})
    return rows


def stream(n, p_base, p_exp, seed=0):
    rng = np.random.default_rng(seed)
    arms = np.where(rng.random(n) < 0.5, "experiment", "baseline")
    return [(a, float(rng.random() < (p_exp if a == "experiment" else p_base))) for a in arms]


def test_promotion_rollback_and_window():
    loop = LoopConfig(window=400)
    better = live_test(log(stream(300, 0.3, 0.9)), loop)
    assert better["decision"] == "promote" and better["sequential"]["p_value"] <= 0.01
    assert "significantly better" in better["reason"] and better["sequential"]["decided_at"] < 100
    worse = live_test(log(stream(300, 0.8, 0.2)), loop)
    assert worse["decision"] == "rollback" and "significantly worse" in worse["reason"]
    same = live_test(log(stream(400, 0.5, 0.5, seed=3)), loop)
    assert same["decision"] == "rollback" and same.get("inconclusive") and "inconclusive after 400" in same["reason"]
    early = live_test(log(stream(40, 0.5, 0.5, seed=3)), loop)
    assert early["decision"] is None and early["outcomes"] == 40
    # the last outcome of a session counts, in the order sessions first got one
    rows = log([("baseline", 0.0), ("experiment", 0.0)])
    rows.append({"event": "feedback", "session": "s1", "arm": "experiment", "reward": 1.0, "success": True})
    assert live_test(rows, loop)["arms"]["experiment"]["mean"] == 1.0
    # an outcome for a session served before this test began (the server keeps those: it was served)
    # belongs to the arm that served it, not to this test's arm of the same name
    rows.append({"event": "feedback", "session": "before", "arm": "experiment", "reward": 0.0, "success": False})
    r = live_test(rows, loop)
    assert r["outcomes"] == 2 and r["arms"]["experiment"]["mean"] == 1.0


def test_guards_roll_back_with_their_reason():
    loop = LoopConfig(guard_min_calls=20)
    same = stream(60, 0.5, 0.5, seed=1)
    r = live_test(log(same, errors=(0.0, 0.5)), loop)
    assert r["decision"] == "rollback" and r["guard"] and "error rate" in r["reason"]
    r = live_test(log(same, latency=(0.5, 2.0)), loop)
    assert r["decision"] == "rollback" and "p95 latency" in r["reason"]
    r = live_test(log(same, tokens=(100, 300)), loop)
    assert r["decision"] == "rollback" and "cost per session" in r["reason"]
    assert live_test(log(same), loop)["decision"] is None  # no guard trips on equal arms
    few = stream(6, 0.5, 0.5, seed=1)  # too few calls for a guard to judge
    assert live_test(log(few, errors=(0.0, 1.0)), loop)["decision"] is None


def test_the_test_is_found_by_its_arms():
    rows = [{"event": "config", "arms": {"baseline": {"spec": P}}}, {"event": "assign", "session": "x", "arm": "baseline"}]
    assert rows_of_test(rows, P, C) is None  # not started yet
    test = log(stream(10, 0.5, 0.5))
    rows += test + [{"event": "restart"}, {"event": "assign", "session": "late", "arm": "baseline"}]
    found = rows_of_test(rows, P, C)
    assert found[0] == test[0] and found[-1]["session"] == "late"
    assert rows_of_test(rows + [{"event": "config", "arms": {"baseline": {"spec": C}}}], P, C) is None
