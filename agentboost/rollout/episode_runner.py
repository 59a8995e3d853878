"""Running one agent episode against a sampler and recording it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

from ..agents.chat_rendering import ChatRenderer
from ..agents.http_agent import HttpAgentSpec
from ..agents.recording import final_answer, jsonable, record_calls, tool_call_records  # noqa: F401 (their former home)
from ..agents.strands_agent import StrandsAgentSpec
from ..agents.trainable_model import EpisodeLimitReached, TrainableModel
from ..environments.strands_env import ConversationEnded, StrandsEnv
from ..episodes.record import Episode, Status
from ..models.chat import ChatModelSpec, is_outage, redact
from ..sampling.protocol import (
    PromptTooLongError,
    Sampler,
    SamplerError,
    SamplingParams,
    derive_seed,
)


def _causes(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


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


def _cause_text(e: BaseException) -> str:
    """The innermost cause, which names what failed (Strands wraps it in its own exceptions)."""
    inner = list(_causes(e))[-1]
    return f"{type(inner).__name__}: {inner}"[:1000]


def classify_failure(e: Exception, model: TrainableModel | None) -> tuple[Status, str]:
    """Strands wraps what fails inside its event loop; look through the chain for the cause."""
    from strands.types.exceptions import MaxTokensReachedException

    if is_outage(e):  # the serving side, not the agent: never a wrong answer
        return Status.ABORTED, f"serving side unavailable: {_cause_text(e)}"
    for c in _causes(e):
        if isinstance(c, EpisodeLimitReached):
            return Status.TRUNCATED, str(c)
        if isinstance(c, MaxTokensReachedException):
            return Status.TRUNCATED, "a model turn hit its max_new_tokens limit"
        if isinstance(c, PromptTooLongError):
            return Status.TRUNCATED, f"the prompt outgrew the policy server's context: {c}"
        if isinstance(c, SamplerError):
            return Status.ERROR, f"sampler: {c}"
    if model is not None and model.calls and model.calls[-1].finish_reason == "length":
        return Status.TRUNCATED, "a model turn hit its max_new_tokens limit"
    return Status.ERROR, f"{type(e).__name__}: {e}"


async def _play(agent, spec, env: StrandsEnv | None, task: dict[str, Any], conversation, state: dict) -> None:
    """The agent on the task, within the episode's time limit: one prompt, or the environment's
    conversation (a simulated user) when it has one."""
    if conversation is None:
        prompt = env.first_message(task) if env is not None else task["question"]
        await asyncio.wait_for(agent.invoke_async(prompt, invocation_state=state), timeout=spec.timeout_s)
    else:
        conversation.setup(agent)
        await asyncio.wait_for(_converse(agent, conversation, state), timeout=spec.timeout_s)


async def run_episode(spec: StrandsAgentSpec | HttpAgentSpec, task: dict[str, Any], sampler: Sampler,
                      renderer: ChatRenderer, sampling: SamplingParams, env: StrandsEnv | None = None, group_id: str | None = None,
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
    if isinstance(spec, HttpAgentSpec):  # its own process, through a gateway session: the same record
        from ..gateway.http_episode import run_http_episode

        ep = await run_http_episode(spec, task, sampler, renderer, sampling, env=env, group_id=group_id,
                                    episode_id=episode_id, always_extend=always_extend,
                                    sequence_budget=sequence_budget, score=score, sample=sample)
        ep.metadata["sample"] = sample  # as below: what a resumed evaluation matches on
        return ep
    if sampling.seed is not None:
        sampling = dataclasses.replace(sampling, seed=derive_seed(sampling.seed, str(task["task_id"]), sample))
    model = TrainableModel(sampler, renderer, sampling, tool_parser=spec.tool_parser, reasoning=spec.reasoning,
                           max_model_calls=spec.max_model_calls, max_response_tokens=spec.max_response_tokens,
                           always_extend=always_extend, sequence_budget=sequence_budget)
    ep = Episode(episode_id=episode_id or uuid.uuid4().hex, task_id=str(task["task_id"]),
                 group_id=group_id or str(task["task_id"]))
    ep.metadata["sample"] = sample  # which of the task's samples: what a resumed evaluation matches on
    t0 = time.perf_counter()
    agent = None
    tool_outcomes: dict[str, str] = {}
    conversation = None
    try:
        conversation = env.new_conversation(task, policy=(sampler, renderer.tokenizer)) if env is not None else None
        agent = spec.build(model)
        # tools see the task (e.g. its public tests) and report finer outcomes through this state
        await _play(agent, spec, env, task, conversation, {"task": task, "tool_outcomes": tool_outcomes})
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


async def run_chat_episode(spec: StrandsAgentSpec, task: dict[str, Any], chat: ChatModelSpec, sampling: SamplingParams,
                           env: StrandsEnv | None = None, group_id: str | None = None,
                           episode_id: str | None = None, sample: int = 0) -> Episode:
    """The agent on one task with a chat model we do not train (``agentboost.models.chat``) in place of
    the trainable model: the same agent, tools, conversation and reward, recorded as text
    (``metadata["text_level"]``, no calls or segments: never an RL row). The sampling settings
    and the per-(task, sample) seed are the policy's, so a baseline is sampled like the model it is
    compared with. An outage of the model's service ends it ``aborted``."""
    seed = derive_seed(sampling.seed, str(task["task_id"]), sample) if sampling.seed is not None else None
    ep = Episode(episode_id=episode_id or uuid.uuid4().hex, task_id=str(task["task_id"]),
                 group_id=group_id or str(task["task_id"]))
    ep.metadata.update(text_level={"provider": chat.provider, "model_id": chat.model_id}, sample=sample)
    t0 = time.perf_counter()
    agent = None
    tool_outcomes: dict[str, str] = {}
    conversation = None
    try:
        # a call's limit is the policy's per-turn one (max_response_tokens is the episode's, all
        # calls together: as a per-call max_tokens it is refused by servers with a shorter context)
        model = chat.build(temperature=sampling.temperature, top_p=sampling.top_p,
                           max_tokens=min(sampling.max_new_tokens, spec.max_response_tokens), seed=seed)
        conversation = env.new_conversation(task) if env is not None else None
        agent = spec.build(model)
        await _play(agent, spec, env, task, conversation, {"task": task, "tool_outcomes": tool_outcomes})
    except asyncio.TimeoutError:
        ep.status, ep.error = Status.TIMEOUT, f"episode exceeded its {spec.timeout_s:g} s limit"
    except Exception as e:
        if not _conversation_ended(e):
            status, error = classify_failure(e, None)
            ep.status, ep.error = status, redact(error, chat)
    ep.timings["wall_s"] = time.perf_counter() - t0
    messages = list(agent.messages)[len(spec.history):] if agent is not None else []
    ep.messages = jsonable(messages)
    if agent is not None:  # what an SFT row rendered from the text needs besides the messages
        usage = agent.event_loop_metrics.accumulated_usage  # the provider's own count: what is billed
        ep.metadata["text_level"].update(system_prompt=agent.system_prompt,
                                         tool_specs=jsonable(agent.tool_registry.get_all_tool_specs()),
                                         usage={"input_tokens": int(usage.get("inputTokens", 0)),
                                                "output_tokens": int(usage.get("outputTokens", 0))})
    ep.tool_calls = tool_call_records(messages, tool_outcomes)
    ep.final_answer = final_answer(messages)
    if conversation is not None:
        ep.metadata["conversation"] = conversation.record(agent)
    if env is not None and not ep.aborted:
        t1 = time.perf_counter()
        env.score(task, ep)
        ep.timings["reward_s"] = time.perf_counter() - t1
    return ep
