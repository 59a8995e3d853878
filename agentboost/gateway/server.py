"""The gateway's HTTP server: ``/v1/chat/completions`` (streaming and not, tools, parallel tool
calls) and ``/v1/models``, one session per episode.

A request names its session by path (``/s/{session}/v1/...``), by its per-episode bearer key
(``Authorization: Bearer <key>`` on ``/v1/...``) or by the ``X-Agentboost-Session`` header. An
unknown session is 401, a finished one 409; bad input is 400 with a one-line reason. The run's
sampling settings always win: a client's temperature, top-p, max tokens, stop or seed are counted
in the record (``metadata.gateway.ignored_client_settings``) and change nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from typing import Any

from aiohttp import web

from ..agents.chat_rendering import ChatRenderer
from ..agents.trainable_model import EpisodeLimitReached, PromptTooLong, TrainableModel
from ..episodes.record import Episode, Status
from ..files import loads_json
from ..sampling.completions_server import BackgroundServer
from ..sampling.protocol import PromptTooLongError, Sampler, SamplerError, SamplingParams
from .openai_messages import BadRequest, check_request, chunks, completion, to_strands
from .session import Session, SessionState

log = logging.getLogger(__name__)
SESSION_HEADER = "X-Agentboost-Session"
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # an agent's whole history comes with every call


class Gateway(BackgroundServer):
    """``open_session(task)`` -> a session whose ``base_url(gateway)`` and ``key`` the agent gets;
    ``finish(session)`` -> its episode record. Every session samples from ``sampler`` with the
    run's ``sampling`` settings through a trainable model built as ``model_options`` say
    (``tool_parser``, ``reasoning``, ``max_model_calls``, ``max_response_tokens``)."""

    _thread_name = "agentboost-gateway"
    _handler_cancellation = True  # a client gone mid-call: the call is cancelled, the episode incomplete

    def __init__(self, sampler: Sampler, renderer: ChatRenderer, sampling: SamplingParams,
                 model_name: str = "agentboost-policy", **model_options: Any):
        self.sampler, self.renderer, self.sampling = sampler, renderer, sampling
        self.model_name = model_name
        self.model_options = model_options
        self.sessions: dict[str, Session] = {}
        self._by_key: dict[str, Session] = {}
        self._registry = threading.Lock()  # sessions open and finish from the host's threads
        self.app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        for prefix in ("/s/{session}/v1", "/v1"):
            self.app.router.add_post(prefix + "/chat/completions", self._chat)
            self.app.router.add_get(prefix + "/models", self._models)
        self.app.router.add_post("/s/{session}/finish", self._finish)
        self.app.router.add_post("/finish", self._finish)
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- sessions ---------------------------------------------------------------------------
    def open_session(self, task: dict[str, Any] | None = None, episode_id: str | None = None,
                     group_id: str | None = None, sampling: SamplingParams | None = None) -> Session:
        """A new episode's session. ``sampling`` replaces the run's settings for this episode
        (e.g. a derived seed per task and sample)."""
        params = sampling or self.sampling

        def new_model() -> TrainableModel:
            return TrainableModel(self.sampler, self.renderer, params, **self.model_options)

        s = Session(new_model=new_model, task=dict(task or {}), group_id=group_id)
        if episode_id:
            s.episode_id = episode_id
        with self._registry:
            self.sessions[s.id] = s
            self._by_key[s.key] = s
        return s

    def base_url(self, session: Session, by: str = "path") -> str:
        """The base URL an OpenAI client is given: the session in the path, or (``by="key"``) the
        plain ``/v1`` where the bearer key names it."""
        assert self.url is not None, "the gateway is not serving"
        return f"{self.url}/s/{session.id}/v1" if by == "path" else f"{self.url}/v1"

    def finish(self, session: Session | str) -> Episode:
        """Close the session (later calls get 409) and return its episode record."""
        s = self.sessions[session] if isinstance(session, str) else session
        with self._registry:
            s.state = SessionState.FINISHED
            self._by_key.pop(s.key, None)
        return s.episode()

    def _session(self, request: web.Request) -> Session:
        sid = request.match_info.get("session") or request.headers.get(SESSION_HEADER)
        auth = request.headers.get("Authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        with self._registry:
            s = self.sessions.get(sid) if sid else None
            if s is None and not sid and key:
                s = self._by_key.get(key)
                if s is None:  # a finished session's key no longer names it: look it up for the 409
                    s = next((x for x in self.sessions.values() if x.key == key), None)
        if s is None:
            raise web.HTTPUnauthorized(text=_error_text(401, "unknown session: give the episode's base URL "
                                                              "(/s/{session}/v1) or its key as the bearer token"),
                                       content_type="application/json")
        if s.state != SessionState.OPEN:
            raise web.HTTPConflict(text=_error_text(409, f"session {s.id} is finished: its episode is recorded"),
                                   content_type="application/json")
        return s

    # -- endpoints --------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        if request.match_info.get("session") or request.headers.get(SESSION_HEADER):
            self._session(request)
        return web.json_response({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                              "owned_by": "agentboost"}]})

    async def _finish(self, request: web.Request) -> web.Response:
        """The agent's own end of the episode: ``{"output": ...}`` is kept with the record."""
        s = self._session(request)
        try:
            body = await request.json(loads=loads_json) if request.can_read_body else {}
        except ValueError:
            return _error(400, "request body is not valid JSON")
        s.output = body.get("output") if isinstance(body, dict) else body
        self.finish(s)
        return web.json_response({"episode_id": s.episode_id, "status": "finished"})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        s = self._session(request)
        try:
            body = await request.json(loads=loads_json)
        except ValueError:
            return _error(400, "request body is not valid JSON")
        try:
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            ignored = check_request(body)
            messages, system, tool_specs = to_strands(body)
        except BadRequest as e:
            return _error(400, str(e))
        if ignored:
            s.ignored_settings.update(ignored)
            log.info("session %s: client sampling settings %s ignored (the run's settings win)", s.id, ignored)
        if s.lock is None:
            s.lock = asyncio.Lock()
        async with s.lock:
            if s.state != SessionState.OPEN:
                return _error(409, f"session {s.id} is finished: its episode is recorded")
            try:
                turn = await s.call(messages, system, tool_specs)
            except (EpisodeLimitReached, PromptTooLong, PromptTooLongError) as e:
                s.failure = (Status.TRUNCATED, str(e))
                return _error(400, f"the episode ended: {e}")
            except SamplerError as e:
                s.failure = (Status.ERROR, f"sampler: {e}")
                return _error(502, f"the policy could not sample: {e}")
            except asyncio.CancelledError:
                s.incomplete = "the client disconnected during a call"
                raise
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        if not body.get("stream"):
            if request.transport is None or request.transport.is_closing():
                s.incomplete = "the client disconnected before the answer reached it"
            return web.json_response(completion(turn, self.model_name, cid))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await resp.prepare(request)
            for c in chunks(turn, self.model_name, cid, include_usage):
                await resp.write(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            s.incomplete = "the client disconnected during a streamed answer"
            raise
        return resp

    # -- running ----------------------------------------------------------------------------


    def __enter__(self) -> "Gateway":
        self.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()


def _error_text(status: int, message: str) -> str:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": status}})


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=_error_text(status, message), content_type="application/json")


