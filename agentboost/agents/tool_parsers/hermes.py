"""``hermes``: Hermes / Qwen2.5 / Qwen3 calls, one JSON object per ``<tool_call>`` block.

    <tool_call>
    {"name": "calculator", "arguments": {"expression": "17 + 25"}}
    </tool_call>

Several blocks make parallel calls. The default parser, and the format agentboost teaches through
the system prompt to models whose template knows no tools (SmolLM2). Any ``<tool_call>`` in the
text starts a call: an opening tag with no closing tag (a turn cut by max tokens) is malformed.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from .registry import ParsedOutput, ParsedToolCall, register_tool_parser

_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _parse_hermes_block(body: str) -> tuple[ParsedToolCall | None, str | None]:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON: {e.msg} at char {e.pos}"
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, "missing or non-string 'name'"
    args = obj.get("arguments", {})
    if isinstance(args, str):  # some models double-encode; only accept it when it is valid JSON
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None, "'arguments' is a string that is not JSON"
    if not isinstance(args, dict):
        return None, f"'arguments' must be an object, got {type(args).__name__}"
    return ParsedToolCall(name=name, arguments=args, raw=body), None


def parse_hermes(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    """Hermes / Qwen format: one JSON object per ``<tool_call>...</tool_call>`` block (``tools`` is
    not needed: JSON carries its own types)."""
    calls: list[ParsedToolCall] = []
    malformed: list[str] = []
    for m in _HERMES_BLOCK.finditer(text):
        call, err = _parse_hermes_block(m.group(1).strip())
        if call is not None:
            calls.append(call)
        else:
            malformed.append(err or "malformed")
    tail = _HERMES_BLOCK.sub("", text)
    if "<tool_call>" in tail:
        malformed.append("unterminated <tool_call> block")
    if malformed:
        return ParsedOutput(text=text, tool_calls=[], malformed=malformed)
    visible = tail.strip() if calls else text
    return ParsedOutput(text=visible, tool_calls=calls, malformed=[])


def format_hermes(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return "\n".join("<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
                     + "\n</tool_call>" for name, args in calls)


register_tool_parser("hermes", parse_hermes, format_hermes)
