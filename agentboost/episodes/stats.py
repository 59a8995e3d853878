"""Statistics over any episodes (statuses, tool calls by name). The code agents' tables live
beside the code reward (``environments.code_reward.code_stats``)."""

from __future__ import annotations

from collections import Counter

from .record import Episode

# The seed's "submitted without / after testing" table, for agents whose tools are not code tools:
# did the episode use a tool before it ended, and did it succeed.
TOOL_USE_ROWS = ("no tool call", "tool call, then success", "tool call, no success")


def tool_use_category(ep: Episode) -> str:
    if not ep.tool_calls:
        return TOOL_USE_ROWS[0]
    return TOOL_USE_ROWS[1] if ep.succeeded else TOOL_USE_ROWS[2]


def generic_stats(episodes: list[Episode]) -> dict[str, Counter]:
    return {
        "statuses": Counter(ep.status for ep in episodes),
        "tools": Counter((t.name, "ok" if t.ok else "error") for ep in episodes for t in ep.tool_calls),
        "tool_use": Counter(tool_use_category(ep) for ep in episodes),
        "tool_use_no_call_success": Counter(ep.succeeded for ep in episodes if not ep.tool_calls),
    }
