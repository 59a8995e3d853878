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
from typing import Any, Sequence

from .arguments import json_object_arguments
from .registry import (
    ParsedOutput,
    ParsedToolCall,
    parse_tool_call_blocks,
    register_tool_parser,
)


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
    args, err = json_object_arguments(obj.get("arguments", {}))
    if err:
        return None, err
    return ParsedToolCall(name=name, arguments=args, raw=body), None


def parse_hermes(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    """Hermes / Qwen format: one JSON object per ``<tool_call>...</tool_call>`` block (``tools`` is
    not needed: JSON carries its own types)."""
    return parse_tool_call_blocks(text, lambda body: _parse_hermes_block(body.strip()))


def format_hermes(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return "\n".join("<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
                     + "\n</tool_call>" for name, args in calls)


register_tool_parser("hermes", parse_hermes, format_hermes)
