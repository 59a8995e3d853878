"""OpenAI chat-completions requests -> the trainable model's (Strands) messages, and sampled turns
-> chat-completions responses and stream chunks.

The conversion is lossless for what the renderer shows the model: text, reasoning a client sends
back (``reasoning_content`` or ``reasoning``), tool calls with their ids and parsed arguments, tool
results. What cannot be rendered as the policy would see it (images, a system message in the
middle) is refused with a one-line reason, never dropped.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..agents.trainable_model import SampledTurn

# the run's sampling settings always win: these, when a client sends them, are logged and ignored
IGNORED_SETTINGS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
                    "frequency_penalty", "presence_penalty", "logit_bias", "top_k", "min_p",
                    "repetition_penalty")


class BadRequest(ValueError):
    """A request the gateway refuses (HTTP 400); the message is the one-line reason."""


def _text_parts(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where}: 'content' must be a string or a list of text parts")
    parts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise BadRequest(f"{where}: only text content is served (got a part of type {kind!r})")
        parts.append(part["text"])
    return "\n".join(parts)


def _tool_call(tc: Any, where: str) -> dict[str, Any]:
    fn = tc.get("function") if isinstance(tc, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where}: each tool call needs a function with a name")
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise BadRequest(f"{where}: the arguments of tool call {fn['name']!r} are not valid JSON") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise BadRequest(f"{where}: the arguments of tool call {fn['name']!r} must be a JSON object")
    return {"toolUse": {"toolUseId": tc.get("id"), "name": fn["name"], "input": args}}


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
            result = {"toolResult": {"toolUseId": m.get("tool_call_id"), "status": "success",
                                     "content": [{"text": _text_parts(m.get("content"), where)}]}}
            prev = out[-1] if out else None
            # consecutive tool messages are one Strands user message of results, as Strands keeps them
            if prev is not None and prev["role"] == "user" and all("toolResult" in b for b in prev["content"]):
                prev["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
        else:
            raise BadRequest(f"{where}: unknown role {role!r}")
    return out, ("\n\n".join(system) if system else None), _tool_specs(body.get("tools"))


def _tool_specs(tools: Any) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    specs = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) and t.get("type", "function") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadRequest(f"tools[{i}]: expected {{'type': 'function', 'function': {{'name': ..., ...}}}}")
        specs.append({"name": fn["name"], "description": fn.get("description") or "",
                      "inputSchema": {"json": fn.get("parameters") or {}}})
    return specs


def check_request(body: dict[str, Any]) -> list[str]:
    """Refuse what the gateway cannot honour and still train on (BadRequest); return the sampling
    settings the client set, which are ignored (the run's settings win)."""
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(f"'n' must be 1 (got {n!r}): one episode samples one answer per call")
    choice = body.get("tool_choice")
    if choice not in (None, "auto"):
        raise BadRequest(f"'tool_choice' {json.dumps(choice)} is not served: a forced or disabled tool choice "
                         "changes what the policy may sample, so the call could not be trained on")
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}):
        raise BadRequest("'response_format' is not served: constrained decoding would sample from another "
                         "distribution than the policy's")
    return [k for k in IGNORED_SETTINGS if body.get(k) is not None]


def finish_reason(turn: SampledTurn) -> str:
    return {"max_tokens": "length", "tool_use": "tool_calls"}.get(turn.stop_reason, "stop")


def _tool_calls(turn: SampledTurn) -> list[dict[str, Any]]:
    return [{"id": i, "type": "function", "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
            for i, tc in turn.tool_calls]


def usage(turn: SampledTurn) -> dict[str, int]:
    p, c = len(turn.call.prompt_ids), len(turn.call.response_ids)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def completion(turn: SampledTurn, model: str, completion_id: str) -> dict[str, Any]:
    """The non-streaming response: the content, the reasoning apart (as vLLM's reasoning parsers
    return it), every parallel tool call."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": turn.content if (turn.content or not turn.tool_calls) else None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = _tool_calls(turn)
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(turn)}],
            "usage": usage(turn)}


def chunks(turn: SampledTurn, model: str, completion_id: str, include_usage: bool) -> list[dict[str, Any]]:
    """The same turn as stream chunks: the role, the reasoning, the content, each tool call whole,
    the finish reason, then the usage when asked for. The turn is sampled before the first chunk,
    so a streamed call records exactly what a non-streamed one does."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

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
