"""``kimi_k2``: Kimi K2 calls, a section of calls in the model's own special tokens.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0<|tool_call_argument_begin|>
    {"expression": "17 + 25"}<|tool_call_end|><|tool_calls_section_end|>

(one line; broken here for the page), as Kimi K2's chat templates write them and vLLM's ``kimi_k2``
parser reads them. Each call's id is ``functions.NAME:INDEX`` (``NAME:INDEX`` is read too, as vLLM
does; the call keeps the id as written, which the template prints back with its result) and its arguments are one JSON object; several calls in the section make parallel calls.
White space between the tokens is allowed.

What is a call: a ``<|tool_call_begin|>`` inside a ``<|tool_calls_section_begin|>`` ...
``<|tool_calls_section_end|>`` section. A section with no end, an empty section, anything but
calls inside it, a call outside a section, an id not of that form or arguments that are not a JSON
object are malformed. ``functions.NAME:0`` written in prose is plain text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from .arguments import valid_name
from .registry import ParsedOutput, ParsedToolCall, register_tool_parser

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENTS_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"

_SECTION = re.compile(re.escape(SECTION_BEGIN) + "(.*?)" + re.escape(SECTION_END), re.DOTALL)
_CALL = re.compile(re.escape(CALL_BEGIN) + "(.*?)" + re.escape(CALL_END), re.DOTALL)
_ID = re.compile(r"(?:functions\.)?(.+):(\d+)")


def _parse_call(body: str) -> tuple[ParsedToolCall | None, str | None]:
    head, sep, arguments = body.partition(ARGUMENTS_BEGIN)
    if not sep:
        return None, f"a call without {ARGUMENTS_BEGIN}"
    m = _ID.fullmatch(head.strip())
    if m is None or not valid_name(m.group(1)):
        return None, f"call id {head.strip()[:40]!r} is not functions.NAME:INDEX"
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON arguments: {e.msg} at char {e.pos}"
    if not isinstance(args, dict):
        return None, f"arguments must be a JSON object, got {type(args).__name__}"
    return ParsedToolCall(name=m.group(1), arguments=args, raw=body, id=head.strip()), None


def _parse_section(body: str) -> tuple[list[ParsedToolCall], list[str]]:
    calls, malformed, pos = [], [], 0
    for m in _CALL.finditer(body):
        if body[pos:m.start()].strip():
            return [], [f"unexpected text in the tool-calls section: {body[pos:m.start()].strip()[:40]!r}"]
        call, err = _parse_call(m.group(1))
        if call is not None:
            calls.append(call)
        else:
            malformed.append(err or "malformed")
        pos = m.end()
    rest = body[pos:].strip()
    if rest:
        what = f"a call without {CALL_END}" if CALL_BEGIN in rest else "unexpected text"
        return [], [f"{what} in the tool-calls section: {rest[:40]!r}"]
    if not calls and not malformed:
        return [], ["empty tool-calls section"]
    return calls, malformed


def parse_kimi_k2(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    calls: list[ParsedToolCall] = []
    malformed: list[str] = []
    for m in _SECTION.finditer(text):
        found, errs = _parse_section(m.group(1))
        calls += found
        malformed += errs
    tail = _SECTION.sub("", text)
    if SECTION_BEGIN in tail:
        malformed.append(f"unterminated tool-calls section ({SECTION_BEGIN} without {SECTION_END})")
    elif CALL_BEGIN in tail:
        malformed.append(f"a tool call outside a {SECTION_BEGIN} section")
    if malformed:
        return ParsedOutput(text=text, tool_calls=[], malformed=malformed)
    return ParsedOutput(text=tail.strip() if calls else text, tool_calls=calls)


def format_kimi_k2(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    body = "".join(f"{CALL_BEGIN}functions.{name}:{i}{ARGUMENTS_BEGIN}{json.dumps(args, ensure_ascii=False)}{CALL_END}"
                   for i, (name, args) in enumerate(calls))
    return f"{SECTION_BEGIN}{body}{SECTION_END}"


register_tool_parser("kimi_k2", parse_kimi_k2, format_kimi_k2,
                     template_markers=[(SECTION_BEGIN,), ("<|im_middle|>", "tool_declare")])
