"""The tool-call parser registry: name -> parser, formatter and the chat-template markers that pick it.

A parser turns the model's raw text into the visible text, the well-formed tool calls and one reason
per malformed block. Malformed calls are never repaired: their text stays in the visible answer, so
the agent treats the turn as a plain reply and the episode counts the malformation. If any block of
a turn is malformed, no call of the turn runs: a turn is either a clean set of calls or a plain
answer, never a half-repaired mixture.

A parser is ``parser(text)`` or ``parser(text, tools=None)``: the second form receives the tool
specifications of the call (Strands ``ToolSpec`` dicts or OpenAI function schemas), for formats whose
argument values are bare text typed by the tool's schema (``qwen3_xml``, ``glm45``), as the serving
stack (vLLM) types them. ``parse_tool_calls`` calls either form.
"""

from __future__ import annotations

import inspect
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

AUTO = "auto"  # the tool-parser setting that picks the parser from the chat template


@dataclass
class ParsedToolCall:
    name: str
    arguments: dict[str, Any]
    raw: str  # the exact text the model wrote for this call (between the tags, where the format has tags)
    id: str | None = None  # the call id the model wrote itself, where the format has one (kimi_k2, mistral v11)


@dataclass
class ParsedOutput:
    text: str  # what remains for the reader: the whole text when no call was well formed
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)  # one reason per malformed block


ToolCallParser = Callable[..., ParsedOutput]
# (name, arguments) pairs -> the text the model writes for those calls in one turn
ToolCallFormatter = Callable[[Sequence[tuple[str, dict[str, Any]]]], str]
# () -> a new tool-call id of the form the family's chat template accepts
ToolCallIdMaker = Callable[[], str]


def default_tool_call_id() -> str:
    """The id a call gets when its family registers no id maker and the model wrote none."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class _Family:
    parser: ToolCallParser
    formatter: ToolCallFormatter | None
    # the chat template picks this parser when it holds every string of any one of these groups
    template_markers: tuple[tuple[str, ...], ...]
    id_maker: ToolCallIdMaker | None = None


_PARSERS: dict[str, _Family] = {}


class ToolParserRegistrationError(ValueError):
    """A second, different parser registered under a taken name."""


def register_tool_parser(name: str, parser: ToolCallParser, formatter: ToolCallFormatter | None = None,
                         template_markers: Iterable[Iterable[str]] = (),
                         id_maker: ToolCallIdMaker | None = None) -> None:
    """A name holds one parser: registering another one under it is an error. ``formatter`` writes
    calls in the format (for demonstrations and round trips); ``template_markers`` are groups of
    strings whose presence, all of one group, in a chat template makes ``auto`` choose this parser;
    ``id_maker`` makes the ids of calls the model wrote no id for, in the form the family's chat
    template accepts (``default_tool_call_id`` when not given)."""
    if name == AUTO:
        raise ToolParserRegistrationError(f"{AUTO!r} is the setting that picks a parser; choose another name")
    taken = _PARSERS.get(name)
    if taken is not None and taken.parser is not parser:
        raise ToolParserRegistrationError(f"tool-call parser {name!r} is already registered "
                                          f"({taken.parser.__module__}:{taken.parser.__qualname__}); "
                                          "choose another name")
    markers = tuple(tuple(group) for group in template_markers)
    if taken is not None:  # the same parser again (a re-import): keep what it already had
        formatter = formatter or taken.formatter
        markers = markers or taken.template_markers
        id_maker = id_maker or taken.id_maker
    _PARSERS[name] = _Family(parser, formatter, markers, id_maker)


def get_tool_parser(name: str) -> ToolCallParser:
    return _family(name).parser


def get_tool_formatter(name: str) -> ToolCallFormatter:
    formatter = _family(name).formatter
    if formatter is None:
        raise KeyError(f"tool-call parser {name!r} was registered without a formatter")
    return formatter


def get_tool_id_maker(name: str) -> ToolCallIdMaker:
    """What makes the family's tool-call ids (its registered id maker, else ``default_tool_call_id``)."""
    return _family(name).id_maker or default_tool_call_id


def registered_tool_parsers() -> list[str]:
    return sorted(_PARSERS)


def _family(name: str) -> _Family:
    try:
        return _PARSERS[name]
    except KeyError:
        hint = f" ({AUTO!r} is resolved from a chat template by resolve_tool_parser)" if name == AUTO else ""
        raise KeyError(f"unknown tool-call parser {name!r}{hint}; registered: "
                       f"{', '.join(sorted(_PARSERS))}") from None


def _takes_tools(parser: ToolCallParser) -> bool:
    try:
        params = inspect.signature(parser).parameters
    except (TypeError, ValueError):
        return False
    return "tools" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def parse_tool_calls(parser: ToolCallParser, text: str, tools: list[dict[str, Any]] | None = None) -> ParsedOutput:
    """``parser`` on ``text``, given the call's tool specifications where the parser takes them."""
    if tools is not None and _takes_tools(parser):
        return parser(text, tools=tools)
    return parser(text)


# -- choosing a parser from the chat template ------------------------------------------------------
def _template_text(chat_template: Any) -> str:
    if isinstance(chat_template, dict):  # named templates ("default", "tool_use"): all of them count
        return "\n".join(str(t) for t in chat_template.values())
    if isinstance(chat_template, (list, tuple)):  # [{"name": ..., "template": ...}, ...]
        return "\n".join(str(t.get("template", "")) if isinstance(t, dict) else str(t) for t in chat_template)
    return chat_template or ""


def detect_tool_parser(chat_template: Any) -> str | None:
    """The registered parser whose markers the chat template holds (the first registered, where
    several do), None when no family's markers are there."""
    text = _template_text(chat_template)
    for name, family in _PARSERS.items():
        if any(group and all(m in text for m in group) for group in family.template_markers):
            return name
    return None


def resolve_tool_parser(name: str, chat_template: Any = None, supports_tools: bool = True) -> str:
    """The parser name to use: ``name`` itself when it is not ``auto`` (checked to be registered);
    for ``auto``, the family the chat template shows, else ``hermes``. A template that renders no
    tools (``supports_tools=False``, e.g. SmolLM2) is given the tools in Hermes format in the system
    prompt, so ``auto`` means ``hermes`` there."""
    if name != AUTO:
        _family(name)
        return name
    if not supports_tools:
        return "hermes"
    return detect_tool_parser(chat_template) or "hermes"


# the block that hermes, qwen3_xml and glm45 all wrap a call in
TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def parse_tool_call_blocks(text: str, parse_block: Callable[[str], tuple[ParsedToolCall | None, str | None]]
                           ) -> ParsedOutput:
    """The contract for the ``<tool_call>...</tool_call>`` formats, one place: every block goes
    through ``parse_block`` (its inner text -> a call, or the reason it is malformed); an opening tag
    without its closing tag (a turn cut by max tokens) is malformed; any malformed block voids every
    call of the turn and leaves the text as written, else the visible text is the text without the
    blocks."""
    calls: list[ParsedToolCall] = []
    malformed: list[str] = []
    for m in TOOL_CALL_BLOCK.finditer(text):
        call, err = parse_block(m.group(1))
        if call is not None:
            calls.append(call)
        else:
            malformed.append(err or "malformed")
    tail = TOOL_CALL_BLOCK.sub("", text)
    if "<tool_call>" in tail:
        malformed.append("unterminated <tool_call> block")
    if malformed:
        return ParsedOutput(text=text, tool_calls=[], malformed=malformed)
    return ParsedOutput(text=tail.strip() if calls else text, tool_calls=calls, malformed=[])
