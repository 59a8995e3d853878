"""``llama3_json``: Llama 3.1 / 3.2 / 3.3 JSON calls, the whole turn one JSON object.

    {"name": "calculator", "parameters": {"expression": "17 + 25"}}

As the Llama 3.1 chat template writes a custom tool's call (one per turn) and vLLM's
``llama3_json`` parser reads it. The turn may start with ``<|python_tag|>``; ``"arguments"`` is read
in place of ``"parameters"``; several calls in one turn are objects separated by ``;`` (vLLM's
convention; the template itself allows one call per turn).

What is a call: the format has no tag of its own, so a turn is a call when, past leading white
space and an optional ``<|python_tag|>``, it starts with ``{`` and its first JSON object has a
``name``, ``parameters`` or ``arguments`` key. Such a turn must be nothing but calls: invalid or cut
off JSON, a missing name, both ``parameters`` and ``arguments``, or text after the calls make it
malformed. A turn that starts with prose is plain text whatever JSON it quotes (vLLM's
non-streaming parser would search the prose for JSON; its streaming parser, like agentboost, only
looks at the start), and so is a JSON answer without those keys. After ``<|python_tag|>``, anything
but JSON calls (a built-in tool call or code, which agentboost does not run) is malformed.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .arguments import json_object_arguments, valid_name
from .registry import ParsedOutput, ParsedToolCall, register_tool_parser

PYTHON_TAG = "<|python_tag|>"
_DECODER = json.JSONDecoder()
_CALL_KEYS = ("name", "parameters", "arguments")


def _skip_space(s: str, pos: int) -> int:
    while pos < len(s) and s[pos].isspace():
        pos += 1
    return pos


def _call(obj: Any, raw: str) -> tuple[ParsedToolCall | None, str | None]:
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    name = obj.get("name")
    if not isinstance(name, str) or not valid_name(name):
        return None, "missing or invalid 'name'"
    if "parameters" in obj and "arguments" in obj:
        return None, "both 'parameters' and 'arguments'"
    args, err = json_object_arguments(obj.get("parameters", obj.get("arguments", {})), "parameters")
    if err:
        return None, err
    return ParsedToolCall(name=name, arguments=args, raw=raw), None


def parse_llama3_json(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    body = text.lstrip()
    tagged = body.startswith(PYTHON_TAG)
    if tagged:
        body = body[len(PYTHON_TAG):].lstrip()
    if not body.startswith("{"):
        if tagged:
            return ParsedOutput(text=text, malformed=[f"{PYTHON_TAG} followed by something other than JSON "
                                                      "calls (a built-in tool call or code is not run)"])
        return ParsedOutput(text=text)
    objects: list[tuple[Any, str]] = []
    pos = 0
    try:
        while True:
            start = pos
            obj, pos = _DECODER.raw_decode(body, pos)
            objects.append((obj, body[start:pos]))
            after = _skip_space(body, pos)
            if after < len(body) and body[after] == ";" and _skip_space(body, after + 1) < len(body):
                pos = _skip_space(body, after + 1)
                continue
            break
    except json.JSONDecodeError as e:
        if not objects:
            return ParsedOutput(text=text, malformed=[f"invalid JSON: {e.msg} at char {e.pos}"])
        return ParsedOutput(text=text, malformed=[f"invalid JSON after ';': {e.msg} at char {e.pos}"])
    first = objects[0][0]
    if not tagged and isinstance(first, dict) and not any(k in first for k in _CALL_KEYS):
        return ParsedOutput(text=text)  # a JSON answer, not a call
    rest = body[pos:].strip()
    if rest and rest != ";":
        return ParsedOutput(text=text, malformed=[f"text after the tool call: {rest[:40]!r}"])
    calls, malformed = [], []
    for obj, raw in objects:
        call, err = _call(obj, raw)
        if call is not None:
            calls.append(call)
        else:
            malformed.append(err or "malformed")
    if malformed:
        return ParsedOutput(text=text, malformed=malformed)
    return ParsedOutput(text="", tool_calls=calls)


def format_llama3_json(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return "; ".join('{"name": "' + name + '", "parameters": ' + json.dumps(args, ensure_ascii=False) + "}"
                     for name, args in calls)


register_tool_parser("llama3_json", parse_llama3_json, format_llama3_json,
                     template_markers=[(PYTHON_TAG,), ("<|start_header_id|>", '"parameters"')])
