"""``agentboost serve``'s front: one policy, or two arms of an A/B test, behind the OpenAI chat,
OpenAI Responses and Anthropic Messages APIs.

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/messages`` (streaming
and not, tools, parallel tool calls; the gateway's protocols, ``gateway/protocol.py``), ``GET
/v1/models``, ``POST /v1/feedback`` (a session's outcome), ``GET /v1/ab`` (the configuration and the
live report), ``POST /v1/ab/split`` (a new split, logged), ``GET /metrics`` (Prometheus, per arm),
and on a reconfigurable router (``serve --reconfigurable``, what the job service's deployments run)
``POST /v1/admin/arms`` (new arms, loaded while the old ones keep serving, or a new split).

Requests and answers are translated by the gateway's own protocol modules (``gateway/``)
and each session keeps the gateway's per-session trainable-model state (``gateway/session.py``), so
a served policy sees its conversation rendered exactly as in training and validation: the turns it
sampled come back as the tokens it sampled. Nothing is recorded for training unless the deployment
opts in (``record``: ``serve --record``, ``serving/recording.py``: each session a token-exact
episode in ``sessions.jsonl``, with its arm, policy and outcome); sessions idle the longest are
forgotten beyond ``max_sessions``.

A session is named by the ``X-Agentboost-Session`` header (a client's conversation id), or, for a
Responses request, by its ``previous_response_id`` (the session that gave that response); without
either each request is a session of its own, whose id comes back in that header (for feedback). The
arm is sticky: it is drawn once per user (the request's ``user``, ``safety_identifier`` or
Anthropic's ``metadata.user_id``) or else per session, when the
key is first seen, and kept. The n-th new key draws ``u_n = frac(r + n * phi)`` (the golden-ratio
sequence from a start ``r`` given by the salt) and goes to the experiment when ``u_n < split``: a
low-discrepancy sequence, so the observed share follows the setting within a point or two after a
few hundred sessions, where independent coin flips wander by two standard errors (±6 points at
200 sessions and a 30% split); the draws are still spread evenly over [0, 1) in any stretch of
arrivals, so neither arm gets the early or the late traffic.

Assignments outlive the process: they are in the event log, and a router started again on the same
log with the same arms takes them back (and the salt, the draw count and the split in force), so a
session or user stays on its arm across a restart. The split in force survives a restart given the
split the test started with (the same command line run again); another split given on purpose
replaces it, logged ``by: restart`` and said in a warning. New arms are a new test: a new
``config`` event, from which ``ab report`` counts. A policy that leaves the server (new arms) is
closed only when the requests it is answering have been answered: a swap fails no request.

Safe by default: loopback unless told otherwise, a bearer token (required off loopback), a
request size limit (413), a rate limit (429) per user (the request's ``user``), else per session
(the session header), else per client address, and per-arm error counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import math
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from ..agents.trainable_model import EpisodeLimitReached, PromptTooLong, TrainableModel
from ..episodes.record import Status
from ..errors import InputError
from ..files import loads_json, open_append
from ..gateway.protocol import BadRequest, Protocol, Reply, TooLarge, error, read_json
from ..gateway.server import PROTOCOLS, SESSION_HEADER, request_key
from ..gateway.session import Session
from ..rewards.registry import declared_range, get_reward
from ..sampling.completions_server import BackgroundServer
from ..sampling.protocol import PromptTooLongError, SamplerError
from .policies import ARMS, FEEDBACK_BOUND, ServedPolicy
from .recording import SESSIONS, SessionRecorder, apply_outcome, unconfirmed_deliveries

log = logging.getLogger(__name__)
EVENTS = "ab.jsonl"  # in the serving directory: assignments, calls, feedback, split changes
DRAIN_TIMEOUT_S = 600.0  # a policy leaving the server waits this long for its answers in progress


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


WEIGHTS_HEADER = "X-Agentboost-Weights"  # every answer's served weights: version and verified digest
PHI = (5 ** 0.5 - 1) / 2  # the golden ratio's fractional part: the most even rotation of [0, 1)


def draw(salt: str, n: int) -> float:
    """The n-th new key's draw in [0, 1) (n from 0): ``frac(r + n * phi)``, ``r`` from the salt."""
    start = int.from_bytes(hashlib.blake2b(salt.encode(), digest_size=8).digest(), "big") / 2**64
    return (start + n * PHI) % 1.0


