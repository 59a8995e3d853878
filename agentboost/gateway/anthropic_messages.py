"""Anthropic Messages (``/v1/messages``): requests -> the trainable model's (Strands) messages, and
sampled turns -> Anthropic messages and their stream of events.

``system`` (a string or text blocks) is the system prompt; message content is a string or blocks:
``text``, ``thinking`` (the model family's reasoning: the turn's reasoning goes out as a thinking
block and comes back as one), ``tool_use`` and ``tool_result``. Each thinking block the gateway
gives carries a signature (a digest of its text) so that clients which send back only signed
thinking (Anthropic's own SDKs, Strands' ``AnthropicModel``) send it back. The model family's
reasoning is the run's: a client's ``thinking`` setting is counted, as its sampling settings are.
Auth: ``x-api-key`` (the Anthropic SDK's) or a bearer token.
"""

from __future__ import annotations

import hashlib
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
    check_stream,
    opt,
    refuse_constrained,
    refuse_forced_tool_choice,
    sse,
    text_of_parts,
    tool_arguments,
    tool_result,
    tool_specs,
)

IGNORED_SETTINGS = ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "thinking", "speed")
HONOURED = ("messages", "system", "tools", "tool_choice", "stream", "metadata", "output_config")
NO_EFFECT = ("model", "service_tier", "cache_control", "inference_geo", "user_profile_id", "workspace_id",
             "diagnostics")
REFUSED = {"container": "the policy runs no code container", "mcp_servers": "the policy reaches no MCP server"}
KEYS = ("cache_control", "citations")  # keys of a block that change nothing the model sees


def thinking_signature(text: str) -> str:
    return "agentboost-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _blocks(content: Any, role: str, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadRequest(f"{where}: 'content' must be a string or a list of blocks")
    for j, b in enumerate(content):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise BadRequest(f"{where}: content[{j}] must be a block with a 'type'")
    return content


def to_strands(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}] must be an object")
        role = m.get("role")
        where = f"messages[{i}] ({role})"
        if role not in ("user", "assistant"):
            raise BadRequest(f"{where}: the role must be user or assistant (the system prompt is 'system')")
        texts: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        for j, b in enumerate(_blocks(m.get("content"), role, where)):
            kind, here = b["type"], f"{where} content[{j}] ({b['type']})"
            if kind == "text":
                if not isinstance(b.get("text"), str):
                    raise BadRequest(f"{here}: 'text' must be a string")
                (blocks if role == "assistant" else texts).append({"text": b["text"]})
            elif kind == "thinking" and role == "assistant":
                if not isinstance(b.get("thinking"), str):
                    raise BadRequest(f"{here}: 'thinking' must be a string")
                if b["thinking"]:
                    blocks.append({"reasoningContent": {"reasoningText": {"text": b["thinking"]}}})
            elif kind == "tool_use" and role == "assistant":
                if not isinstance(b.get("name"), str) or not isinstance(b.get("id"), str):
                    raise BadRequest(f"{here}: a tool_use needs an 'id' and a 'name'")
                blocks.append({"toolUse": {"toolUseId": b["id"], "name": b["name"],
                                           "input": tool_arguments(b.get("input"), b["name"], here)}})
            elif kind == "tool_result" and role == "user":
                content = b.get("content")
                text = content if isinstance(content, str) else text_of_parts(content, here, ("text",))
                is_error = opt(b, "is_error", bool, "true or false")
                results.append(tool_result(b.get("tool_use_id"), text, ok=not is_error))
            else:
                raise BadRequest(f"{here}: a {role} message may hold "
                                 + ("text, thinking and tool_use blocks" if role == "assistant"
                                    else "text and tool_result blocks") + f" (got {kind!r})")
        if role == "assistant":
            if not any("text" in b for b in blocks) and not any("toolUse" in b for b in blocks):
                blocks.append({"text": ""})
            out.append({"role": "assistant", "content": blocks})
            continue
        if results:
            add_tool_results(out, results)
        if texts:
            if results:
                out[-1]["content"].append({"text": "\n".join(t["text"] for t in texts)})
            else:
                out.append({"role": "user", "content": [{"text": "\n".join(t["text"] for t in texts)}]})
    return out


