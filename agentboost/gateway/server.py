"""The gateway's HTTP server: OpenAI chat completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``), streaming and not, with tools and
parallel tool calls, and ``/v1/models``; one session per episode.

A request names its session by path (``/s/{session}/v1/...``: the path is a capability, 128 random
bits, never logged), by its per-episode key (``Authorization: Bearer <key>`` or Anthropic's
``x-api-key``, on ``/v1/...``) or by the ``X-Agentboost-Session`` header. A key given beside a
session path must be that session's. An unknown session or a wrong key is 401, a finished session
409; bad input is 400 with a one-line reason; a body past ``max_request_bytes`` is 413 before
anything is parsed. The run's sampling settings always win: a client's temperature, top-p, max
tokens, stop or seed are counted in the record (``metadata.gateway.ignored_client_settings``) and
change nothing. Every protocol goes through the same session and trainable model, so the record is
the same whichever one the client speaks.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from typing import Any

from aiohttp import web

from ..agents.chat_rendering import ChatRenderer
from ..agents.trainable_model import EpisodeLimitReached, PromptTooLong, TrainableModel
from ..episodes.record import Episode
from ..sampling.completions_server import BackgroundServer
from ..sampling.protocol import PromptTooLongError, Sampler, SamplerError, SamplingParams
from .anthropic_messages import Messages
from .openai_messages import ChatCompletions
from .openai_responses import Responses
from .protocol import BadRequest, Protocol, Reply, TooLarge, error, read_json
from .session import Session, SessionState

log = logging.getLogger(__name__)
SESSION_HEADER = "X-Agentboost-Session"
# an agent's whole history comes with every call: a 32k-token context is about 130 KiB of text, and
# a larger body would only be tokenised for seconds before the context limit refused it
MAX_REQUEST_BYTES = 1 << 20
PROTOCOLS: tuple[Protocol, ...] = (ChatCompletions(), Responses(), Messages())


def request_key(request: web.Request) -> str | None:
    """The key a request carries: a bearer token, or Anthropic's ``x-api-key``."""
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key") or None


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Gateway(BackgroundServer):
    """``open_session(task)`` -> a session whose ``base_url(gateway)`` and ``key`` the agent gets;
    ``finish(session)`` -> its episode record. Every session samples from ``sampler`` with the
    run's ``sampling`` settings through a trainable model built as ``model_options`` say
    (``tool_parser``, ``reasoning``, ``max_model_calls``, ``max_response_tokens``).
    ``max_request_bytes``: larger bodies get 413."""

    _thread_name = "agentboost-gateway"
    _handler_cancellation = True  # a client gone mid-call: the call is cancelled, the episode incomplete

    def __init__(self, sampler: Sampler, renderer: ChatRenderer, sampling: SamplingParams,
                 model_name: str = "agentboost-policy", max_request_bytes: int = MAX_REQUEST_BYTES,
                 **model_options: Any):
        self.sampler, self.renderer, self.sampling = sampler, renderer, sampling
        self.model_name = model_name
        self.model_options = model_options
        self.sessions: dict[str, Session] = {}
        self._by_key: dict[str, Session] = {}
        self._registry = threading.Lock()  # sessions open and finish from the host's threads
        self.app = web.Application(client_max_size=max_request_bytes)
        for prefix in ("/s/{session}/v1", "/v1"):
            for protocol in PROTOCOLS:
                self.app.router.add_post(prefix + protocol.route, self._handler(protocol))
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

    def base_url(self, session: Session, by: str = "path", api: str = "openai") -> str:
        """The base URL a client is given: the session in the path, or (``by="key"``) the plain
        root where the key names it. ``api="anthropic"``: without the ``/v1``, which Anthropic's
        clients add themselves."""
        assert self.url is not None, "the gateway is not serving"
        root = f"{self.url}/s/{session.id}" if by == "path" else self.url
        return root if api == "anthropic" else root + "/v1"

    def finish(self, session: Session | str) -> Episode:
        """Close the session (later calls get 409) and return its episode record."""
        s = self.sessions[session] if isinstance(session, str) else session
        with self._registry:
            s.state = SessionState.FINISHED
            self._by_key.pop(s.key, None)
        return s.episode()

    def _session(self, request: web.Request) -> Session:
        sid = request.match_info.get("session") or request.headers.get(SESSION_HEADER)
        key = request_key(request)
        with self._registry:
            s = self.sessions.get(sid) if sid else None
            if s is None and not sid and key:
                s = self._by_key.get(key)
                if s is None:  # a finished session's key no longer names it: look it up for the 409
                    s = next((x for x in self.sessions.values() if x.key == key), None)
        if s is None:
            raise _Refused(401, "unknown session: give the episode's base URL (/s/{session}/v1) or its key as "
                                "the bearer token (or x-api-key)")
        if key is not None and not hmac.compare_digest(key.encode(), s.key.encode()):
            # the path is a capability; a key beside it is checked, never ignored
            raise _Refused(401, "the key given is not this session's (give the session's own key, or none "
                                "with the session path)")
        if s.state != SessionState.OPEN:
            raise _Refused(409, f"session of episode {s.episode_id} is finished: its episode is recorded")
        return s

    # -- endpoints --------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        if request.match_info.get("session") or request.headers.get(SESSION_HEADER):
            try:
                self._session(request)
            except _Refused as e:
                return error(PROTOCOLS[0], e.status, e.message)
        return web.json_response({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                              "owned_by": "agentboost"}]})

    async def _finish(self, request: web.Request) -> web.Response:
        """The agent's own end of the episode: ``{"output": ...}`` is kept with the record."""
        try:
            s = self._session(request)
            body = await read_json(request, "Gateway(max_request_bytes=...)") if request.can_read_body else {}
        except _Refused as e:
            return error(PROTOCOLS[0], e.status, e.message)
        except TooLarge as e:
            return error(PROTOCOLS[0], 413, str(e))
        except BadRequest as e:
            return error(PROTOCOLS[0], 400, str(e))
        s.output = body.get("output") if isinstance(body, dict) else body
        self.finish(s)
        return web.json_response({"episode_id": s.episode_id, "status": "finished"})

    def _handler(self, protocol: Protocol):
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._call(request, protocol)

        return handle

    async def _call(self, request: web.Request, protocol: Protocol) -> web.StreamResponse:
        """One model call in any protocol: the session, the request parsed by the protocol, the
        call through the session's trainable model, the answer in the protocol's form."""
        try:
            s = self._session(request)
            body = await read_json(request, "Gateway(max_request_bytes=...)")
            call = protocol.parse(body)
            if call.previous_response_id is not None:
                try:
                    call.messages = [*s.history(call.previous_response_id), *call.messages]
                except KeyError:
                    raise BadRequest(f"previous_response_id {call.previous_response_id!r} is not a response this "
                                     "session kept (store: false, or another session's)") from None
        except _Refused as e:
            return error(protocol, e.status, e.message)
        except TooLarge as e:
            return error(protocol, 413, str(e))
        except BadRequest as e:
            return error(protocol, 400, str(e))
        if call.ignored:
            s.ignored_settings.update(call.ignored)
            log.info("episode %s: client settings %s ignored (the run's settings win)", s.episode_id, call.ignored)
        if s.lock is None:
            s.lock = asyncio.Lock()
        reply = Reply(self.model_name, protocol.new_id(), self._token_text)
        async with s.lock:
            if s.state != SessionState.OPEN:
                return error(protocol, 409, f"session of episode {s.episode_id} is finished: its episode is recorded")
            keep = reply.id if protocol.keeps_responses and call.options.get("store", True) else None
            try:
                turn = await s.sample(call.messages, call.system, call.tools, keep_as=keep)
            except (EpisodeLimitReached, PromptTooLong, PromptTooLongError) as e:
                return error(protocol, 400, f"the episode ended: {e}")
            except SamplerError as e:
                return error(protocol, 502, f"the policy could not sample: {e}")
        return await s.deliver(request, protocol, turn, call, reply)

    def _token_text(self, token_id: int) -> str:
        return self.renderer.decode([token_id])

    # -- running ----------------------------------------------------------------------------


    def __enter__(self) -> "Gateway":
        self.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()