class RateLimiter:
    """A token bucket per client key: ``rate`` requests a second on average, bursts of ``burst``.
    Keys are the router's (user, session or address): the ``max_keys`` least recently seen are
    kept, so that many distinct keys cannot grow the table without bound (a forgotten key starts
    again with a full bucket, as a new one does)."""

    def __init__(self, rate: float, burst: int | None = None, max_keys: int = 100_000):
        self.rate, self.burst = rate, float(burst or max(1, int(rate * 2)))
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        tokens, last = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        ok = tokens >= 1.0
        self._buckets[client] = (tokens - 1.0 if ok else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
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
            self._f = open_append(path)

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


@dataclass
class Left:
    """A session that left the server, kept for the outcome its user may still post."""
    session: Session
    served: dict[str, Any]  # its arm, spec and user (the record's)
    arm: str
    env: Any  # the reward of the arm that served it (a StrandsEnv), or None


def reward_range(env: Any) -> tuple[float, float]:
    """The rewards feedback may post for an arm whose reward is ``env``'s: the range that reward
    declares, else +-FEEDBACK_BOUND."""
    declared = None
    if env is not None and isinstance(env.reward, str) and env.reward != "judge":
        try:
            declared = declared_range(get_reward(env.reward))
        except InputError:
            declared = None
    return declared or (-FEEDBACK_BOUND, FEEDBACK_BOUND)


def check_arms(names: Any) -> bool:
    """One policy (any name) or the two arms of an A/B test; True for an A/B test."""
    names = sorted(names)
    if len(names) == 2 and names != sorted(ARMS):
        raise ServeInputError(f"an A/B test has two arms named baseline and experiment, got {names}")
    if len(names) not in (1, 2):
        raise ServeInputError(f"serve one policy or two arms, got {len(names)}")
    return len(names) == 2


def earlier_test(path: Path | None, specs: dict[str, str]) -> dict[str, Any] | None:
    """What an earlier start of the same test left in the event log at ``path``: the salt, the
    minimum effect, the split in force and the assignments, if the log's newest test has the arms
    ``specs`` (name -> spec); else None (no log, or another test)."""
    if path is None or not path.is_file():
        return None
    from ..files import iter_jsonl

    test: dict[str, Any] | None = None
    for _, r in iter_jsonl(path, growing=True):
        kind = r.get("event")
        if kind == "config":
            test = {"specs": {n: a.get("spec") for n, a in (r.get("arms") or {}).items()}, "salt": r.get("salt"),
                    "split": r.get("split"), "started_with": r.get("split"), "min_effect": r.get("min_effect"),
                    "assign": []}
        elif test is None:
            continue
        elif kind == "split":
            test["split"] = r["to"]
        elif kind == "assign":
            test["assign"].append(r)
    return test if test is not None and test["specs"] == specs else None


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
                 salt: str | None = None, loader: Any = None, prompt_policies: dict[str, Any] | None = None,
                 record: bool = False):
        """``loader``: ``(arms {name: spec}, current policies) -> policies`` (``build_router``'s,
        which reuses a loaded policy of the same spec); given, ``POST /v1/admin/arms`` changes the
        arms while serving (a token is then required: who may call it loads models here).
        ``record``: every session written as an episode to ``out_dir/sessions.jsonl``."""
        self.ab = check_arms(policies)
        if loader is not None and not token:
            raise ServeInputError("a reconfigurable server needs a bearer token: its callers load models")
        if record and out_dir is None:
            raise ServeInputError("recording sessions needs a serving directory (--out) to write sessions.jsonl in")
        self.policies = policies
        self.prompt_policies = dict(prompt_policies or {})
        unknown = set(self.prompt_policies) - set(policies)
        if unknown:
            raise ServeInputError(f"a prompt policy for arm(s) {sorted(unknown)}, which this server does not serve")
        self.loader = loader
        self._reconfiguring = asyncio.Lock()
        self.events = EventLog(Path(out_dir) / EVENTS if out_dir is not None else None)
        self.recorder = SessionRecorder(Path(out_dir) / SESSIONS) if record else None
        # sessions a stopped server was answering (their write-ahead record is their last): counted, never trained on
        self.unconfirmed_at_start = unconfirmed_deliveries(Path(out_dir) / SESSIONS) if record else 0
        self._served: dict[str, dict[str, Any]] = {}  # held session id -> its arm, spec and user (the record's)
        self._inflight: dict[int, int] = {}  # id(policy) -> requests it is answering now
        self._ending: dict[str, tuple[Session, dict[str, Any]]] = {}  # left with a call in flight: recorded after it
        # sessions that left the server (new arms, past max_sessions): a user's outcome may still come for
        # them, scored by the reward of the arm that served them. The newest max_sessions are kept
        self._left: OrderedDict[str, Left] = OrderedDict()
        before = earlier_test(self.events.path, {n: p.spec for n, p in policies.items()})
        if before is not None:  # the same test started again: its assignments, draws and split go on
            salt, min_effect = salt or before["salt"], min_effect if min_effect is not None else before["min_effect"]
            if split is None or (split == before["started_with"] and before["split"] != split):
                # no split, or the one the test started with (the same command line again): the
                # split in force (a live change) survives the restart
                if split is not None:
                    log.warning("--split %g is the split this test started with: the split in force, %g, stays "
                                "(a live change survives a restart; `ab split` changes it)", split, before["split"])
                split = before["split"]
            elif split != before["split"]:
                log.warning("the split in force, %g, is replaced by %g given at the restart", before["split"], split)
        self.split = check_split(split if split is not None else (0.5 if self.ab else 1.0))
        self.token = token or None
        self.served_name = served_name
        self.salt = salt or uuid.uuid4().hex  # recorded: the same salt reproduces every assignment
        self.max_sessions = max_sessions
        self.min_effect = min_effect
        self.metrics = Metrics()
        self.metrics.split.set(self.split)
        self.limiter = RateLimiter(rate_limit)
        self._assigned: dict[str, str] = {}  # arm key (user or session) -> arm
        self._session_arm: dict[str, str] = {}  # session id -> arm (kept after the state is forgotten)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.app = web.Application(client_max_size=max_request_bytes, middlewares=[self._guard])
        for protocol in PROTOCOLS:
            self.app.router.add_post("/v1" + protocol.route, self._handler(protocol))
        self._protocol_of = {"/v1" + p.route: p for p in PROTOCOLS}
        # Responses: response id -> the session that gave it (a previous_response_id names its session)
        self._response_session: OrderedDict[str, str] = OrderedDict()
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_post("/v1/feedback", self._feedback)
        self.app.router.add_get("/v1/ab", self._ab)
        self.app.router.add_post("/v1/ab/split", self._set_split)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_post("/v1/admin/arms", self._set_arms)
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        if before is None:
            self._write_config()
            return
        for a in before["assign"]:
            self._session_arm[a["session"]] = a["arm"]
            self._assigned.setdefault(f"user:{a['user']}" if a.get("user") else f"session:{a['session']}", a["arm"])
        self.events.write({"event": "restart", "sessions": len(self._session_arm), "keys": len(self._assigned)})
        if self.ab and self.split != before["split"]:
            self.events.write({"event": "split", "from": before["split"], "to": self.split, "by": "restart"})
        log.info("restarted the test in %s: %d sessions keep their arms", self.events.path, len(self._session_arm))

    def _write_config(self, by: str | None = None) -> None:
        """A new test starts: what ``ab report`` counts from."""
        self.events.write({"event": "config", "arms": {n: {"spec": p.spec, "description": p.description,
                                                          "engine": p.engine} for n, p in self.policies.items()},
                           "split": self.split if self.ab else None, "salt": self.salt, "min_effect": self.min_effect,
                           "record": self.recorder is not None, **({"by": by} if by else {})})

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

    def install(self, policies: dict[str, ServedPolicy], split: Any = None, by: str = "api") -> None:
        """New arms: a new test (new assignments, a new salt, a ``config`` event). Called on the
        serving loop, so that no request sees half of it; the caller closes the policies left out."""
        ab = check_arms(policies)
        new_split = check_split(split if split is not None else (0.5 if ab else 1.0))
        # a prompt policy was given for the model its arm served: an arm whose model changes loses it
        dropped = [n for n in self.prompt_policies if n not in policies or policies[n].spec != self.policies[n].spec]
        for n in dropped:
            log.warning("arm %s: its prompt policy is left out (the arm now serves %s)", n,
                        policies[n].spec if n in policies else "nothing")
            del self.prompt_policies[n]
        # recorded as they stand (while the arms that served them are still known): a session that goes on
        # is a new one, on the new arms; its outcome, if it comes now, still counts (``_left``)
        self._end_sessions()
        self.policies, self.ab, self.split, self.salt = policies, ab, new_split, uuid.uuid4().hex
        self._assigned, self._session_arm, self._sessions = {}, {}, OrderedDict()
        self.metrics.split.set(new_split)
        self._write_config(by)
        log.warning("serving new arms (%s): %s", by, ", ".join(f"{n}={p.spec}" for n, p in policies.items()))

    def _session(self, sid: str, arm: str) -> Session:
        s = self._sessions.get(sid)
        if s is None:
            p = self.policies[arm]

            def new_model() -> TrainableModel:
                return TrainableModel(p.sampler, p.renderer, p.sampling, **p.model_options)

            s = Session(new_model=new_model, id=sid)
            if self.recorder is not None:  # each answer on disk before its client can see it
                s.before_delivery = lambda held: self.recorder.write_ahead(held, self._served_as(held.id))
            self._sessions[sid] = s
            self._left.pop(sid, None)  # it goes on, on these arms: an outcome now is this session's
            self._served[sid] = {"arm": arm, "spec": p.spec, "description": p.description}
            while len(self._sessions) > self.max_sessions:
                gone, held = self._sessions.popitem(last=False)  # the longest idle: its next call renders afresh
                self._end(gone, held)
        else:
            self._sessions.move_to_end(sid)
        return s

    def _served_as(self, sid: str) -> dict[str, Any]:
        """What a session is served under (arm, spec, user): a held one's, or one that left during its call."""
        if sid in self._served:
            return self._served[sid]
        ending = self._ending.get(sid)
        return ending[1] if ending is not None else {}

    def _end(self, sid: str, s: Session) -> None:
        """A session leaves the server (forgotten, the arms changed, the server stops): recorded;
        one whose call is in flight (a swap while it samples) when that call has ended. Its outcome
        may still come (``_left``)."""
        served = self._served.pop(sid, None)
        if served is None:
            return
        policy = self.policies.get(served["arm"])
        self._left[sid] = Left(s, served, served["arm"], policy.env if policy is not None else None)
        while len(self._left) > self.max_sessions:
            self._left.popitem(last=False)
        if self.recorder is None:
            return
        if s.lock is not None and s.lock.locked():
            self._ending[sid] = (s, served)
        else:
            self.recorder.end(s, served)

    def _end_sessions(self) -> None:
        for sid, s in list(self._sessions.items()):
            self._end(sid, s)

    # -- middleware -----------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler):
        protocol = self._protocol_of.get(request.path, PROTOCOLS[0])  # errors in the caller's protocol
        if self.token is not None:
            given = request_key(request) or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return error(protocol, 401, "missing or wrong token (Authorization: Bearer <token>, or x-api-key)")
        try:
            if self.limiter.rate > 0 and not self.limiter.allow(await self._client_key(request)):
                return error(protocol, 429, "rate limit reached: slow down", headers={"Retry-After": "1"})
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return error(protocol, 413, f"request larger than the limit of {self.app._client_max_size} bytes "
                                        "(serve --max-request-bytes)")

    async def _client_key(self, request: web.Request) -> str:
        """Whose bucket a request takes from: its user (a chat request's ``user``), else its
        session (the session header), else its address; so that one application serving many
        users from one address does not share one budget among them. Users and sessions are
        named by the clients, so the keys only share fairly among callers the token admits."""
        if request.method == "POST" and request.path in self._protocol_of and request.can_read_body:
            try:
                body = await request.json(loads=loads_json)  # kept by aiohttp: the handler reads it again for free
            except ValueError:
                body = None  # the handler answers 400
            user = user_of(body)
            if user:
                return f"user:{user}"
        sid = request.headers.get(SESSION_HEADER)
        return f"session:{sid}" if sid else f"address:{request.remote or '?'}"

    # -- endpoints ------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.served_name, "object": "model",
                                                              "owned_by": "agentboost",
                                                              **_fingerprints(self.policies)}]})

    def _handler(self, protocol: Protocol):
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._serve(request, protocol)

        return handle

    async def _serve(self, request: web.Request, protocol: Protocol) -> web.StreamResponse:
        try:
            # checked by the protocol; the served settings win, as in validation: a client's are ignored
            call = protocol.parse(await read_json(request, "serve --max-request-bytes"))
        except TooLarge as e:
            return error(protocol, 413, str(e))
        except BadRequest as e:
            return error(protocol, 400, str(e))
        sid = request.headers.get(SESSION_HEADER)
        if call.previous_response_id is not None:
            sid = sid or self._response_session.get(call.previous_response_id)
            held = self._sessions.get(sid) if sid else None
            if held is None or call.previous_response_id not in held.responses:
                return error(protocol, 400, f"previous_response_id {call.previous_response_id!r} is not a response "
                                            "this server keeps (store: false, another session's, or forgotten past "
                                            "max_sessions): send the whole conversation as 'input'")
            call.messages = [*held.history(call.previous_response_id), *call.messages]
        sid = sid or uuid.uuid4().hex
        user = call.user
        arm = self._session_arm.get(sid)
        if arm is None:
            arm = self.arm_for(f"user:{user}" if user else f"session:{sid}")
            self._session_arm[sid] = arm
            self.metrics.sessions.labels(arm).inc()
            self.events.write({"event": "assign", "session": sid, "user": user, "arm": arm, "split": self.split})
        s = self._session(sid, arm)
        if user and sid in self._served:
            self._served[sid]["user"] = user
        if s.lock is None:
            s.lock = asyncio.Lock()
        messages, system = call.messages, call.system
        # serve --prompt-policy's, else the one the arm's spec names (MODEL#prompt=PATH)
        prompt_policy = self.prompt_policies.get(arm) or self.policies[arm].prompt_policy
        demo_messages = 0
        if prompt_policy is not None:  # the same prefix on every call, so the session's turns still match
            demo_messages = len(prompt_policy.history_messages())
            messages, system = prompt_policy.for_chat(messages, system)
        policy = self.policies[arm]
        renderer = policy.renderer
        # the weights that answer (run/verify.py): OpenAI's system_fingerprint, and a header in every protocol
        fingerprint = policy.system_fingerprint
        reply = Reply(self.served_name, protocol.new_id(), lambda token_id: renderer.decode([token_id]),
                      system_fingerprint=fingerprint)
        keep = reply.id if protocol.keeps_responses and call.options.get("store", True) else None
        t0 = time.perf_counter()
        # counted until the answer is sent: a swap closes this policy only after it (``_set_arms``)
        self._inflight[id(policy)] = self._inflight.get(id(policy), 0) + 1
        try:
            return await self._answer(request, protocol, call, s, sid, arm, messages, system, demo_messages, keep,
                                      reply, t0)
        finally:
            ending = self._ending.pop(sid, None)
            if ending is not None:  # the session left the server during this call: recorded now, as it ended
                self.recorder.end(*ending)
            left = self._inflight.get(id(policy), 1) - 1
            if left > 0:
                self._inflight[id(policy)] = left
            else:
                self._inflight.pop(id(policy), None)

    async def _answer(self, request: web.Request, protocol: Protocol, call, s: Session, sid: str, arm: str,
                      messages, system, demo_messages: int, keep: str | None, reply: Reply,
                      t0: float) -> web.StreamResponse:
        async with s.lock:
            try:
                turn = await s.sample(messages, system, call.tools, keep_as=keep)
                if demo_messages:  # the session's record (feedback's scoring) holds the client's turns only
                    s.last_messages = s.last_messages[demo_messages:]
                    if keep is not None:
                        s.responses[keep] = s.last_messages
            except (EpisodeLimitReached, PromptTooLong, PromptTooLongError) as e:
                return self._failed(protocol, sid, arm, t0, 400, f"the conversation does not fit: {e}")
            except SamplerError as e:
                return self._failed(protocol, sid, arm, t0, 502, f"the policy could not sample: {e}")
        if keep is not None:
            self._response_session[keep] = sid
            while len(self._response_session) > self.max_sessions * 16:
                self._response_session.popitem(last=False)
        latency = time.perf_counter() - t0
        prompt, sampled = len(turn.call.prompt_ids), len(turn.call.response_ids)
        m = self.metrics
        m.requests.labels(arm, "ok").inc()
        m.latency.labels(arm).observe(latency)
        m.tokens.labels(arm, "prompt").inc(prompt)
        m.tokens.labels(arm, "completion").inc(sampled)
        self.events.write({"event": "call", "session": sid, "arm": arm, "latency_s": latency,
                           "prompt_tokens": prompt, "completion_tokens": sampled, "ok": True,
                           "api": protocol.route.strip("/")})
        headers = {SESSION_HEADER: sid, "X-Agentboost-Arm": arm} if self.ab else {SESSION_HEADER: sid}
        if reply.system_fingerprint:
            headers[WEIGHTS_HEADER] = reply.system_fingerprint
        return await s.deliver(request, protocol, turn, call, reply, headers=headers)

    def _failed(self, protocol: Protocol, sid: str, arm: str, t0: float, status: int, message: str) -> web.Response:
        self.metrics.requests.labels(arm, "error").inc()
        self.events.write({"event": "call", "session": sid, "arm": arm, "latency_s": time.perf_counter() - t0,
                           "ok": False, "status": status, "error": message})
        return error(protocol, status, message)

    async def _feedback(self, request: web.Request) -> web.Response:
        """``{"session_id", "reward"?, "success"?, "task"?}``: the outcome of a session, given by
        the client, or scored here by the arm's reward on the session's final answer (``task``: the
        task row, with its answer). The last outcome of a session counts."""
        try:
            body = await request.json(loads=loads_json)
        except ValueError as e:
            return _error(400, f"request body is not valid JSON: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("session_id"), str):
            return _error(400, "feedback needs 'session_id' (the X-Agentboost-Session of the conversation)")
        sid = body["session_id"]
        arm, s, served = self._session_arm.get(sid), self._sessions.get(sid), self._served.get(sid)
        env = self.policies[arm].env if arm in self.policies else None
        left = self._left.get(sid) if s is None else None
        if left is not None:  # served, then it left the server (new arms, max_sessions): its outcome counts
            arm, s, served, env = left.arm, left.session, left.served, left.env
        if arm is None:
            return _error(404, f"unknown session {sid!r}: no call was served under it")
        reward, success, source = body.get("reward"), body.get("success"), "client"
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            return _error(400, "'reward' must be a number")
        if reward is not None:
            low, high = reward_range(env)
            if not (math.isfinite(reward) and low <= reward <= high):  # never into a figure of ab report
                return _error(400, f"'reward' must be a finite number in [{low:g}, {high:g}] (the arm's reward's "
                                   f"declared range, else serve's bound), got {reward!r}")
        if success is not None and not isinstance(success, bool):
            return _error(400, "'success' must be true or false")
        task = body.get("task")
        episode = None
        if task is not None:
            if not isinstance(task, dict):
                return _error(400, "'task' must be the task row (an object with its answer)")
            if env is None:
                return _error(400, f"arm {arm} has no reward to score with: post 'reward' or 'success'")
            recorded = None
            if s is None:  # served before a restart: its conversation is in its record, if it was recorded
                recorded = self.recorder.recorded(sid) if self.recorder is not None else None
                if recorded is None:
                    return _error(409, f"session {sid!r} is no longer held (forgotten past max_sessions, or served "
                                       "before a restart, unrecorded): post 'reward' or 'success'")
                episode, served = recorded
            else:
                if isinstance(task.get("task_id"), (str, int)):
                    s.task = task  # the record's task: sessions of one task form a group
                episode = s.episode()
            if episode.failed and episode.status != Status.INCOMPLETE:
                # the server failed the user (a sampler error): a failed session, worth the failed reward
                episode.reward, success = env.failed_reward, False
            else:
                await asyncio.get_running_loop().run_in_executor(None, env.score, task, episode)
                success = bool(episode.succeeded)
            if episode.reward is None:
                return _error(422, f"the reward could not score session {sid!r}: {episode.error or episode.status}")
            reward, source = float(episode.reward), f"reward:{env.reward}"
        if reward is None and success is None:
            return _error(400, "feedback needs 'reward', 'success' or 'task'")
        if s is None and episode is None and self.recorder is not None:
            # served before a restart, its outcome posted now: its record takes it (the loop learns from the
            # record); a record whose last answer's delivery is unconfirmed stays so, never trained on
            recorded = self.recorder.recorded(sid)
            if recorded is not None:
                episode, served = recorded
                apply_outcome(episode, reward, success)
        m = self.metrics
        m.feedback.labels(arm).inc()
        if success:
            m.successes.labels(arm).inc()
        if reward is not None:
            m.reward.labels(arm).inc(float(reward))
        event = {"event": "feedback", "session": sid, "arm": arm, "reward": reward, "success": success,
                 "source": source}
        self.events.write(event)
        outcome = {"reward": reward, "success": success, "source": source, **({"task": task} if task else {})}
        if self.recorder is not None and s is not None and served is not None:
            # a session that left is written again with its outcome, and stays left (nothing more to write)
            self.recorder.write(s, served, episode, outcome, final=left is not None)
        elif self.recorder is not None and episode is not None:  # scored from its record: written again, scored
            self.recorder.rewrite(episode, served, outcome)
        return web.json_response({k: v for k, v in event.items() if k != "event"})

    async def _ab(self, request: web.Request) -> web.Response:
        from .report import ab_report

        out = {"split": self.split if self.ab else None, "arms": {n: p.description for n, p in self.policies.items()},
               "specs": {n: p.spec for n, p in self.policies.items()}}
        if self.events.path is not None:
            out["report"] = await asyncio.get_running_loop().run_in_executor(None, ab_report, self.events.path)
        return web.json_response(out)

    async def _set_split(self, request: web.Request) -> web.Response:
        try:
            body = await request.json(loads=loads_json)
            return web.json_response(self.set_split(body.get("split") if isinstance(body, dict) else None,
                                                    by=str(body.get("by") or request.remote)))
        except ValueError as e:
            return _error(400, str(e) if isinstance(e, InputError) else "request body is not valid JSON")
        except InputError as e:
            return _error(400, str(e))

    async def _set_arms(self, request: web.Request) -> web.Response:
        """``{"arms": {name: spec}, "split"?, "by"?}``: the same arms (by spec) with another split
        is a live split change (``set_split``, logged); other arms are loaded beside the serving
        ones (a loaded policy of the same spec is reused), then replace them as a new test."""
        if self.loader is None:
            return _error(403, "this server's arms are fixed (serve --reconfigurable lets token holders change them)")
        try:
            body = await request.json(loads=loads_json)
        except ValueError as e:
            return _error(400, f"request body is not valid JSON: {e}")
        arms = body.get("arms") if isinstance(body, dict) else None
        if not isinstance(arms, dict) or not all(isinstance(v, str) and v for v in arms.values()):
            return _error(400, "'arms' must be an object of arm name -> policy spec")
        by = str(body.get("by") or request.remote)
        loop = asyncio.get_running_loop()
        try:
            check_arms(arms)
            if body.get("split") is not None:
                check_split(body["split"])
            async with self._reconfiguring:
                if arms == {n: p.spec for n, p in self.policies.items()}:
                    changed = self.ab and body.get("split") is not None and float(body["split"]) != self.split
                    if changed:
                        self.set_split(body["split"], by=by)
                    return web.json_response({"changed": "split" if changed else None, **self._state()})
                old = self.policies
                try:
                    new = await loop.run_in_executor(None, self.loader, arms, old)
                except InputError:
                    raise
                except Exception as e:  # the old arms keep serving; the caller learns why in one line
                    log.exception("loading the arms %s failed", arms)
                    return _error(500, f"loading the arms failed ({type(e).__name__}: {e}); the old arms still serve")
                self.install(new, body.get("split"), by=by)
            kept = {id(p) for p in new.values()}
            for p in {id(p): p for p in old.values()}.values():
                if id(p) not in kept:
                    await self._drained(p)
                    await loop.run_in_executor(None, p.close)
            return web.json_response({"changed": "arms", **self._state()})
        except InputError as e:
            return _error(400, str(e))

    async def _drained(self, policy: ServedPolicy) -> None:
        """Until the requests ``policy`` is answering are answered (new ones go to the new arms)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self._inflight.get(id(policy), 0) > 0:
            if time.monotonic() > deadline:
                log.warning("arm policy %s still answers %d requests after %.0f s: closed anyway", policy.spec,
                            self._inflight[id(policy)], DRAIN_TIMEOUT_S)
                break
            await asyncio.sleep(0.05)

    def _state(self) -> dict[str, Any]:
        return {"split": self.split if self.ab else None,
                "arms": {n: {"spec": p.spec, "description": p.description} for n, p in self.policies.items()}}

    async def _metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- running --------------------------------------------------------------------------------

    def close(self) -> None:
        self.stop_thread()
        if self.recorder is not None:
            self._end_sessions()  # the sessions still held, recorded as they stand
            for s, served in self._ending.values():  # stopped during a call
                self.recorder.end(s, served)
            self._ending.clear()
            self.recorder.close()
        self.events.close()
        for p in self.policies.values():
            p.close()  # an arm's policy may serve both arms: closing twice is a no-op

    def __enter__(self) -> "Router":
        """Serve on a free loopback port from a thread (``start_in_thread(host, port)`` for others)."""
        self.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_router(arms: dict[str, str], engine: str = "hf", config: str | None = None, overrides: list[str] = (),
                 max_batch_size: int = 8, log=print, reconfigurable: bool = False,
                 prompt_policies: dict[str, str] | None = None, **router_options) -> "Router":
    """A ``Router`` over the arms ``{name: spec}``, each loaded on ``engine`` (not yet listening).
    Without ``config``, every arm serves with the configuration of the first arm that is a run (its
    validation sampling settings, tool parser and reward), so that a baseline model and a trained
    run are served, and scored, alike. Two arms of one spec share one loaded policy.
    ``reconfigurable``: ``POST /v1/admin/arms`` loads new arms the same way. ``prompt_policies``:
    ``{arm: PATH}``, the prompt policy an arm serves with (``serve --prompt-policy``)."""
    from ..run.checkpoint import split_run_spec
    from ..run.prompt_policy import load_prompt_policy
    from .policies import load_served_policy, split_prompt_spec

    # read before any model loads: a bad file fails fast
    prompts = {name: load_prompt_policy(path) for name, path in (prompt_policies or {}).items()}
    served_with: dict[int, str | None] = {}  # id(policy) -> the configuration it was loaded with

    def load(arms: dict[str, str], current: dict[str, ServedPolicy]) -> dict[str, ServedPolicy]:
        cfg = config
        if cfg is None:
            runs = [Path(split_run_spec(split_prompt_spec(spec)[0])[0]) / "config.yaml" for spec in arms.values()]
            cfg = next((str(c) for c in runs if c.is_file()), None)
        # a serving policy is reused only as it would be loaded now (its run's settings and reward)
        have = {p.spec: p for p in current.values() if served_with.get(id(p)) == cfg}
        loaded: list[ServedPolicy] = []
        try:
            for name, spec in arms.items():
                if spec in have:
                    continue
                model = split_prompt_spec(spec)[0]
                same = next((p for p in have.values() if split_prompt_spec(p.spec)[0] == model), None)
                # the same model under another prompt: its engine, shared; else the model loaded
                have[spec] = same.sharing(name, spec) if same is not None else load_served_policy(
                    name, spec, engine=engine, config=cfg, overrides=overrides, max_batch_size=max_batch_size, log=log)
                served_with[id(have[spec])] = cfg
                loaded.append(have[spec])
            return {name: have[spec] for name, spec in arms.items()}
        except BaseException:
            for p in loaded:
                p.close()
            raise

    policies = load(arms, {})
    for name, prompt in prompts.items():
        log(f"arm {name}: with {prompt.summary()} ({prompt_policies[name]})")
    try:
        return Router(policies, loader=load if reconfigurable else None, prompt_policies=prompts, **router_options)
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


def _fingerprints(policies: dict[str, ServedPolicy]) -> dict[str, Any]:
    """``/v1/models``' word on the weights served: ``system_fingerprint`` of the one policy, or per arm."""
    if len(policies) == 1:
        return {"system_fingerprint": next(iter(policies.values())).system_fingerprint}
    return {"system_fingerprints": {name: p.system_fingerprint for name, p in policies.items()}}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.Response(status=status, text=json.dumps({"error": {"message": message, "type": kind, "code": status}}),
                        content_type="application/json", headers=headers)


def user_of(body: Any) -> str | None:
    """Who a request says it serves, in any protocol: ``user`` or ``safety_identifier`` (OpenAI),
    ``metadata.user_id`` (Anthropic)."""
    if not isinstance(body, dict):
        return None
    meta = body.get("metadata")
    for v in (body.get("user"), body.get("safety_identifier"), meta.get("user_id") if isinstance(meta, dict) else None):
        if isinstance(v, str) and v:
            return v
    return None
