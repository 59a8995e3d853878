"""tau2's gold actions replayed through the Strands tools an agent gets, against tau2's own
environment replaying the same actions: the check that agentboost's tau2 tools act on a task's
database exactly as tau2's do (after every task, both database hashes agree, the user's too).

``replay_gold`` replays the tasks it is given. The tests replay a sample of each domain
(``gold_sample``: every tool the gold actions use, and the longest gold runs;
tests/environments/tau2/test_tau2.py); ``benchmarks/tau2_gold_replay.py`` replays every task of
every domain.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import domain as td


def gold_actions(row: dict) -> list[dict[str, Any]]:
    """The task's gold actions (name, arguments, requestor), in order; [] where it has none."""
    return (row.get("evaluation_criteria") or {}).get("actions") or []


def run_strands_tool(tool, call_id: str, arguments: dict, invocation_state: dict | None = None) -> dict:
    """One call through Strands' own tool path (input validation, context injection, result); an
    agent's event loop puts itself (and the episode runner the task) in the invocation state.
    Returns the last event (``{"tool_result": ...}``)."""
    from strands.types.tools import ToolUse

    async def go():
        last = None
        async for ev in tool.stream(ToolUse(toolUseId=call_id, name=tool.tool_name, input=arguments),
                                    invocation_state or {"agent": None}):
            last = ev
        return last

    return asyncio.run(go())


def gold_sample(rows: list[dict], longest: int = 2) -> list[dict]:
    """A small sample whose replay still calls every tool the gold actions of ``rows`` use: a greedy
    cover of those tools (the task calling the most not yet covered, first in order on a tie), plus
    the ``longest`` tasks with the most gold actions (state built up over many calls)."""
    names = [{a["name"] for a in gold_actions(r)} for r in rows]
    left, chosen = set().union(*names) if names else set(), []
    while left:
        i = max(range(len(rows)), key=lambda i: (len(names[i] & left), -i))
        chosen.append(i)
        left -= names[i]
    by_length = sorted(range(len(rows)), key=lambda i: (-len(gold_actions(rows[i])), i))
    chosen += [i for i in by_length if i not in chosen][:longest]
    return [rows[i] for i in sorted(chosen)]


def replay_gold(domain: str, rows: list[dict], recheck: int = 5) -> list[str]:
    """Replays each row's gold actions through the Strands tools of an agent spec (``episode_tools``:
    one set for all episodes, each episode's calls acting on its own session, found by its agent and
    task) and through tau2's own environment; returns what differs (empty: every hash agrees). For
    the first ``recheck`` rows, the trajectory the tools recorded must also replay on a fresh
    environment to the same state."""
    mod = td._domain_module(domain)
    tools = {t.tool_name: t for t in td.episode_tools(domain)}
    if td.new_environment(domain).user_tools is not None:
        tools.update({t.tool_name: t for t in td.episode_tools(domain, "user")})
    problems = []
    for n, row in enumerate(rows):
        agent = type("Agent", (), {})()  # one per episode, as the session registry keys on it
        session = td.session_of(agent, row)
        state = {"agent": agent, "task": row}
        task = td.task_from_row(row)
        initial = task.initial_state
        ref = mod.get_environment()  # tau2's own environment and replay
        ref.set_state(initial.initialization_data if initial else None,
                      initial.initialization_actions if initial else None,
                      initial.message_history or [] if initial else [])
        for i, a in enumerate(gold_actions(row)):
            result = run_strands_tool(tools[a["name"]], f"g{i}", a["arguments"], state)
            if result["tool_result"]["status"] != "success":
                problems.append(f"{row['task_id']}: gold action {i} ({a['name']}) failed: {result['tool_result']}")
            try:
                ref.make_tool_call(a["name"], requestor=a.get("requestor", "assistant"), **a["arguments"])
            except Exception:  # tau2's orchestrator records a failing call as an error and goes on; so
                pass  # does this replay. Whether both agree is what the hash comparison below decides
            ref.sync_tools()
        if session.env.get_db_hash() != ref.get_db_hash():
            problems.append(f"{row['task_id']}: database hash differs from tau2's replay")
        if session.env.get_user_db_hash() != ref.get_user_db_hash():
            problems.append(f"{row['task_id']}: user database hash differs from tau2's replay")
        if n < recheck:
            history = [td.message_from_tau2(m) for m in (row.get("initial_state") or {}).get("message_history") or []]
            again = td.initial_environment(row, history=history + session.messages)
            if again.get_db_hash() != session.env.get_db_hash():
                problems.append(f"{row['task_id']}: the recorded trajectory replays to another state")
    return problems
