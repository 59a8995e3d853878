"""Parsing tool calls out of sampled text, one module per model family's format.

``registry`` holds the contract and the registry (name -> parser, formatter, chat-template
markers); each family's module registers itself: ``hermes`` (Hermes, Qwen2.5, Qwen3: the default),
``qwen3_xml`` (Qwen3-Coder, Qwen3.5), ``llama3_json`` (Llama 3.x), ``mistral``, ``glm45`` (GLM-4.5
and later), ``kimi_k2``. ``arguments`` types bare-text argument values by the tool's schema.
``resolve_tool_parser("auto", chat_template, supports_tools)`` picks the family from the policy's
chat template. `docs/episodes.md`, "Model families", tabulates them and says how to add one.
"""

from .glm45 import format_glm45, parse_glm45
from .hermes import format_hermes, parse_hermes
from .kimi_k2 import format_kimi_k2, parse_kimi_k2
from .llama3_json import format_llama3_json, parse_llama3_json
from .mistral import format_mistral, parse_mistral
from .qwen3_xml import format_qwen3_xml, parse_qwen3_xml
from .registry import (
    AUTO,
    ParsedOutput,
    ParsedToolCall,
    ToolCallFormatter,
    ToolCallIdMaker,
    ToolCallParser,
    ToolParserRegistrationError,
    default_tool_call_id,
    detect_tool_parser,
    get_tool_formatter,
    get_tool_id_maker,
    get_tool_parser,
    parse_tool_calls,
    register_tool_parser,
    registered_tool_parsers,
    resolve_tool_parser,
)

__all__ = [
    "AUTO", "ParsedOutput", "ParsedToolCall", "ToolCallFormatter", "ToolCallIdMaker", "ToolCallParser",
    "ToolParserRegistrationError", "default_tool_call_id", "detect_tool_parser", "get_tool_formatter",
    "get_tool_id_maker", "get_tool_parser", "parse_tool_calls", "register_tool_parser",
    "registered_tool_parsers", "resolve_tool_parser",
    "format_glm45", "format_hermes", "format_kimi_k2", "format_llama3_json", "format_mistral", "format_qwen3_xml",
    "parse_glm45", "parse_hermes", "parse_kimi_k2", "parse_llama3_json", "parse_mistral", "parse_qwen3_xml",
]
