"""What every protocol the gateway and ``serve`` speak shares: a parsed request, the checks of its
fields, the reply's context, errors, and the one way a reply is sent (a JSON body or server-sent
events).

Each protocol is one module that translates its requests into the trainable model's (Strands)
messages and a sampled turn back into its answers: ``openai_messages.py`` (OpenAI chat
completions), ``openai_responses.py`` (OpenAI Responses), ``anthropic_messages.py`` (Anthropic
Messages). Whatever the protocol, the call goes through the same session and trainable model
(``session.Session.call``), so the record is the same token for token.

Every field of a request is one of four kinds, and none is dropped silently: **honoured** (its
meaning is served), **no effect on what is sampled** (a model name, metadata, a cache hint, a
user id: accepted as they are), **overridden by the run** (sampling settings: the run's win, and
each one a client set is counted in the record's ``ignored_client_settings``), or **refused** (400,
one line saying why: what would sample from another distribution than the policy's, or what is
not served). A field the protocol does not define is refused by name, as OpenAI's and
Anthropic's own APIs do.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from aiohttp import web

from ..agents.trainable_model import SampledTurn
from ..files import loads_json


class BadRequest(ValueError):
    """A request the gateway refuses (HTTP 400); the message is the one-line reason."""


@dataclass
class Call:
    """One request, parsed: what the trainable model is asked (Strands messages, system prompt,
    tool specs), the client settings the run overrides (counted), and how to answer."""

    messages: list[dict[str, Any]]
    system: str | None
    tools: list[dict[str, Any]] | None
    ignored: list[str]
    stream: bool = False
    user: str | None = None  # who the caller says it serves (serve's A/B arm is per user)
    # protocol options honoured in the answer (include_usage, logprobs, store, the request's echo)
    options: dict[str, Any] = field(default_factory=dict)
    previous_response_id: str | None = None  # Responses: the conversation so far is the session's


@dataclass
class Reply:
    """What an answer is made with besides the turn: the served model's name, the answer's id, its
    time, and the policy's tokenizer for token log-probs."""

    model: str
    id: str
    token_text: Callable[[int], str]
    created: int = field(default_factory=lambda: int(time.time()))
    # the served weights' verified identity (``serve``: run/verify.py), OpenAI's ``system_fingerprint``
    system_fingerprint: str | None = None


class Protocol:
    """One wire protocol: its route under ``/v1``, its request parser, its answer and its stream."""

    name = ""
    route = ""
    id_prefix = ""
    keeps_responses = False  # Responses: an answer is kept for a later previous_response_id

    def parse(self, body: Any) -> Call:
        raise NotImplementedError

    def answer(self, turn: SampledTurn, call: Call, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, turn: SampledTurn, call: Call, reply: Reply) -> Iterable[bytes]:
        """The same turn as server-sent events: sampled whole first, so a streamed call records
        exactly what a non-streamed one does."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "code": status}}

    def new_id(self) -> str:
        return f"{self.id_prefix}{uuid.uuid4().hex}"


def error(protocol: Protocol, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(protocol.error_body(status, message)),
                        content_type="application/json", headers=headers)


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


def size_text(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB" if n >= 1024 else f"{n} bytes"


async def read_json(request: web.Request, limit_hint: str) -> Any:
    """The request's JSON body; ``BadRequest`` when it is not JSON, nests too deeply (a
    100,000-deep array raised RecursionError: a 500) or writes NaN or Infinity (not JSON: they would
    enter rewards and statistics as numbers) (``files.loads_json``); ``TooLarge`` past the server's
    size limit (read before anything is parsed or tokenised)."""
    try:
        return await request.json(loads=loads_json)
    except web.HTTPRequestEntityTooLarge:
        raise TooLarge(f"request larger than the limit of {size_text(request.app._client_max_size)} "
                       f"({limit_hint})") from None
    except ValueError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None


class TooLarge(ValueError):
    """A body past the server's size limit (HTTP 413)."""


async def send(request: web.Request, protocol: Protocol, turn: SampledTurn, call: Call, reply: Reply,
               headers: dict[str, str] | None = None) -> web.StreamResponse:
    """The answer as one JSON body, or streamed as the protocol's server-sent events."""
    if not call.stream:
        return web.json_response(protocol.answer(turn, call, reply), headers=headers,
                                 dumps=lambda o: json.dumps(o, ensure_ascii=False))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       **(headers or {})})
    await resp.prepare(request)
    for chunk in protocol.events(turn, call, reply):
        await resp.write(chunk)
    await resp.write_eof()
    return resp


