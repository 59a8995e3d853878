"""One episode behind the gateway: its lineages of trainable-model state, what the client asked
for and was refused or ignored, and the record it becomes.

A lineage is one conversation with the policy: the trainable model's state for one system prompt.
A request goes to the lineage under the same system prompt; a request that carries on the latest
lineage's conversation under another system prompt stays in it (a counted ``changed_system_prompt``
split); anything else (a subagent with its own system prompt) opens a lineage of its own, so a
subagent is never a reset of its parent. The record lists each lineage's calls in turn.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from ..agents.recording import record_calls
from ..agents.trainable_model import EpisodeLimitReached, PromptTooLong, SampledTurn, TrainableModel, extends_history
from ..episodes.record import Episode, Status
from ..sampling.protocol import PromptTooLongError, SamplerError
from .protocol import Call, Protocol, Reply, send


class SessionState:
    OPEN = "open"
    FINISHED = "finished"


@dataclass
class Lineage:
    model: TrainableModel
    # the last request (messages, system prompt, tools) and its answer, for an identical resend
    last_request: tuple | None = None
    last_turn: SampledTurn | None = None


@dataclass
class Session:
    """``new_model`` builds a fresh trainable model (the run's sampler, renderer, sampling settings
    and limits) for each lineage."""

    new_model: Callable[[], TrainableModel]
    task: dict[str, Any] = field(default_factory=dict)
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    group_id: str | None = None
    # the path segment (/s/{id}/v1) and the bearer key: both unguessable, each names the session
    id: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    key: str = field(default_factory=lambda: "ab-" + secrets.token_urlsafe(24))
    state: str = SessionState.OPEN
    lineages: list[Lineage] = field(default_factory=list)
    ignored_settings: Counter = field(default_factory=Counter)  # client sampling settings, logged and ignored
    resends: int = 0  # identical resends whose answer replaced the previous one
    incomplete: str | None = None  # why the episode cannot be trained on (a client gone mid-call)
    failure: tuple[Status, str] | None = None  # a limit or a sampler error that ended the episode
    output: Any = None  # what the agent returned (posted to finish, or the runner's)
    last_messages: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    lock: asyncio.Lock | None = None  # created on the gateway's loop: one call at a time per session
    # Responses API: response id -> the conversation it ends (its input and its answer), which a
    # later request's previous_response_id continues
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # called with the session before each answer is sent (``serve --record``'s write-ahead record:
    # what a client may have seen is on disk before it can see it)
    before_delivery: Callable[["Session"], None] | None = None

    def lineage_for(self, messages: list[dict[str, Any]], system: str | None) -> Lineage:
        for lineage in reversed(self.lineages):
            if (lineage.model._prev_system or None) == (system or None):
                return lineage
        if self.lineages:
            last = self.lineages[-1]
            prev = last.model._prev_messages or []
            if prev and extends_history(messages, prev):
                return last  # the same conversation under another system prompt: a counted split
        model = self.new_model()
        model.copy_history = False  # each request's messages are parsed anew and never changed afterwards
        lineage = Lineage(model)
        self.lineages.append(lineage)
        return lineage

    def history(self, response_id: str) -> list[dict[str, Any]]:
        """The conversation a kept response ends (KeyError when this session gave no such response,
        or was asked not to keep it)."""
        return self.responses[response_id]

    async def call(self, messages: list[dict[str, Any]], system: str | None,
                   tool_specs: list[dict[str, Any]] | None, keep_as: str | None = None) -> SampledTurn:
        """One model call of this episode through the trainable model's core, whatever protocol the
        request came in. An identical resend of the lineage's last request (a client retrying after
        a lost answer) replaces that call. ``keep_as``: the answer's id, under which the
        conversation it ends is kept for a later ``previous_response_id``."""
        lineage = self.lineage_for(messages, system)
        # each request's messages are parsed anew (by its protocol's module) and never changed
        # afterwards: kept and compared as they are, no copy (a call's overhead; the trainable
        # model keeps its own copy)
        key = (messages, system, tool_specs)
        if key == lineage.last_request and lineage.last_turn is not None:
            lineage.model.undo_last_call(lineage.last_turn)
            self.resends += 1
        turn = await lineage.model.sample_turn(messages, tool_specs, system)
        lineage.last_request, lineage.last_turn = key, turn
        self.last_messages = [*messages, {"role": "assistant", "content": turn.blocks()}]
        if keep_as is not None:
            self.responses[keep_as] = self.last_messages
        return turn

    async def sample(self, messages: list[dict[str, Any]], system: str | None,
                     tool_specs: list[dict[str, Any]] | None, keep_as: str | None = None) -> SampledTurn:
        """``call``, keeping on the session what ended its episode (re-raised for the caller's
        error answer): a limit (``truncated``), a sampler error (``error``), a client gone
        mid-call (``incomplete``: never trained on). The gateway and ``serve`` call through here,
        so a served session's record says what a gateway episode's would."""
        try:
            return await self.call(messages, system, tool_specs, keep_as=keep_as)
        except (EpisodeLimitReached, PromptTooLong, PromptTooLongError) as e:
            self.failure = (Status.TRUNCATED, str(e))
            raise
        except SamplerError as e:
            self.failure = (Status.ERROR, f"sampler: {e}")
            raise
        except asyncio.CancelledError:
            self.incomplete = "the client disconnected during a call"
            raise

    async def deliver(self, request: web.Request, protocol: Protocol, turn: SampledTurn, call: Call, reply: Reply,
                      headers: dict[str, str] | None = None) -> web.StreamResponse:
        """Send a sampled turn; a turn whose delivery is uncertain (the client gone before or
        while it was sent) makes the episode ``incomplete``: what the agent saw next is unknown."""
        if not call.stream and (request.transport is None or request.transport.is_closing()):
            self.incomplete = "the client disconnected before the answer reached it"
        if self.before_delivery is not None:
            self.before_delivery(self)
        try:
            return await send(request, protocol, turn, call, reply, headers=headers)
        except (ConnectionError, asyncio.CancelledError):
            self.incomplete = "the client disconnected during a streamed answer"
            raise

    def num_calls(self) -> int:
        return sum(len(lineage.model.calls) for lineage in self.lineages)

    def episode(self) -> Episode:
        """The episode record (calls, segments, split reasons, tool calls, final answer); the host
        scores it with the run's reward."""
        ep = Episode(episode_id=self.episode_id, task_id=str(self.task.get("task_id", self.episode_id)),
                     group_id=self.group_id or str(self.task.get("task_id", self.episode_id)))
        ep.timings["wall_s"] = time.perf_counter() - self.started
        record_calls(ep, [lineage.model for lineage in self.lineages], self.last_messages)
        if self.failure is not None:
            ep.status, ep.error = self.failure
        if self.incomplete is not None:
            # never trained on: the agent did not see the last answer, so what follows is unknown
            ep.status, ep.error = Status.INCOMPLETE, self.incomplete
        ep.metadata["gateway"] = {"lineages": len(self.lineages), "resends": self.resends,
                                  "ignored_client_settings": dict(self.ignored_settings),
                                  "incomplete": self.incomplete is not None}
        if self.output is not None:
            ep.metadata["agent_output"] = self.output
        return ep
