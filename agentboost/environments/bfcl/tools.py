"""BFCL's functions as Strands tools, and the API instances one multi-turn episode acts on.

A function doc (BFCL's JSON: ``name``, ``description``, ``parameters`` with BFCL's type names) becomes
a Strands tool whose input schema is the doc's parameters in JSON-schema types (BFCL's own table,
``GORILLA_TO_OPENAPI``, applied as its function-calling handlers apply it). Tool names allow no dots,
so ``math.factorial`` is offered as ``math_factorial`` (what BFCL's handlers do for OpenAI-style
models); ``tool_name``/``function_name`` map between the two.

``ApiSession`` holds one episode's instances of BFCL's executable API classes (``GorillaFileSystem``,
``TradingBot``, ``TravelAPI``, ...), each loaded from the task's initial configuration: every episode
gets its own, so episodes never share a file system or an account. A call runs the method with the
model's arguments and answers with the text BFCL's executor gives the model (a ``str`` as is, a
``dict`` as JSON, anything else ``str()``, an exception as ``Error during execution: ...``). BFCL's
executor builds a Python call string and ``eval``s it; the session calls the bound method instead,
so nothing the model wrote is ever evaluated as code.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import re
from typing import Any, Callable

from .package import bfcl

# BFCL's executor refuses these method names (``multi_turn_utils.execute_multi_turn_func_call``)
REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")


def tool_name(function_name: str) -> str:
    return re.sub(r"\.", "_", function_name)


def json_schema(parameters: dict) -> dict:
    """A BFCL ``parameters`` doc as a JSON schema, with BFCL's type table (``dict`` -> object,
    ``float`` -> number, ``tuple`` -> array, unknown -> string, as ``_cast_to_openai_type`` does)."""
    mapping = bfcl().type_mappings.GORILLA_TO_OPENAPI

    def cast(props: dict) -> dict:
        out = {}
        for key, value in props.items():
            value = copy.deepcopy(value)
            value["type"] = mapping.get(value.get("type", "string"), "string")
            if value["type"] in ("array", "object"):
                if "properties" in value:
                    value["properties"] = cast(value["properties"])
                elif isinstance(value.get("items"), dict) and "type" in value["items"]:
                    items = value["items"]
                    items["type"] = mapping.get(items["type"], "string")
                    if items["type"] == "object" and "properties" in items:
                        items["properties"] = cast(items["properties"])
                    elif items["type"] == "array" and isinstance(items.get("items"), dict) and "type" in items["items"]:
                        items["items"]["type"] = mapping.get(items["items"]["type"], "string")
            out[key] = value
        return out

    schema = {"type": "object", "properties": cast(parameters.get("properties") or {})}
    if parameters.get("required"):
        schema["required"] = list(parameters["required"])
    return schema


def tool_spec(doc: dict) -> dict:
    return {"name": tool_name(doc["name"]), "description": doc.get("description") or doc["name"],
            "inputSchema": {"json": json_schema(doc.get("parameters") or {})}}


def strands_tool(doc: dict, run: Callable[[str, dict], str]):
    """A Strands tool for one function doc: ``run(function_name, arguments)`` gives its result text.
    Strands' own input validation is off: BFCL's executor answers arguments that do not fit, as it
    does for its own models, and the schema the model is shown stays the doc's."""
    from strands.tools.tools import PythonAgentTool

    spec = tool_spec(doc)
    name = doc["name"]

    def call(tool_use, **_):
        text = run(name, dict(tool_use.get("input") or {}))
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

    return PythonAgentTool(spec["name"], spec, call)


def result_text(value: Any) -> str:
    """What BFCL's executor shows the model for a method's return value."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class ApiSession:
    """One episode's instances of the task's API classes, loaded from its initial configuration."""

    def __init__(self, involved_classes: list[str], initial_config: dict, long_context: bool = False):
        b = bfcl()
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for class_name in involved_classes:
            module = importlib.import_module(b.backend.CLASS_FILE_PATH_MAPPING[class_name])
            instance = getattr(module, class_name)()
            if class_name not in b.backend.STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            self.instances[class_name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self.methods[method_name] = method  # a later class's method of the same name wins, as in BFCL

    def call(self, name: str, arguments: dict) -> str:
        if name in REFUSED:
            return f"Error during execution: Function call {name} is not allowed."
        method = self.methods.get(name)
        if method is None:
            return f"Error during execution: name '{name}' is not defined"
        try:
            return result_text(method(**arguments))
        except Exception as e:  # the API's own errors (and bad arguments) are the model's to see
            return f"Error during execution: {e}"