# -- field checks ------------------------------------------------------------------------------
def check_fields(body: dict[str, Any], api: str, honoured: Iterable[str], no_effect: Iterable[str],
                 overridden: Iterable[str], refused: dict[str, str]) -> list[str]:
    """Refuse a field the protocol does not define, or one in ``refused`` (name -> why) that is
    set; return the ``overridden`` settings the client set (the run's settings win: counted)."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    known = set(honoured) | set(no_effect) | set(overridden) | set(refused)
    for k, v in body.items():
        if k not in known:
            raise BadRequest(f"unknown parameter {k!r} for {api}")
        if k in refused and v not in (None, False):  # e.g. background: false asks for nothing
            raise BadRequest(f"{k!r} is not served: {refused[k]}")
    return [k for k in overridden if body.get(k) is not None]


def opt(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``body[key]`` when it is of ``kind`` or absent (None); else a one-line BadRequest."""
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, kind) or (kind in (int, float, (int, float)) and isinstance(v, bool)):
        raise BadRequest(f"{key!r} must be {what} (got {json.dumps(v)[:60]})")
    return v


def refuse_forced_tool_choice(choice: Any) -> None:
    raise BadRequest(f"'tool_choice' {json.dumps(choice)} is not served: a forced or disabled tool choice changes what "
                     "the policy may sample, so the call could not be trained on")


def refuse_constrained(field: str) -> None:
    raise BadRequest(f"{field!r} is not served: constrained decoding would sample from another distribution than the "
                     "policy's")


def tool_specs(tools: Any, function: Callable[[Any], dict[str, Any] | None], expected: str) -> list[dict[str, Any]] | None:
    """A request's tools as Strands tool specs: ``function(tool)`` gives a tool's (name,
    description, parameters) as a dict, or None when it is not a function tool (refused:
    ``expected`` says what is served)."""
    if not tools:
        return None
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    specs = []
    for i, t in enumerate(tools):
        fn = function(t) if isinstance(t, dict) else None
        if fn is None:
            kind = t.get("type") if isinstance(t, dict) else type(t).__name__
            raise BadRequest(f"tools[{i}]: {expected} (got a tool of type {kind!r})")
        specs.append(tool_spec(fn.get("name"), fn.get("description"), fn.get("parameters"), f"tools[{i}]"))
    return specs


def check_stream(body: dict[str, Any]) -> bool:
    return bool(opt(body, "stream", bool, "true or false"))


def check_no_top_logprobs(body: dict[str, Any]) -> None:
    n = opt(body, "top_logprobs", int, "an integer")
    if n:
        raise BadRequest(f"'top_logprobs' {n} is not served: only the sampled token's log-prob is recorded")


def token_logprobs(turn: SampledTurn, reply: Reply) -> list[dict[str, Any]]:
    """Every sampled token with its log-prob, exactly as recorded for training (reasoning,
    tool-call text and the end-of-turn token included, as vLLM gives them)."""
    out = []
    for i, lp in zip(turn.call.response_ids, turn.call.response_logprobs):
        text = reply.token_text(i)
        out.append({"token": text, "logprob": lp, "bytes": list(text.encode("utf-8")), "top_logprobs": []})
    return out


def text_of_parts(content: Any, where: str, kinds: tuple[str, ...]) -> str:
    """A message's text: a string, or a list of parts of the given ``kinds`` with a ``text``;
    anything else (an image, a file) is refused, never dropped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where}: 'content' must be a string or a list of text parts")
    parts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in kinds or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise BadRequest(f"{where}: only text content is served (got a part of type {kind!r})")
        parts.append(part["text"])
    return "\n".join(parts)


def tool_arguments(args: Any, name: Any, where: str) -> dict[str, Any]:
    """A tool call's arguments as the object the model wrote: a JSON text or an object."""
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise BadRequest(f"{where}: the arguments of tool call {name!r} are not valid JSON") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise BadRequest(f"{where}: the arguments of tool call {name!r} must be a JSON object")
    return args


def tool_spec(name: Any, description: Any, parameters: Any, where: str) -> dict[str, Any]:
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{where}: a tool needs a name")
    if parameters is not None and not isinstance(parameters, dict):
        raise BadRequest(f"{where}: the parameters of tool {name!r} must be a JSON schema object")
    if description is not None and not isinstance(description, str):
        raise BadRequest(f"{where}: the description of tool {name!r} must be a string")
    return {"name": name, "description": description or "", "inputSchema": {"json": parameters or {}}}


def add_tool_results(out: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """Tool results as one Strands user message, joined to the previous one when that holds only
    results (consecutive result messages are one, as Strands keeps them)."""
    prev = out[-1] if out else None
    if prev is not None and prev["role"] == "user" and all("toolResult" in b for b in prev["content"]):
        prev["content"].extend(results)
    else:
        out.append({"role": "user", "content": results})


def tool_result(tool_use_id: Any, text: str, ok: bool = True) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "status": "success" if ok else "error",
                           "content": [{"text": text}]}}
