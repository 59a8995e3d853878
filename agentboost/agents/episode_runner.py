"""Running one agent episode against a sampler and recording it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections import Counter
from typing import Any

from ..environments.strands_env import ConversationEnded, StrandsEnv
from ..episodes.record import Episode, Status, ToolCallRecord, build_segments
from ..reasoning import UNTERMINATED_REASONING
from ..sampling.protocol import (
    PromptTooLongError,
    Sampler,
    SamplerError,
    SamplingParams,
    derive_seed,
)
from .chat_rendering import ChatRenderer
from .strands_agent import StrandsAgentSpec
from .trainable_model import EpisodeLimitReached, TrainableModel


def _jsonable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _causes(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def record_calls(ep: Episode, models: list[TrainableModel], messages: list[dict[str, Any]],
                 tool_outcomes: dict[str, str] | None = None, always_extend: bool = False) -> None:
    """Fill ``ep`` from what its trainable models recorded and the conversation's Strands messages:
    calls, segments, splits and their reasons, tool calls, the final answer. The one place an
    episode record is assembled, in-process (one model) and behind the gateway (one model per
    lineage: a subagent with its own system prompt; its calls follow its parent's)."""
    calls = [c for m in models for c in m.calls]
    ep.timings["model_s"] = sum(c.latency_s for c in calls)
    ep.messages = _jsonable(messages)
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


async def _converse(agent, conversation, state: dict[str, Any]) -> None:
    """A multi-turn episode: each user message (from the conversation's user simulator) starts an
    agent turn; the trainable model appends it as a user turn (loss mask 0) to the same token
    sequence; "" lets the agent go on without one. Ends when the conversation says so (None), or by
    a limit raised inside a turn."""
    message = await conversation.next_user_message(agent)
    while message is not None:
        # "" : no new message, the agent goes on from what it has (e.g. a solo run's first turn)
        await agent.invoke_async(message or None, invocation_state=state)
        message = await conversation.next_user_message(agent)


def _conversation_ended(e: BaseException) -> bool:
    return any(isinstance(c, ConversationEnded) for c in _causes(e))


def classify_failure(e: Exception, model: TrainableModel) -> tuple[Status, str]:
    """Strands wraps what fails inside its event loop; look through the chain for the cause."""
    from strands.types.exceptions import MaxTokensReachedException

    for c in _causes(e):
        if isinstance(c, EpisodeLimitReached):
            return Status.TRUNCATED, str(c)
        if isinstance(c, MaxTokensReachedException):
            return Status.TRUNCATED, "a model turn hit its max_new_tokens limit"
        if isinstance(c, PromptTooLongError):
            return Status.TRUNCATED, f"the prompt outgrew the policy server's context: {c}"
        if isinstance(c, SamplerError):
            return Status.ERROR, f"sampler: {c}"
    if model.calls and model.calls[-1].finish_reason == "length":
        return Status.TRUNCATED, "a model turn hit its max_new_tokens limit"
    return Status.ERROR, f"{type(e).__name__}: {e}"


async def run_episode(spec: StrandsAgentSpec, task: dict[str, Any], sampler: Sampler, renderer: ChatRenderer,
                      sampling: SamplingParams, env: StrandsEnv | None = None, group_id: str | None = None,
                      episode_id: str | None = None, always_extend: bool = False,
                      sequence_budget: tuple[int, int] | None = None, score: bool = True,
                      sample: int = 0) -> Episode:
    """Run the agent on one task and score it with ``env`` (failed episodes are left unscored:
    the group policy gives them the failed reward). Never raises for what goes wrong inside the
    episode: the status and error say what happened, and the calls made so far are kept.
    ``always_extend`` and ``sequence_budget`` are the trainable model's (one sequence per episode,
    bounded as a padded row; the veRL agent loop uses them). ``score=False``: ``env`` gives the first
    message or the conversation, and the caller scores (the veRL agent loop, off its event loop).
    ``sample``: which of the task's samples this is; with a sampling seed, each (task, sample, call)
    gets its own derived request seed."""
    if sampling.seed is not None:
        sampling = dataclasses.replace(sampling, seed=derive_seed(sampling.seed, str(task["task_id"]), sample))
    model = TrainableModel(sampler, renderer, sampling, tool_parser=spec.tool_parser, reasoning=spec.reasoning,
                           max_model_calls=spec.max_model_calls, max_response_tokens=spec.max_response_tokens,
                           always_extend=always_extend, sequence_budget=sequence_budget)
    ep = Episode(episode_id=episode_id or uuid.uuid4().hex, task_id=str(task["task_id"]),
                 group_id=group_id or str(task["task_id"]))
    t0 = time.perf_counter()
    agent = None
    tool_outcomes: dict[str, str] = {}
    conversation = None
    try:
        conversation = env.new_conversation(task, policy=(sampler, renderer.tokenizer)) if env is not None else None
        agent = spec.build(model)
        # tools see the task (e.g. its public tests) and report finer outcomes through this state
        state = {"task": task, "tool_outcomes": tool_outcomes}
        if conversation is None:
            prompt = env.first_message(task) if env is not None else task["question"]
            await asyncio.wait_for(agent.invoke_async(prompt, invocation_state=state), timeout=spec.timeout_s)
        else:
            conversation.setup(agent)
            await asyncio.wait_for(_converse(agent, conversation, state), timeout=spec.timeout_s)
    except asyncio.TimeoutError:
        ep.status, ep.error = Status.TIMEOUT, f"episode exceeded its {spec.timeout_s:g} s limit"
    except Exception as e:  # the user's agent, tools or hooks included: recorded, never lost
        if not _conversation_ended(e):  # a conversation's limit is an ending, not a failure
            ep.status, ep.error = classify_failure(e, model)
    ep.timings["wall_s"] = time.perf_counter() - t0
    # the spec's history (a prompt policy's demonstrations) was the prompt, not this episode's doing
    messages = list(agent.messages)[len(spec.history):] if agent is not None else []
    if spec.history:
        ep.metadata["history_messages"] = len(spec.history)
    record_calls(ep, [model], messages, tool_outcomes, always_extend=always_extend)
    if conversation is not None:
        ep.metadata["conversation"] = conversation.record(agent)
    if env is not None and score:
        t1 = time.perf_counter()
        env.score(task, ep)
        ep.timings["reward_s"] = time.perf_counter() - t1
    return ep
