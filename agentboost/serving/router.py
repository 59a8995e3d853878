"""``agentboost serve``'s front: one policy, or two arms of an A/B test, behind the OpenAI chat API.

Routes: ``POST /v1/chat/completions`` (streaming and not, tools, parallel tool calls), ``GET
/v1/models``, ``POST /v1/feedback`` (a session's outcome), ``GET /v1/ab`` (the configuration and the
live report), ``POST /v1/ab/split`` (a new split, logged), ``GET /metrics`` (Prometheus, per arm).

Requests and answers are translated by the gateway's own functions (``gateway/openai_messages.py``)
and each session keeps the gateway's per-session trainable-model state (``gateway/session.py``), so
a served policy sees its conversation rendered exactly as in training and validation: the turns it
sampled come back as the tokens it sampled. Nothing is recorded for training; sessions idle the
longest are forgotten beyond ``max_sessions``.

A session is named by the ``X-Agentboost-Session`` header (a client's conversation id); without it
each request is a session of its own, whose id comes back in that header (for feedback). The arm
is sticky: it is drawn once per user (the request's ``user`` field) or else per session, when the
key is first seen, and kept. The n-th new key draws ``u_n = frac(r + n * phi)`` (the golden-ratio
sequence from a start ``r`` given by the salt) and goes to the experiment when ``u_n < split``: a
low-discrepancy sequence, so the observed share follows the setting within a point or two after a
few hundred sessions, where independent coin flips wander by two standard errors (±6 points at
200 sessions and a 30% split); the draws are still spread evenly over [0, 1) in any stretch of
arrivals, so neither arm gets the early or the late traffic.

Safe by default: loopback unless told otherwise, a bearer token (required off loopback), a
request size limit (413), a per-client rate limit (429) and per-arm error counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from aiohttp import web

from ..agents.trainable_model import EpisodeLimitReached, PromptTooLong, TrainableModel
from ..errors import InputError
from ..gateway.openai_messages import BadRequest, check_request, chunks, completion, to_strands
from ..gateway.server import SESSION_HEADER
from ..gateway.session import Session
from ..sampling.completions_server import BackgroundServer
from ..sampling.protocol import PromptTooLongError, SamplerError
from .policies import ARMS, ServedPolicy

log = logging.getLogger(__name__)
EVENTS = "ab.jsonl"  # in the serving directory: assignments, calls, feedback, split changes


class ServeInputError(InputError):
    pass


def check_split(split: Any) -> float:
    try:
        value = float(split)
    except (TypeError, ValueError):
        raise ServeInputError(f"split must be a number in [0, 1], got {split!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ServeInputError(f"split must be in [0, 1] (the experiment's share of sessions), got {value}")
    return value


PHI = (5 ** 0.5 - 1) / 2  # the golden ratio's fractional part: the most even rotation of [0, 1)


def draw(salt: str, n: int) -> float:
    """The n-th new key's draw in [0, 1) (n from 0): ``frac(r + n * phi)``, ``r`` from the salt."""
    start = int.from_bytes(hashlib.blake2b(salt.encode(), digest_size=8).digest(), "big") / 2**64
    return (start + n * PHI) % 1.0


