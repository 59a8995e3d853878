"""An episode record from what its trainable models recorded: calls, segments, split reasons, tool
calls, the final answer. The one place a record is assembled, for an agent built in-process
(``episode_runner``) and for one behind the gateway (``gateway.session``, one model per lineage)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ..episodes.record import Episode, ToolCallRecord, build_segments
from ..reasoning import UNTERMINATED_REASONING
from .trainable_model import TrainableModel


def jsonable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(messages, default=repr))


def tool_call_records(messages: list[dict[str, Any]], outcomes: dict[str, str] | None = None) -> list[ToolCallRecord]:
    """Pair every toolUse with its toolResult; a call without a result counts as failed.
    ``outcomes`` holds the finer verdicts tools reported by toolUseId (see strands_code_tool)."""
    outcomes = outcomes or {}
    uses: dict[str, str] = {}
    order: list[str] = []
    results: dict[str, dict[str, Any]] = {}
    for m in messages:
        for b in m.get("content") or []:
            if "toolUse" in b:
                uses[b["toolUse"]["toolUseId"]] = b["toolUse"]["name"]
                order.append(b["toolUse"]["toolUseId"])
            elif "toolResult" in b:
                results[b["toolResult"]["toolUseId"]] = b["toolResult"]
    records = []
    for tid in order:
        res = results.get(tid)
        if res is None:
            records.append(ToolCallRecord(name=uses[tid], ok=False, error="no result (episode ended first)"))
            continue
        ok = res.get("status") == "success"
        text = " ".join(c.get("text", "") for c in res.get("content") or [] if isinstance(c, dict))
        records.append(ToolCallRecord(name=uses[tid], ok=ok, error=None if ok else text[:500],
                                      outcome=outcomes.get(tid)))
    return records


def final_answer(messages: list[dict[str, Any]]) -> str | None:
    """The last assistant message's content: its text blocks (the trainable model puts the reasoning
    in a ``reasoningContent`` block, which is never an answer); None when it has none."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            texts = [b["text"] for b in m.get("content") or [] if "text" in b]
            return "".join(texts) if texts else None
    return None


def record_calls(ep: Episode, models: list[TrainableModel], messages: list[dict[str, Any]],
                 tool_outcomes: dict[str, str] | None = None, always_extend: bool = False) -> None:
    """Fill ``ep`` from what its trainable models recorded and the conversation's Strands messages:
    calls, segments, splits and their reasons, tool calls, the final answer. The one place an
    episode record is assembled, in-process (one model) and behind the gateway (one model per
    lineage: a subagent with its own system prompt; its calls follow its parent's)."""
    calls = [c for m in models for c in m.calls]
    ep.timings["model_s"] = sum(c.latency_s for c in calls)
    ep.messages = jsonable(messages)
    ep.calls = calls
    ep.segments = build_segments(calls)
    ep.num_splits = max(0, len(ep.segments) - 1)
    ep.tool_calls = tool_call_records(messages, tool_outcomes)
    ep.malformed_tool_calls = sum(m.malformed_tool_calls for m in models)
    ep.calls_in_reasoning = sum(m.calls_in_reasoning for m in models)
    ep.unterminated_reasoning = sum(m.unterminated_reasoning for m in models)
    ep.final_answer = final_answer(messages)
    if ep.final_answer is None and calls and calls[-1].reasoning_status == UNTERMINATED_REASONING:
        ep.final_answer_status = UNTERMINATED_REASONING  # a format failure, never graded from the reasoning
    ep.metadata["rerenders"] = sum(m.rerenders for m in models)
    if always_extend:
        forced: Counter = Counter()
        for m in models:
            forced.update(m.forced_extensions)
        ep.metadata["forced_extensions"] = dict(forced)
    ep.split_reasons = dict(Counter(c.rerender_reason for c in calls if c.rerendered))
