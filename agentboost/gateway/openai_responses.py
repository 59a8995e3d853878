"""OpenAI Responses (``/v1/responses``): requests -> the trainable model's (Strands) messages, and
sampled turns -> Responses objects and their stream of semantic events.

The input is a string or a list of items: messages (``input_text``/``output_text`` parts),
``reasoning`` items (their ``reasoning_text`` content is the turn's reasoning), ``function_call``
and ``function_call_output`` items. Consecutive assistant items (reasoning, message, function
calls) are one assistant turn, as the model sampled it. ``instructions`` is the system prompt
(system or developer messages at the start join it). ``previous_response_id`` continues a
response this session gave (kept unless ``store`` is false): the conversation is then that
response's input and output followed by the new items, as OpenAI keeps it. Function tools only;
``include: ["message.output_text.logprobs"]`` is honoured with every sampled token's log-prob.
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

LOGPROBS = "message.output_text.logprobs"
IGNORED_SETTINGS = ("temperature", "top_p", "max_output_tokens", "max_tool_calls", "reasoning", "top_k")
HONOURED = ("input", "instructions", "tools", "tool_choice", "previous_response_id", "stream", "stream_options",
            "store", "include", "top_logprobs", "text", "truncation", "parallel_tool_calls", "user",
            "safety_identifier")
NO_EFFECT = ("model", "metadata", "service_tier", "prompt_cache_key", "prompt_cache_retention",
             "prompt_cache_options", "moderation")
REFUSED = {"background": "a response is answered while the request waits",
           "conversation": "give 'previous_response_id', or the whole conversation as 'input'",
           "prompt": "a stored prompt template is not rendered here: give 'instructions' and 'input'",
           "context_management": "the conversation is kept as the client sends it (a compaction is a counted "
                                 "split only when the client does it)",
           "image": "only text is served", "access_programs": "not served", "background_options": "not served"}
INPUT_TEXT = ("input_text", "output_text", "text")


def _function_call(item: dict[str, Any], where: str) -> dict[str, Any]:
    name = item.get("name")
    if not isinstance(name, str) or not isinstance(item.get("call_id"), str):
        raise BadRequest(f"{where}: a function_call needs a 'name' and a 'call_id'")
    return {"toolUse": {"toolUseId": item["call_id"], "name": name,
                        "input": tool_arguments(item.get("arguments"), name, where)}}


def _reasoning(item: dict[str, Any], where: str) -> str:
    """The reasoning text of a reasoning item (its ``reasoning_text`` content; a summary is not the
    reasoning the model sampled, and an item without content is a turn whose reasoning was left
    out: a counted ``dropped_reasoning`` split where the template shows it)."""
    content = item.get("content") or []
    if not isinstance(content, list):
        raise BadRequest(f"{where}: 'content' must be a list of reasoning_text parts")
    return text_of_parts(content, where, ("reasoning_text",))


def items_to_strands(items: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """``input`` as (Strands messages, system texts from system/developer messages at the start)."""
    if isinstance(items, str):
        return [{"role": "user", "content": [{"text": items}]}], []
    if not isinstance(items, list) or not items:
        raise BadRequest("'input' must be a string or a non-empty list of items")
    system: list[str] = []
    out: list[dict[str, Any]] = []
    turn: list[dict[str, Any]] | None = None  # the assistant turn being assembled from consecutive items

    def assistant() -> list[dict[str, Any]]:
        nonlocal turn
        if turn is None:
            turn = []
            out.append({"role": "assistant", "content": turn})
        return turn

    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{i}] must be an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        where = f"input[{i}] ({kind})"
        if kind == "message":
            role = item.get("role")
            where = f"input[{i}] ({role} message)"
            if role in ("system", "developer"):
                if out:
                    raise BadRequest(f"{where}: a system message is served only at the start of the conversation")
                system.append(text_of_parts(item.get("content"), where, INPUT_TEXT))
            elif role == "user":
                turn = None
                out.append({"role": "user", "content": [{"text": text_of_parts(item.get("content"), where,
                                                                               INPUT_TEXT)}]})
            elif role == "assistant":
                blocks = assistant()
                text = text_of_parts(item.get("content"), where, ("output_text", "input_text"))
                if any("toolUse" in b for b in blocks):  # a message after the calls: another turn
                    turn = None
                    blocks = assistant()
                blocks.append({"text": text})
            else:
                raise BadRequest(f"{where}: unknown role {role!r}")
        elif kind == "reasoning":
            blocks = assistant()
            if any("text" in b or "toolUse" in b for b in blocks):
                turn = None
                blocks = assistant()
            text = _reasoning(item, where)
            if text:
                blocks.append({"reasoningContent": {"reasoningText": {"text": text}}})
        elif kind == "function_call":
            assistant().append(_function_call(item, where))
        elif kind == "function_call_output":
            turn = None
            output = item.get("output")
            text = output if isinstance(output, str) else text_of_parts(output, where, INPUT_TEXT)
            add_tool_results(out, [tool_result(item.get("call_id"), text)])
        elif kind == "item_reference":
            raise BadRequest(f"{where}: item references are not served: send the item itself, or continue "
                             "with 'previous_response_id'")
        else:
            raise BadRequest(f"{where}: only message, reasoning, function_call and function_call_output items "
                             f"are served (got {kind!r})")
    for m in out:  # a turn of calls alone has no text block, as the trainable model gives it
        if m["role"] == "assistant" and not m["content"]:
            m["content"].append({"text": ""})
    return out, system


def _tool_specs(tools: Any) -> list[dict[str, Any]] | None:
    return tool_specs(tools, lambda t: t if t.get("type", "function") == "function" else None,
                      "only function tools are served: the policy has no hosted tools")


class Responses(Protocol):
    name = "OpenAI Responses"
    route = "/responses"
    id_prefix = "resp_"
    keeps_responses = True

    def parse(self, body: Any) -> Call:
        ignored = check_fields(body, "the Responses API", HONOURED, NO_EFFECT, IGNORED_SETTINGS, REFUSED)
        if body.get("tool_choice") not in (None, "auto"):
            refuse_forced_tool_choice(body["tool_choice"])
        fmt = (opt(body, "text", dict, "an object such as {\"format\": {\"type\": \"text\"}}") or {})
        if fmt.get("format") not in (None, {"type": "text"}):
            refuse_constrained("text.format")
        if fmt.get("verbosity") is not None:
            ignored.append("text.verbosity")
        if body.get("truncation") not in (None, "disabled"):
            raise BadRequest("'truncation' must be \"disabled\": the conversation is rendered as sent, never "
                             "trimmed by the server")
        include = opt(body, "include", list, "a list of strings") or []
        for x in include:
            if x == "reasoning.encrypted_content":  # no encrypted reasoning: it comes as plain reasoning_text
                ignored.append("include:reasoning.encrypted_content")
            elif x != LOGPROBS:
                raise BadRequest(f"'include' {x!r} is not served (only {LOGPROBS!r})")
        check_no_top_logprobs(body)
        stream = check_stream(body)
        opt(body, "stream_options", dict, "an object")
        store = opt(body, "store", bool, "true or false")
        prev = opt(body, "previous_response_id", str, "a response id")
        user = opt(body, "user", str, "a string") or opt(body, "safety_identifier", str, "a string")
        if opt(body, "parallel_tool_calls", bool, "true or false") is False:
            ignored.append("parallel_tool_calls")
        instructions = opt(body, "instructions", str, "a string")
        messages, system = items_to_strands(body.get("input"))
        system_text = "\n\n".join(([instructions] if instructions else []) + system) or None
        tools = _tool_specs(body.get("tools"))
        return Call(messages, system_text, tools, ignored, stream=stream, user=user, previous_response_id=prev,
                    options={"logprobs": LOGPROBS in include, "store": store is not False,
                             "echo": {"instructions": instructions, "tools": body.get("tools") or [],
                                      "metadata": body.get("metadata") or {}, "previous_response_id": prev,
                                      "store": store is not False, "user": body.get("user")}})

    # -- answers --------------------------------------------------------------------------------
    def _items(self, turn: SampledTurn, call: Call, reply: Reply) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        suffix = reply.id[len(self.id_prefix):]
        if turn.reasoning:
            out.append({"id": f"rs_{suffix}", "type": "reasoning", "summary": [], "status": "completed",
                        "content": [{"type": "reasoning_text", "text": turn.reasoning}]})
        if turn.content or not turn.tool_calls:
            part: dict[str, Any] = {"type": "output_text", "text": turn.content, "annotations": []}
            if call.options.get("logprobs"):
                part["logprobs"] = token_logprobs(turn, reply)
            out.append({"id": f"msg_{suffix}", "type": "message", "role": "assistant", "status": "completed",
                        "content": [part]})
        for n, (tool_use_id, tc) in enumerate(turn.tool_calls):
            out.append({"id": f"fc_{suffix}_{n}", "type": "function_call", "call_id": tool_use_id, "name": tc.name,
                        "arguments": json.dumps(tc.arguments), "status": "completed"})
        return out

    def _response(self, turn: SampledTurn, call: Call, reply: Reply, output: list[dict[str, Any]],
                  status: str) -> dict[str, Any]:
        p, c = len(turn.call.prompt_ids), len(turn.call.response_ids)
        echo = call.options.get("echo", {})
        truncated = turn.stop_reason == "max_tokens"
        done = status != "in_progress"
        return {"id": reply.id, "object": "response", "created_at": reply.created, "model": reply.model,
                "status": status, "error": None,
                "incomplete_details": {"reason": "max_output_tokens"} if truncated and done else None,
                "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": echo.get("tools", []),
                "instructions": echo.get("instructions"), "metadata": echo.get("metadata", {}),
                "previous_response_id": echo.get("previous_response_id"), "store": echo.get("store", True),
                "temperature": None, "top_p": None, "truncation": "disabled", "user": echo.get("user"),
                "text": {"format": {"type": "text"}},
                "usage": {"input_tokens": p, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": c,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": p + c} if done else None}

    def answer(self, turn: SampledTurn, call: Call, reply: Reply) -> dict[str, Any]:
        status = "incomplete" if turn.stop_reason == "max_tokens" else "completed"
        return self._response(turn, call, reply, self._items(turn, call, reply), status)

    def events(self, turn: SampledTurn, call: Call, reply: Reply) -> Iterable[bytes]:
        seq = 0

        def event(kind: str, **data: Any) -> bytes:
            nonlocal seq
            seq += 1
            return sse(kind, {"type": kind, "sequence_number": seq - 1, **data})

        yield event("response.created", response=self._response(turn, call, reply, [], "in_progress"))
        yield event("response.in_progress", response=self._response(turn, call, reply, [], "in_progress"))
        items = self._items(turn, call, reply)
        for index, item in enumerate(items):
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "reasoning":
                text = item["content"][0]["text"]
                yield event("response.output_item.added", output_index=index, item={**item, "content": [],
                                                                                     "status": "in_progress"})
                yield event("response.reasoning_text.delta", **where, content_index=0, delta=text)
                yield event("response.reasoning_text.done", **where, content_index=0, text=text)
            elif item["type"] == "message":
                part = item["content"][0]
                empty = {"type": "output_text", "text": "", "annotations": []}
                yield event("response.output_item.added", output_index=index, item={**item, "content": [],
                                                                                     "status": "in_progress"})
                yield event("response.content_part.added", **where, content_index=0, part=empty)
                yield event("response.output_text.delta", **where, content_index=0, delta=part["text"],
                            logprobs=part.get("logprobs", []))
                yield event("response.output_text.done", **where, content_index=0, text=part["text"],
                            logprobs=part.get("logprobs", []))
                yield event("response.content_part.done", **where, content_index=0, part=part)
            else:
                yield event("response.output_item.added", output_index=index,
                            item={**item, "arguments": "", "status": "in_progress"})
                yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
                yield event("response.function_call_arguments.done", **where, name=item["name"],
                            arguments=item["arguments"])
            yield event("response.output_item.done", output_index=index, item=item)
        final = self.answer(turn, call, reply)
        yield event("response.incomplete" if final["status"] == "incomplete" else "response.completed", response=final)


def answer_messages(turn: SampledTurn) -> dict[str, Any]:
    """The turn as the Strands assistant message a later ``previous_response_id`` continues from."""
    return {"role": "assistant", "content": turn.blocks()}