class RateLimiter:
    """A token bucket per client: ``rate`` requests a second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int | None = None):
        self.rate, self.burst = rate, float(burst or max(1, int(rate * 2)))
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, client: str) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        ok = tokens >= 1.0
        self._buckets[client] = (tokens - 1.0 if ok else tokens, now)
        return ok


class Metrics:
    """Prometheus series per arm, in a registry of the router's own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("agentboost_serve_requests", "chat completion requests by arm and outcome",
                                ["arm", "outcome"], registry=self.registry)
        self.latency = Histogram("agentboost_serve_latency_seconds", "time to a whole answer, by arm", ["arm"],
                                 registry=self.registry,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.tokens = Counter("agentboost_serve_tokens", "prompt and completion tokens by arm", ["arm", "kind"],
                              registry=self.registry)
        self.sessions = Counter("agentboost_serve_sessions", "sessions assigned to each arm", ["arm"],
                                registry=self.registry)
        self.feedback = Counter("agentboost_serve_feedback", "outcomes received by arm", ["arm"],
                                registry=self.registry)
        self.successes = Counter("agentboost_serve_successes", "successful outcomes by arm", ["arm"],
                                 registry=self.registry)
        self.reward = Counter("agentboost_serve_reward_sum", "sum of the rewards received by arm", ["arm"],
                              registry=self.registry)
        self.split = Gauge("agentboost_serve_experiment_split", "the experiment's share of new sessions",
                           registry=self.registry)


class EventLog:
    """The router's JSON lines (``ab.jsonl``), appended and flushed one by one: ``ab report``
    reads them, live or after the fact."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._f = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(path, "a", encoding="utf-8")

    def write(self, event: dict[str, Any]) -> None:
        if self._f is None:
            return
        line = json.dumps({"t": time.time(), **event}, ensure_ascii=False)
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class Router(BackgroundServer):
    """``policies``: one ``ServedPolicy`` (plain serving) or two named ``baseline`` and
    ``experiment`` (an A/B test with ``split``, the experiment's share of sessions).
    ``prompt_policies``: ``{arm: PromptPolicy}`` (``serve --prompt-policy``), applied to every
    request of that arm: its instructions after the client's system prompt, its demonstration
    turns before the client's messages. Kept by arm, not in the ``ServedPolicy``, so that two arms
    of one model differ by their prompts alone."""

    _thread_name = "agentboost-serve"
    _handler_cancellation = True  # a client gone mid-call stops its generation

    def __init__(self, policies: dict[str, ServedPolicy], split: float | None = None, out_dir: str | Path | None = None,
                 token: str | None = None, served_name: str = "agentboost", max_request_bytes: int = 1 << 20,
                 rate_limit: float = 0.0, max_sessions: int = 10_000, min_effect: float | None = None,
                 salt: str | None = None, prompt_policies: dict[str, Any] | None = None):
        if len(policies) == 2 and set(policies) != set(ARMS):
            raise ServeInputError(f"an A/B test has two arms named baseline and experiment, got {sorted(policies)}")
        if len(policies) not in (1, 2):
            raise ServeInputError(f"serve one policy or two arms, got {len(policies)}")
        self.policies = policies
        self.prompt_policies = dict(prompt_policies or {})
        unknown = set(self.prompt_policies) - set(policies)
        if unknown:
            raise ServeInputError(f"a prompt policy for arm(s) {sorted(unknown)}, which this server does not serve")
        self.ab = len(policies) == 2
        self.split = check_split(split if split is not None else (0.5 if self.ab else 1.0))
        self.token = token or None
        self.served_name = served_name
        self.salt = salt or uuid.uuid4().hex  # recorded: the same salt reproduces every assignment
        self.max_sessions = max_sessions
        self.min_effect = min_effect
        self.events = EventLog(Path(out_dir) / EVENTS if out_dir is not None else None)
        self.metrics = Metrics()
        self.metrics.split.set(self.split)
        self.limiter = RateLimiter(rate_limit)
        self._assigned: dict[str, str] = {}  # arm key (user or session) -> arm
        self._session_arm: dict[str, str] = {}  # session id -> arm (kept after the state is forgotten)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.app = web.Application(client_max_size=max_request_bytes, middlewares=[self._guard])
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_post("/v1/feedback", self._feedback)
        self.app.router.add_get("/v1/ab", self._ab)
        self.app.router.add_post("/v1/ab/split", self._set_split)
        self.app.router.add_get("/metrics", self._metrics)
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self.events.write({"event": "config", "arms": {n: {"spec": p.spec, "description": p.description,
                                                          "engine": p.engine} for n, p in policies.items()},
                           "split": self.split if self.ab else None, "salt": self.salt, "min_effect": min_effect})

    # -- assignment ---------------------------------------------------------------------------
    def arm_for(self, key: str) -> str:
        """The key's arm: drawn at its first request under the split then in force, then fixed."""
        arm = self._assigned.get(key)
        if arm is None:
            arm = next(iter(self.policies)) if not self.ab else (
                "experiment" if draw(self.salt, len(self._assigned)) < self.split else "baseline")
            self._assigned[key] = arm
        return arm

    def set_split(self, split: Any, by: str = "api") -> dict[str, Any]:
        if not self.ab:
            raise ServeInputError("this server serves one policy: there is no split to change (serve --ab)")
        new = check_split(split)
        old, self.split = self.split, new
        self.metrics.split.set(new)
        self.events.write({"event": "split", "from": old, "to": new, "by": by})
        log.warning("A/B split changed from %.3f to %.3f (%s)", old, new, by)
        return {"from": old, "to": new}

    def _session(self, sid: str, arm: str) -> Session:
        s = self._sessions.get(sid)
        if s is None:
            p = self.policies[arm]

            def new_model() -> TrainableModel:
                return TrainableModel(p.sampler, p.renderer, p.sampling, **p.model_options)

            s = Session(new_model=new_model, id=sid)
            self._sessions[sid] = s
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)  # the longest idle: its next call renders afresh
        else:
            self._sessions.move_to_end(sid)
        return s

    # -- middleware -----------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler):
        if self.token is not None:
            auth = request.headers.get("Authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return _error(401, "missing or wrong bearer token (Authorization: Bearer <token>)")
        if not self.limiter.allow(request.remote or "?"):
            return _error(429, "rate limit reached: slow down", headers={"Retry-After": "1"})
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"request larger than the limit of {self.app._client_max_size} bytes "
                               "(serve --max-request-bytes)")

    # -- endpoints ------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.served_name, "object": "model",
                                                              "owned_by": "agentboost"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not valid JSON")
        sid = request.headers.get(SESSION_HEADER) or uuid.uuid4().hex
        try:
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            check_request(body)  # the served settings win, as in validation: a client's are ignored
            messages, system, tool_specs = to_strands(body)
            user = body.get("user")
            if user is not None and not isinstance(user, str):
                raise BadRequest("'user' must be a string")
        except BadRequest as e:
            return _error(400, str(e))
        arm = self._session_arm.get(sid)
        if arm is None:
            arm = self.arm_for(f"user:{user}" if user else f"session:{sid}")
            self._session_arm[sid] = arm
            self.metrics.sessions.labels(arm).inc()
            self.events.write({"event": "assign", "session": sid, "user": user, "arm": arm, "split": self.split})
        s = self._session(sid, arm)
        if s.lock is None:
            s.lock = asyncio.Lock()
        prompt_policy = self.prompt_policies.get(arm)
        demo_messages = 0
        if prompt_policy is not None:  # the same prefix on every call, so the session's turns still match
            demo_messages = len(prompt_policy.history_messages())
            messages, system = prompt_policy.for_chat(messages, system)
        t0 = time.perf_counter()
        async with s.lock:
            try:
                turn = await s.call(messages, system, tool_specs)
                if demo_messages:  # the session's record (feedback's scoring) holds the client's turns only
                    s.last_messages = s.last_messages[demo_messages:]
            except (EpisodeLimitReached, PromptTooLong, PromptTooLongError) as e:
                return self._failed(sid, arm, t0, 400, f"the conversation does not fit: {e}")
            except SamplerError as e:
                return self._failed(sid, arm, t0, 502, f"the policy could not sample: {e}")
        latency = time.perf_counter() - t0
        prompt, sampled = len(turn.call.prompt_ids), len(turn.call.response_ids)
        m = self.metrics
        m.requests.labels(arm, "ok").inc()
        m.latency.labels(arm).observe(latency)
        m.tokens.labels(arm, "prompt").inc(prompt)
        m.tokens.labels(arm, "completion").inc(sampled)
        self.events.write({"event": "call", "session": sid, "arm": arm, "latency_s": latency,
                           "prompt_tokens": prompt, "completion_tokens": sampled, "ok": True})
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        headers = {SESSION_HEADER: sid, "X-Agentboost-Arm": arm} if self.ab else {SESSION_HEADER: sid}
        if not body.get("stream"):
            return web.json_response(completion(turn, self.served_name, cid), headers=headers)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers})
        await resp.prepare(request)
        for c in chunks(turn, self.served_name, cid, include_usage):
            await resp.write(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _failed(self, sid: str, arm: str, t0: float, status: int, message: str) -> web.Response:
        self.metrics.requests.labels(arm, "error").inc()
        self.events.write({"event": "call", "session": sid, "arm": arm, "latency_s": time.perf_counter() - t0,
                           "ok": False, "status": status, "error": message})
        return _error(status, message)

    async def _feedback(self, request: web.Request) -> web.Response:
        """``{"session_id", "reward"?, "success"?, "task"?}``: the outcome of a session, given by
        the client, or scored here by the arm's reward on the session's final answer (``task``: the
        task row, with its answer). The last outcome of a session counts."""
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("session_id"), str):
            return _error(400, "feedback needs 'session_id' (the X-Agentboost-Session of the conversation)")
        sid = body["session_id"]
        arm = self._session_arm.get(sid)
        if arm is None:
            return _error(404, f"unknown session {sid!r}: no call was served under it")
        reward, success, source = body.get("reward"), body.get("success"), "client"
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            return _error(400, "'reward' must be a number")
        if success is not None and not isinstance(success, bool):
            return _error(400, "'success' must be true or false")
        task = body.get("task")
        if task is not None:
            if not isinstance(task, dict):
                return _error(400, "'task' must be the task row (an object with its answer)")
            env = self.policies[arm].env
            s = self._sessions.get(sid)
            if env is None:
                return _error(400, f"arm {arm} has no reward to score with: post 'reward' or 'success'")
            if s is None:
                return _error(409, f"session {sid!r} is no longer held (max_sessions): post 'reward' or 'success'")
            episode = s.episode()
            await asyncio.get_running_loop().run_in_executor(None, env.score, task, episode)
            if episode.reward is None:
                return _error(422, f"the reward could not score session {sid!r}: {episode.error or episode.status}")
            reward, success, source = float(episode.reward), bool(episode.succeeded), f"reward:{env.reward}"
        if reward is None and success is None:
            return _error(400, "feedback needs 'reward', 'success' or 'task'")
        m = self.metrics
        m.feedback.labels(arm).inc()
        if success:
            m.successes.labels(arm).inc()
        if reward is not None:
            m.reward.labels(arm).inc(float(reward))
        event = {"event": "feedback", "session": sid, "arm": arm, "reward": reward, "success": success,
                 "source": source}
        self.events.write(event)
        return web.json_response({k: v for k, v in event.items() if k != "event"})

    async def _ab(self, request: web.Request) -> web.Response:
        from .report import ab_report

        out = {"split": self.split if self.ab else None, "arms": {n: p.description for n, p in self.policies.items()}}
        if self.events.path is not None:
            out["report"] = await asyncio.get_running_loop().run_in_executor(None, ab_report, self.events.path)
        return web.json_response(out)

    async def _set_split(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            return web.json_response(self.set_split(body.get("split") if isinstance(body, dict) else None,
                                                    by=str(body.get("by") or request.remote)))
        except ValueError as e:
            return _error(400, str(e) if isinstance(e, InputError) else "request body is not valid JSON")
        except InputError as e:
            return _error(400, str(e))

    async def _metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- running --------------------------------------------------------------------------------

    def close(self) -> None:
        self.stop_thread()
        self.events.close()
        for p in self.policies.values():
            p.close()

    def __enter__(self) -> "Router":
        """Serve on a free loopback port from a thread (``start_in_thread(host, port)`` for others)."""
        self.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_router(arms: dict[str, str], engine: str = "hf", config: str | None = None, overrides: list[str] = (),
                 max_batch_size: int = 8, log=print, prompt_policies: dict[str, str] | None = None,
                 **router_options) -> "Router":
    """A ``Router`` over the arms ``{name: spec}``, each loaded on ``engine`` (not yet listening).
    Without ``config``, every arm serves with the configuration of the first arm that is a run (its
    validation sampling settings, tool parser and reward), so that a baseline model and a trained
    run are served, and scored, alike. ``prompt_policies``: ``{arm: PATH}``, the prompt policy an
    arm serves with (``serve --prompt-policy``)."""
    from ..trainer.checkpoint import split_run_spec
    from ..trainer.prompt_policy import load_prompt_policy
    from .policies import load_served_policy

    # read before any model loads: a bad file fails fast
    prompts = {name: load_prompt_policy(path) for name, path in (prompt_policies or {}).items()}
    if config is None:
        runs = [Path(split_run_spec(spec)[0]) / "config.yaml" for spec in arms.values()]
        config = next((str(c) for c in runs if c.is_file()), None)
    policies = {}
    try:
        for name, spec in arms.items():
            policies[name] = load_served_policy(name, spec, engine=engine, config=config, overrides=overrides,
                                                max_batch_size=max_batch_size, log=log)
            if name in prompts:
                log(f"arm {name}: with {prompts[name].summary()} ({prompt_policies[name]})")
        return Router(policies, prompt_policies=prompts, **router_options)
    except BaseException:
        for p in policies.values():
            p.close()
        raise


def check_bind(host: str, token: str | None) -> None:
    """Off loopback, a token is required: a served model is reachable by whoever reaches the port."""
    import ipaddress

    loopback = host == "localhost"
    try:
        loopback = loopback or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not loopback and not token:
        raise ServeInputError(f"--host {host} is not loopback: give --token (or AGENTBOOST_SERVE_TOKEN) so that only "
                              "your clients can call the model")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.Response(status=status, text=json.dumps({"error": {"message": message, "type": kind, "code": status}}),
                        content_type="application/json", headers=headers)