def _system(system: Any) -> str | None:
    if system is None:
        return None
    if isinstance(system, str):
        return system or None
    return text_of_parts(system, "system", ("text",)) or None


def _tool_specs(tools: Any) -> list[dict[str, Any]] | None:
    def function(t: dict[str, Any]) -> dict[str, Any] | None:
        if t.get("type", "custom") != "custom":
            return None
        return {"name": t.get("name"), "description": t.get("description"), "parameters": t.get("input_schema")}

    return tool_specs(tools, function, "only client tools (name, description, input_schema) are served: the policy "
                                       "has no server tools")


class Messages(Protocol):
    name = "Anthropic Messages"
    route = "/messages"
    id_prefix = "msg_"

    def parse(self, body: Any) -> Call:
        ignored = check_fields(body, "the Messages API", HONOURED, NO_EFFECT, IGNORED_SETTINGS, REFUSED)
        choice = opt(body, "tool_choice", dict, "an object such as {\"type\": \"auto\"}")
        if choice is not None:
            if choice.get("type") != "auto":
                refuse_forced_tool_choice(choice)
            if choice.get("disable_parallel_tool_use"):
                ignored.append("tool_choice.disable_parallel_tool_use")
        config = opt(body, "output_config", dict, "an object") or {}
        if config.get("format") is not None:
            refuse_constrained("output_config.format")
        if config:
            ignored.append("output_config")
        metadata = opt(body, "metadata", dict, "an object") or {}
        user = opt(metadata, "user_id", str, "a string")
        stream = check_stream(body)
        return Call(to_strands(body.get("messages")), _system(body.get("system")), _tool_specs(body.get("tools")),
                    ignored, stream=stream, user=user)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                409: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error"}.get(
                    status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    # -- answers --------------------------------------------------------------------------------
    @staticmethod
    def _content(turn: SampledTurn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if turn.reasoning:
            out.append({"type": "thinking", "thinking": turn.reasoning, "signature": thinking_signature(turn.reasoning)})
        if turn.content or not turn.tool_calls:
            out.append({"type": "text", "text": turn.content})
        out.extend({"type": "tool_use", "id": i, "name": tc.name, "input": tc.arguments} for i, tc in turn.tool_calls)
        return out

    def _message(self, turn: SampledTurn, reply: Reply, content: list[dict[str, Any]], done: bool) -> dict[str, Any]:
        return {"id": reply.id, "type": "message", "role": "assistant", "model": reply.model, "content": content,
                "stop_reason": turn.stop_reason if done else None, "stop_sequence": None,
                "usage": {"input_tokens": len(turn.call.prompt_ids),
                          "output_tokens": len(turn.call.response_ids) if done else 0}}

    def answer(self, turn: SampledTurn, call: Call, reply: Reply) -> dict[str, Any]:
        return self._message(turn, reply, self._content(turn), done=True)

    def events(self, turn: SampledTurn, call: Call, reply: Reply) -> Iterable[bytes]:
        def event(kind: str, **data: Any) -> bytes:
            return sse(kind, {"type": kind, **data})

        yield event("message_start", message=self._message(turn, reply, [], done=False))
        for index, block in enumerate(self._content(turn)):
            if block["type"] == "thinking":
                yield event("content_block_start", index=index,
                            content_block={"type": "thinking", "thinking": "", "signature": ""})
                yield event("content_block_delta", index=index,
                            delta={"type": "thinking_delta", "thinking": block["thinking"]})
                yield event("content_block_delta", index=index,
                            delta={"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "text":
                yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                if block["text"]:
                    yield event("content_block_delta", index=index, delta={"type": "text_delta", "text": block["text"]})
            else:
                yield event("content_block_start", index=index, content_block={**block, "input": {}})
                yield event("content_block_delta", index=index,
                            delta={"type": "input_json_delta", "partial_json": json.dumps(block["input"])})
            yield event("content_block_stop", index=index)
        yield event("message_delta", delta={"stop_reason": turn.stop_reason, "stop_sequence": None},
                    usage={"output_tokens": len(turn.call.response_ids)})
        yield event("message_stop")
