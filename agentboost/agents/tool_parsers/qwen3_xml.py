"""``qwen3_xml``: Qwen3-Coder and Qwen3.5 calls, XML-ish with one parameter per tag.

    <tool_call>
    <function=calculator>
    <parameter=expression>
    17 + 25
    </parameter>
    </function>
    </tool_call>

As the models' chat templates write them and vLLM's ``qwen3_coder`` parser reads them. One
``<function=NAME>`` per ``<tool_call>`` block; several blocks make parallel calls. A parameter's
value is the text between its tags less one newline on each side. Values are typed by the tool's
schema (``arguments.typed_value``); as in vLLM, ``null`` is None whatever the type, and a
parameter with no schema (no tools given, or one the tool does not declare, or a schema without a
type) stays text.

What is a call: a ``<tool_call>`` block. Any ``<tool_call>`` starts one, so an opening tag with no
closing tag, a block without exactly one ``<function=...>...</function>``, a parameter without its
closing tag or text between the tags is malformed. vLLM also accepts a bare ``<function=...>`` with
no ``<tool_call>`` around it; agentboost takes that for plain text (the templates never write one),
so whatever trains as a call is also served as one.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from .arguments import (
    declared_types,
    format_value,
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

_FUNCTION = re.compile(r"\s*<function=([^>]*)>(.*?)</function>\s*", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>]*)>(.*?)</parameter>", re.DOTALL)


def _value(text: str) -> str:
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def _parse_block(body: str, props: dict[str, dict[str, Any]] | None) -> tuple[ParsedToolCall | None, str | None]:
    m = _FUNCTION.fullmatch(body)
    if m is None:
        return None, "expected one <function=NAME>...</function> inside <tool_call>"
    name, inner = m.group(1), m.group(2)
    if not valid_name(name):
        return None, f"invalid function name {name!r}"
    schema = (props or {}).get(name, {})
    args: dict[str, Any] = {}
    pos = 0
    for p in _PARAMETER.finditer(inner):
        gap = inner[pos:p.start()]
        if gap.strip():
            return None, f"unexpected text in <function={name}>: {gap.strip()[:40]!r}"
        key = p.group(1)
        if not valid_name(key):
            return None, f"invalid parameter name {key!r}"
        if key in args:
            return None, f"parameter {key!r} given twice"
        value = _value(p.group(2))
        kinds = declared_types(schema.get(key))
        args[key] = None if value.lower() == "null" else (typed_value(value, kinds) if kinds else value)
        pos = p.end()
    rest = inner[pos:]
    if rest.strip():
        what = "a <parameter=...> without </parameter>" if "<parameter=" in rest else "unexpected text"
        return None, f"{what} in <function={name}>: {rest.strip()[:40]!r}"
    return ParsedToolCall(name=name, arguments=args, raw=body), None


def parse_qwen3_xml(text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    props = tool_properties(tools)
    return parse_tool_call_blocks(text, lambda body: _parse_block(body, props))


def format_qwen3_xml(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    out = []
    for name, args in calls:
        params = "".join(f"<parameter={k}>\n{format_value(v)}\n</parameter>\n" for k, v in args.items())
        out.append(f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")
    return "\n".join(out)


register_tool_parser("qwen3_xml", parse_qwen3_xml, format_qwen3_xml,
                     template_markers=[("<function=", "<parameter=")])
