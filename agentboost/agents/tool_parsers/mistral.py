"""``mistral``: Mistral calls after the ``[TOOL_CALLS]`` token, in the three documented shapes.

    [TOOL_CALLS]calculator[ARGS]{"expression": "17 + 25"}                  tokenizer v13+ (Magistral 2509,
                                                                            Ministral 3, Devstral 2, Small 4)
    [TOOL_CALLS]calculator[CALL_ID]a1B2c3D4e[ARGS]{"expression": "17 + 25"} tokenizer v11 (Small 3.2)
    [TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "17 + 25"}}]
                                                                            before v11 (7B v0.3, Nemo, Small 3.1)

As mistral-common encodes them and the models' chat templates write them (vLLM's ``mistral``
parser reads the same). Parallel calls: one ``[TOOL_CALLS]`` per call in the newer shapes, several
objects in the array in the older one. Text before the first ``[TOOL_CALLS]`` is the visible answer;
after the calls only white space may follow (the model ends its turn there). The v11 shape's
``[CALL_ID]`` is kept as the call's id; calls without one get 9 random alphanumerics
(``mistral_tool_call_id``), the only ids Mistral's chat templates accept with a tool result.

What is a call: anything after a ``[TOOL_CALLS]`` token, which the model cannot write by accident
(the tokenizer holds it as one special token); so a ``[TOOL_CALLS]`` followed by anything but
well-formed calls, JSON cut off, or text after the calls is malformed. A JSON array of
``{"name", "arguments"}`` objects or ``[ARGS]{...}`` without the token is plain text. The shape
vLLM's parser also reads when decoding drops the special tokens (``[TOOL_CALLS]name{...}``, no
``[ARGS]``) cannot occur here, as agentboost decodes with special tokens kept: it is malformed.
"""

from __future__ import annotations

import json
import random
import re
import string
from typing import Any, Sequence

from .arguments import json_object_arguments, valid_name
from .registry import ParsedOutput, ParsedToolCall, register_tool_parser

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_HEAD = re.compile(r"\s*([^\s\[\]{}]+)(?:" + re.escape(CALL_ID) + r"([A-Za-z0-9]+))?" + re.escape(ARGS))
_DECODER = json.JSONDecoder()


def _json_at(s: str, pos: int) -> tuple[Any, int]:
    while pos < len(s) and s[pos].isspace():
        pos += 1
    return _DECODER.raw_decode(s, pos)


def _parse_segment(seg: str) -> tuple[list[ParsedToolCall], str | None]:
    """One ``[TOOL_CALLS]``'s calls: the text after the token up to the next one."""
    try:
        if seg.lstrip().startswith("["):  # before v11: a JSON array of {"name", "arguments"}
            items, end = _json_at(seg, 0)
            calls = []
            for item in items:
                if not isinstance(item, dict):
                    return [], f"expected an array of call objects, got an item of type {type(item).__name__}"
                name = item.get("name")
                if not isinstance(name, str) or not valid_name(name):
                    return [], "a call object without a valid 'name'"
                args, err = json_object_arguments(item.get("arguments", {}))
                if err:
                    return [], err
                calls.append(ParsedToolCall(name=name, arguments=args, raw=seg.strip()))
            if not calls:
                return [], "empty array of calls"
        else:  # v11+: NAME[ARGS]{...} or NAME[CALL_ID]ID[ARGS]{...}
            m = _HEAD.match(seg)
            if m is None or not valid_name(m.group(1)):
                return [], f"expected NAME{ARGS}{{...}} after {TOOL_CALLS}, got {seg.strip()[:40]!r}"
            obj, end = _json_at(seg, m.end())
            args, err = json_object_arguments(obj)
            if err:
                return [], err
            calls = [ParsedToolCall(name=m.group(1), arguments=args, raw=seg.strip(), id=m.group(2))]
    except json.JSONDecodeError as e:
        return [], f"invalid JSON: {e.msg} at char {e.pos}"
    if seg[end:].strip():
        return [], f"text after the tool call: {seg[end:].strip()[:40]!r}"
    return calls, None


def parse_mistral(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    if TOOL_CALLS not in text:
        return ParsedOutput(text=text)
    content, *segments = text.split(TOOL_CALLS)
    calls: list[ParsedToolCall] = []
    malformed: list[str] = []
    for seg in segments:
        found, err = _parse_segment(seg)
        if err:
            malformed.append(err)
        calls += found
    if malformed:
        return ParsedOutput(text=text, tool_calls=[], malformed=malformed)
    return ParsedOutput(text=content.strip(), tool_calls=calls)


def format_mistral(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return "".join(f"{TOOL_CALLS}{name}{ARGS}{json.dumps(args, ensure_ascii=False)}" for name, args in calls)


_ID_CHARS = string.ascii_letters + string.digits
_ID_RANDOM = random.SystemRandom()


def mistral_tool_call_id() -> str:
    """9 random alphanumeric characters, as mistral-common makes them: Mistral's chat templates
    refuse a tool result whose ``tool_call_id`` is anything else."""
    return "".join(_ID_RANDOM.choice(_ID_CHARS) for _ in range(9))


register_tool_parser("mistral", parse_mistral, format_mistral, template_markers=[(TOOL_CALLS,)],
                     id_maker=mistral_tool_call_id)
