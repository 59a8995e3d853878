"""The ``code`` reward: hidden tests in the sandbox; pass-all 1.0 (``code_partial``: the passed
fraction). Public examples are graded only when the task sets ``grade_public``. All tests of an
answer run in one sandboxed judge process (``sandbox.judge.run_tests``); ``code`` stops at the first
failing test, ``code_partial`` runs them all. The metadata keeps each test's result (``tests``) and
the count of tests per verdict (``test_verdicts``).

Configure by registering a variant: ``register_reward("code_strict", partial(code_reward,
no_code_penalty=-0.2, total_time_s=30))``.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

from ..episodes.record import Episode
from ..sandbox.judge import extract_code, latest_code, run_tests, verdict_counts
from .code_tasks import task_limits, task_tests, task_tolerance
from .registry import RewardResult, graded_answer, missing_reason


def submitted_code(episode: Episode) -> str | None:
    """The last fenced code block of the final answer, else of the latest assistant message that has
    one; content only (a block inside the reasoning is never submitted)."""
    code = extract_code(graded_answer(episode).text)
    if code:
        return code
    for i in range(len(episode.messages), 0, -1):
        code = latest_code(episode.messages[:i])
        if code:
            return code
    return None


def code_reward(task: dict[str, Any], episode: Episode, partial_credit: bool = False,
                no_code_penalty: float = 0.0, per_test_s: float | None = None,
                total_time_s: float | None = 60.0) -> RewardResult:
    public, hidden = task_tests(task)
    # an example shown in the question is never graded
    graded_public = public[1:] if task.get("shown_public_example") else public
    tests = hidden + (graded_public if task.get("grade_public") else [])
    if not tests:
        raise ValueError(f"task {task.get('task_id')!r} has no tests to grade")
    tol = task_tolerance(task)
    code = submitted_code(episode)
    if code is None:
        answer = graded_answer(episode)
        reason = missing_reason(answer, extract_code(answer.reasoning) is not None, "no code block in the answer")
        return RewardResult(score=no_code_penalty, components={"outcome": no_code_penalty},
                            metadata={"verdict": "no_code", "passed": 0, "total": len(tests), "reason": reason})
    limits = task_limits(task, default_s=per_test_s or 4.0)
    outcomes = run_tests(code, tests, fn_name=task.get("fn_name"), limits=limits, total_time_s=total_time_s,
                         float_tol=tol, stop_on_failure=not partial_credit)
    passed = sum(o.passed for o in outcomes)
    all_passed = passed == len(tests)
    score = 1.0 if all_passed else (passed / len(tests) if partial_credit else 0.0)
    first = next((o for o in outcomes if not o.passed), None)
    return RewardResult(score=score, components={"outcome": score}, metadata={
        "verdict": "passed" if all_passed else first.verdict, "passed": passed, "total": len(tests),
        "first_failure": first.detail if first else None,
        "test_verdicts": verdict_counts(outcomes), "tests": [o.as_dict() for o in outcomes]})


# -- the seed's tool-usage tables for code agents (``agentboost stats``) ----------------------
CODE_TOOL = "test_code"
CATEGORIES = ("no code submitted", "submitted without testing", "submitted after testing")
OUTCOME_ROWS = (("successful tests", ("verified",)), ("wrong output", ("wrong_output",)),
                ("runtime error", ("runtime_error",)), ("other", None))


def code_category(ep: Episode) -> str:
    if submitted_code(ep) is None:
        return CATEGORIES[0]
    tested = any(t.name == CODE_TOOL for t in ep.tool_calls)
    return CATEGORIES[2] if tested else CATEGORIES[1]


def code_stats(episodes: list[Episode]) -> dict[str, Counter]:
    categories = Counter(code_category(ep) for ep in episodes)
    outcomes: Counter = Counter()
    for ep in episodes:
        for t in ep.tool_calls:
            if t.name != CODE_TOOL:
                continue
            row = next((name for name, keys in OUTCOME_ROWS if keys and t.outcome in keys), "other")
            outcomes[row] += 1
    return {"categories": categories, "outcomes": outcomes}


code_partial_reward = partial(code_reward, partial_credit=True)


# the trainer and `score` refuse to run these without an isolating sandbox (``require_isolation``)
code_reward.runs_model_code = True
code_partial_reward.runs_model_code = True
# a variant with a no_code_penalty (a partial of its own) declares no range unless its author says so
code_reward.reward_range = code_partial_reward.reward_range = (0.0, 1.0)
