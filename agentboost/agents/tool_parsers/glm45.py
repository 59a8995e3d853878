"""``glm45``: GLM-4.5 / 4.6 / 4.7 calls, the function name then key/value tag pairs.

    <tool_call>calculator
    <arg_key>expression</arg_key>
    <arg_value>17 + 25</arg_value>
    </tool_call>

As GLM-4.5's chat template writes them (GLM-4.7 writes the same tags with no newlines; both are
read) and vLLM's ``glm45`` parser reads them. Several blocks make parallel calls. Keys and values
are stripped of surrounding white space, as vLLM does. Values are typed by the tool's schema
(``arguments.typed_value``); a parameter with no schema (no tools given, or one the tool does not
declare) is read as JSON where it is JSON and kept as text otherwise, as vLLM does (the template
writes non-string values as JSON).

What is a call: a ``<tool_call>`` block. Any ``<tool_call>`` starts one, so an opening tag with no
closing tag, a block that does not start with a function name, an ``<arg_key>`` without its
``<arg_value>`` or text between the pairs is malformed. ``<arg_key>`` outside a block is plain text.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from .arguments import (
    declared_types,
    format_value,
    json_or_text,
    tool_properties,
    typed_value,
    valid_name,
)
from .registry import (
    ParsedOutput,
    ParsedToolCall,
    parse_tool_call_blocks,
    register_tool_parser,
)

_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


def _parse_block(body: str, props: dict[str, dict[str, Any]] | None) -> tuple[ParsedToolCall | None, str | None]:
    first = body.find("<arg_key>")
    name = (body if first < 0 else body[:first]).strip()
    if not name:
        return None, "missing function name after <tool_call>"
    if not valid_name(name):
        return None, f"invalid function name {name[:40]!r}"
    schema = (props or {}).get(name, {})
    args: dict[str, Any] = {}
    pos = first if first >= 0 else len(body)
    for p in _PAIR.finditer(body, pos):
        gap = body[pos:p.start()]
        if gap.strip():
            return None, f"unexpected text in the call of {name}: {gap.strip()[:40]!r}"
        key, value = p.group(1).strip(), p.group(2).strip()
        if not valid_name(key):
            return None, f"invalid argument name {key[:40]!r}"
        if key in args:
            return None, f"argument {key!r} given twice"
        kinds = declared_types(schema.get(key))
        args[key] = typed_value(value, kinds) if kinds else json_or_text(value)
        pos = p.end()
    rest = body[pos:]
    if rest.strip():
        what = "an <arg_key> without its <arg_value>" if "<arg_key>" in rest or "<arg_value>" in rest \
            else "unexpected text"
        return None, f"{what} in the call of {name}: {rest.strip()[:40]!r}"
    return ParsedToolCall(name=name, arguments=args, raw=body), None


def parse_glm45(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    props = tool_properties(tools)
    return parse_tool_call_blocks(text, lambda body: _parse_block(body, props))


def format_glm45(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    out = []
    for name, args in calls:
        pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{format_value(v)}</arg_value>\n" for k, v in args.items())
        out.append(f"<tool_call>{name}\n{pairs}</tool_call>")
    return "\n".join(out)


register_tool_parser("glm45", parse_glm45, format_glm45, template_markers=[("<arg_key>", "<arg_value>")])
