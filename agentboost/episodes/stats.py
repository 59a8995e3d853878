"""Statistics over episodes of code tasks, as users of the seed know them, plus the generic ones."""

from __future__ import annotations

from collections import Counter

from .record import Episode

CODE_TOOL = "test_code"
CATEGORIES = ("no code submitted", "submitted without testing", "submitted after testing")
OUTCOME_ROWS = (("successful tests", ("verified",)), ("wrong output", ("wrong_output",)),
                ("runtime error", ("runtime_error",)), ("other", None))


def code_category(ep: Episode) -> str:
    from ..environments.code_reward import submitted_code

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


def generic_stats(episodes: list[Episode]) -> dict[str, Counter]:
    return {
        "statuses": Counter(ep.status for ep in episodes),
        "tools": Counter((t.name, "ok" if t.ok else "error") for ep in episodes for t in ep.tool_calls),
    }
