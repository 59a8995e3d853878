"""Argument values written as bare text (``qwen3_xml``, ``glm45``), typed by the tool's schema.

Those formats write each argument as text between tags, so ``2`` may be the number 2 or the string
"2": the serving stack (vLLM) decides by the JSON schema of the tool the request declared, and so do
we, with the tool specifications the trainable model hands the parser. What a value becomes:

- the schema gives the parameter the type ``string`` (alone or among others): the text, as written;
- another type (``integer``, ``number``, ``boolean``, ``object``, ``array``, ``null``): the text read
  as JSON (``true``/``false`` in any letter case for a boolean, as the templates write Python's
  ``True``); text that is not such JSON stays text, so the tool's own validation reports it (a
  value is never guessed at or repaired);
- the parameter is not in any schema (no tools given, or a name the tool does not declare): each
  family's own rule, see ``qwen3_xml`` and ``glm45``.
"""

from __future__ import annotations

import json
import re
from typing import Any

# a function name as the formats write it: no white space and none of the formats' delimiters
_NAME = re.compile(r"[^\s<>\[\]{}()\"'`,;:=|]+")


def valid_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def tool_properties(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    """Tool name -> its parameters' JSON schemas, from Strands ``ToolSpec`` dicts
    (``inputSchema.json``), OpenAI function schemas (``function.parameters``) or plain
    ``{"name", "parameters"}``; None when no tools were given."""
    if tools is None:
        return None
    out: dict[str, dict[str, Any]] = {}
    for t in tools:
        if not isinstance(t, dict):
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        name = fn.get("name")
        schema = fn.get("parameters")
        if schema is None:
            schema = fn.get("inputSchema", {})
            if isinstance(schema, dict) and "json" in schema:
                schema = schema["json"]
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(name, str):
            out[name] = props if isinstance(props, dict) else {}
    return out


def declared_types(schema: Any) -> set[str]:
    """The JSON types a parameter's schema allows (``type``, ``anyOf``/``oneOf`` members, ``enum``,
    ``const``; a ``$ref`` is an object); empty when the schema says nothing about its type."""
    if not isinstance(schema, dict):
        return set()
    kinds: set[str] = set()
    t = schema.get("type")
    if isinstance(t, str):
        kinds.add(t)
    elif isinstance(t, list):
        kinds.update(x for x in t if isinstance(x, str))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or ():
            kinds |= declared_types(sub)
    if "$ref" in schema:
        kinds.add("object")
    values = list(schema.get("enum") or ()) + ([schema["const"]] if "const" in schema else [])
    for v in values:
        kinds.add({str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}.get(
            type(v), "object"))
    return kinds


def typed_value(text: str, kinds: set[str]) -> Any:
    """``text`` as a value of one of the declared types ``kinds`` (non-empty; see the module doc)."""
    if "null" in kinds and text.strip() == "null":
        return None
    if "string" in kinds:
        return text
    if "boolean" in kinds and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def format_value(value: Any) -> str:
    """An argument value as the XML-ish formats write it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def json_object_arguments(args: Any, key: str = "arguments") -> tuple[dict[str, Any] | None, str | None]:
    """A JSON format's arguments (``key`` as the format names it): an object, or a string that is
    a JSON object (some models double-encode; accepted only when it is valid JSON, never repaired)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None, f"'{key}' is a string that is not JSON"
    if not isinstance(args, dict):
        return None, f"'{key}' must be an object, got {type(args).__name__}"
    return args, None
