"""OpenAI chat completions (``/v1/chat/completions``): requests -> the trainable model's (Strands)
messages, and sampled turns -> chat-completions responses and stream chunks.

The conversion is lossless for what the renderer shows the model: text, reasoning a client sends
back (``reasoning_content`` or ``reasoning``), tool calls with their ids and parsed arguments, tool
results. What cannot be rendered as the policy would see it (images, a system message in the
middle) is refused with a one-line reason, never dropped. ``logprobs`` is honoured (every sampled
token's log-prob, as recorded); the fields of the request are checked as ``protocol.py`` says.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..agents.trainable_model import SampledTurn
from .protocol import (
    BadRequest,
    Call,
    Protocol,
    Reply,
    add_tool_results,
    check_fields,
    check_no_top_logprobs,
    check_stream,
    opt,
    refuse_constrained,
    refuse_forced_tool_choice,
    sse,
    text_of_parts,
    token_logprobs,
    tool_arguments,
    tool_result,
    tool_specs,
)

# the run's sampling settings always win: these, when a client sends them, are counted and ignored
IGNORED_SETTINGS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
                    "frequency_penalty", "presence_penalty", "logit_bias", "top_k", "min_p",
                    "repetition_penalty", "reasoning_effort", "verbosity")
HONOURED = ("messages", "tools", "tool_choice", "n", "response_format", "stream", "stream_options", "logprobs",
            "top_logprobs", "user", "parallel_tool_calls")
NO_EFFECT = ("model", "metadata", "store", "service_tier", "prompt_cache_key", "prompt_cache_retention",
             "prompt_cache_options", "safety_identifier", "moderation")
REFUSED = {"functions": "give 'tools' (the legacy 'functions' form is not served)",
           "function_call": "give 'tool_choice' (the legacy 'function_call' form is not served)",
           "audio": "only text is served", "modalities": "only text is served",
           "prediction": "a predicted output changes what is sampled",
           "web_search_options": "the policy has no hosted search"}

__all__ = ["BadRequest", "ChatCompletions", "to_strands", "check_request", "completion", "chunks"]


def _text_parts(content: Any, where: str) -> str:
    return text_of_parts(content, where, ("text",))


def _tool_call(tc: Any, where: str) -> dict[str, Any]:
    fn = tc.get("function") if isinstance(tc, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where}: each tool call needs a function with a name")
    return {"toolUse": {"toolUseId": tc.get("id"), "name": fn["name"],
                        "input": tool_arguments(fn.get("arguments"), fn["name"], where)}}


def to_strands(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None, list[dict[str, Any]] | None]:
    """A request's messages and tools as (Strands messages, system prompt, tool specs)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}] must be an object")
        role = m.get("role")
        where = f"messages[{i}] ({role})"
        if role in ("system", "developer"):
            if out:
                raise BadRequest(f"{where}: a system message is served only at the start of the conversation")
            system.append(_text_parts(m.get("content"), where))
        elif role == "user":
            out.append({"role": "user", "content": [{"text": _text_parts(m.get("content"), where)}]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                blocks.append({"reasoningContent": {"reasoningText": {"text": reasoning}}})
            text = _text_parts(m.get("content"), where)
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise BadRequest(f"{where}: 'tool_calls' must be a list")
            if text or not calls:
                blocks.append({"text": text})
            blocks.extend(_tool_call(tc, where) for tc in calls)
            out.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            add_tool_results(out, [tool_result(m.get("tool_call_id"), _text_parts(m.get("content"), where))])
        else:
            raise BadRequest(f"{where}: unknown role {role!r}")
    return out, ("\n\n".join(system) if system else None), _tool_specs(body.get("tools"))


def _tool_specs(tools: Any) -> list[dict[str, Any]] | None:
    def function(t: dict[str, Any]) -> dict[str, Any] | None:
        fn = t.get("function")
        return fn if t.get("type", "function") == "function" and isinstance(fn, dict) else None

    return tool_specs(tools, function, "expected {'type': 'function', 'function': {'name': ..., ...}}")


def check_request(body: dict[str, Any]) -> list[str]:
    """Refuse what the gateway cannot honour and still train on, a malformed optional field or one
    chat completions does not define (BadRequest); return the sampling settings the client set,
    which are ignored (the run's settings win)."""
    ignored = check_fields(body, "chat completions", HONOURED, NO_EFFECT, IGNORED_SETTINGS, REFUSED)
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(f"'n' must be 1 (got {n!r}): one episode samples one answer per call")
    if body.get("tool_choice") not in (None, "auto"):
        refuse_forced_tool_choice(body["tool_choice"])
    if body.get("response_format") not in (None, {"type": "text"}):
        refuse_constrained("response_format")
    check_stream(body)
    options = opt(body, "stream_options", dict, "an object such as {\"include_usage\": true}") or {}
    opt(options, "include_usage", bool, "true or false")
    opt(body, "logprobs", bool, "true or false")
    check_no_top_logprobs(body)
    opt(body, "user", str, "a string")
    if opt(body, "parallel_tool_calls", bool, "true or false") is False:
        ignored.append("parallel_tool_calls")  # the policy samples as many calls as it writes: counted
    return ignored


class ChatCompletions(Protocol):
    name = "OpenAI chat completions"
    route = "/chat/completions"
    id_prefix = "chatcmpl-"

    def parse(self, body: Any) -> Call:
        ignored = check_request(body)
        messages, system, tools = to_strands(body)
        return Call(messages, system, tools, ignored, stream=check_stream(body), user=body.get("user"),
                    options={"include_usage": bool((body.get("stream_options") or {}).get("include_usage")),
                             "logprobs": bool(body.get("logprobs"))})

    def answer(self, turn: SampledTurn, call: Call, reply: Reply) -> dict[str, Any]:
        out = completion(turn, reply.model, reply.id, reply.created)
        if call.options.get("logprobs"):
            out["choices"][0]["logprobs"] = {"content": token_logprobs(turn, reply), "refusal": None}
        if reply.system_fingerprint:
            out["system_fingerprint"] = reply.system_fingerprint
        return out

    def events(self, turn: SampledTurn, call: Call, reply: Reply) -> Iterable[bytes]:
        out = chunks(turn, reply.model, reply.id, call.options.get("include_usage", False), reply.created)
        if call.options.get("logprobs"):  # on the first chunk: the turn's tokens, all of them
            out[0]["choices"][0]["logprobs"] = {"content": token_logprobs(turn, reply), "refusal": None}
        for c in out:
            if reply.system_fingerprint:  # as OpenAI sends it: on every chunk
                c["system_fingerprint"] = reply.system_fingerprint
            yield sse(None, c)
        yield b"data: [DONE]\n\n"


def finish_reason(turn: SampledTurn) -> str:
    return {"max_tokens": "length", "tool_use": "tool_calls"}.get(turn.stop_reason, "stop")


def _tool_calls(turn: SampledTurn) -> list[dict[str, Any]]:
    return [{"id": i, "type": "function", "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
            for i, tc in turn.tool_calls]


def usage(turn: SampledTurn) -> dict[str, int]:
    p, c = len(turn.call.prompt_ids), len(turn.call.response_ids)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def completion(turn: SampledTurn, model: str, completion_id: str, created: int) -> dict[str, Any]:
    """The non-streaming response: the content, the reasoning apart (as vLLM's reasoning parsers
    return it), every parallel tool call."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": turn.content if (turn.content or not turn.tool_calls) else None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = _tool_calls(turn)
    return {"id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(turn)}],
            "usage": usage(turn)}


def chunks(turn: SampledTurn, model: str, completion_id: str, include_usage: bool, created: int) -> list[dict[str, Any]]:
    """The same turn as stream chunks: the role, the reasoning, the content, each tool call whole,
    the finish reason, then the usage when asked for."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if turn.reasoning:
        out.append(chunk({"reasoning_content": turn.reasoning}))
    if turn.content:
        out.append(chunk({"content": turn.content}))
    for index, tc in enumerate(_tool_calls(turn)):
        out.append(chunk({"tool_calls": [{"index": index, **tc}]}))
    out.append(chunk({}, finish_reason(turn)))
    if include_usage:
        out.append({**head, "choices": [], "usage": usage(turn)})
    return out
