"""``StrandsAgentSpec``: the user's agent as a picklable specification (DESIGN.md's ``StrandsAgentSpec``).

Tools are import paths (``package.module:function``, ``package.module.function`` or a whole module,
whose ``@tool`` functions are all taken) or importable callables. The same ``build`` runs in the
parent and in every worker, so there is one definition of how an agent is assembled.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from ..errors import InputError
from ..imports import ImportPathError, import_object
from ..schema import ConfigError, check
from .options import AgentOptions, StrandsFields, fields_of


@runtime_checkable
class AgentFactory(Protocol):
    """``factory(model=..., tools=..., system_prompt=...) -> strands.Agent``.

    ``model`` is agentboost's trainable model (a ``strands.models.Model``), ``tools`` the resolved
    Strands tools of the spec, ``system_prompt`` the spec's. Build the agent around exactly this
    model so that every call is recorded token for token; add hooks, state or a conversation manager
    that never trims history (trimming would break the token-exact extension)."""

    def __call__(self, *, model: Any, tools: list[Any], system_prompt: str | None) -> Any: ...


class AgentSpecError(InputError):
    pass


def _import(path: str, what: str) -> Any:
    try:
        return import_object(path, what)
    except ImportPathError as e:
        raise AgentSpecError(str(e)) from None


def _is_strands_tool(obj: Any) -> bool:
    from strands.tools.decorator import DecoratedFunctionTool

    return isinstance(obj, DecoratedFunctionTool)


def resolve_tools(tools: list[str | Callable]) -> list[Any]:
    resolved = []
    for t in tools:
        obj = _import(t, "tool") if isinstance(t, str) else t
        if inspect.ismodule(obj):
            found = [v for _, v in sorted(vars(obj).items()) if _is_strands_tool(v)]
            if not found:
                raise AgentSpecError(f"tool module {t!r} defines no @tool functions")
            resolved.extend(found)
        elif _is_strands_tool(obj) or callable(obj):
            resolved.append(obj)
        else:
            raise AgentSpecError(f"tool {t!r} is neither a @tool function nor a module of them")
    return resolved


@dataclass
class StrandsAgentSpec(AgentOptions, StrandsFields):
    """A Strands agent built around the trainable model: its fields and their defaults are
    ``agents/options.py``'s, the same as the configuration's ``agent`` section."""
    # prior conversation turns (Strands messages: user, assistant toolUse, user toolResult, ...) put
    # at the start of every episode's history: a prompt policy's demonstrations
    # (run/prompt_policy.py). A small model copies a tool call it sees in its history where it
    # ignores one described in its system prompt. The chat template renders them like any turn, so
    # they are prompt tokens (loss mask 0); the episode record leaves them out of its messages, tool
    # calls and answer (``metadata["history_messages"]`` counts them)
    history: list[dict[str, Any]] = field(default_factory=list)

    def validate(self) -> "StrandsAgentSpec":
        resolve_tools(self.tools)
        if self.factory:
            _import(self.factory, "agent factory")
        check_model_options(self)
        check_history(self.history)
        return self

    def as_config(self) -> dict[str, Any]:
        """The spec as a training configuration's ``agent`` keys (what a YAML file or a job says):
        tools and factory as import paths, so that worker processes and services import them."""
        if self.history:  # a configuration names a prompt policy file instead (agent.prompt_policy)
            raise AgentSpecError("a spec with history (demonstration turns) has no configuration keys; save them "
                                 "as a prompt policy and name its file in agent.prompt_policy")
        keys = {name: getattr(self, name) for name in (*fields_of(StrandsFields), *fields_of(AgentOptions))}
        keys["tools"] = [_path_of(t, "tool") for t in self.tools]
        keys["factory"] = _path_of(self.factory, "agent factory") if self.factory else ""
        return keys

    def build(self, model) -> Any:
        """The Strands ``Agent`` around ``model`` (a ``TrainableModel``)."""
        tools = resolve_tools(self.tools)
        if self.factory:
            agent = _import(self.factory, "agent factory")(model=model, tools=tools, system_prompt=self.system_prompt)
        else:
            from strands import Agent
            from strands.agent.conversation_manager import NullConversationManager

            # Trimming history mid-episode would break the token-exact extension; episodes are
            # bounded by max_model_calls instead.
            agent = Agent(model=model, tools=tools, system_prompt=self.system_prompt, callback_handler=None,
                          conversation_manager=NullConversationManager())
        if self.history:  # before anything a factory put there: the demonstrations come first
            agent.messages[:0] = copy.deepcopy(self.history)
        return agent


def check_model_options(spec: Any) -> None:
    """The trainable model's options a spec carries (limits, timeout, tool parser, reasoning) against
    their fields' bounds and choices (``agents/options.py``): the very check the configuration's agent
    section gets, for an agent built here and one behind the gateway (``agents/http_agent.py``) alike."""
    try:
        check(spec, "agent")
    except ConfigError as e:
        raise AgentSpecError(str(e)) from None


ROLES = ("user", "assistant")


def check_history(history: Any) -> None:
    """``history`` must be Strands messages ({"role": "user"|"assistant", "content": [blocks]}),
    starting with a user turn and alternating roles, each tool use answered by its result."""
    if not isinstance(history, list):
        raise AgentSpecError(f"history must be a list of Strands messages, got {type(history).__name__}")
    uses: set[str] = set()
    for i, m in enumerate(history):
        if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), list)
                and all(isinstance(b, dict) for b in m["content"])):
            raise AgentSpecError(f"history[{i}] must be {{'role': 'user' or 'assistant', 'content': [blocks]}}")
        want = ROLES[i % 2]
        if m["role"] != want:
            raise AgentSpecError(f"history[{i}] is a {m['role']} turn where a {want} turn belongs (turns alternate, "
                                 "user first)")
        for b in m["content"]:
            if "toolUse" in b:
                uses.add(b["toolUse"].get("toolUseId"))
            elif "toolResult" in b and b["toolResult"].get("toolUseId") not in uses:
                raise AgentSpecError(f"history[{i}] holds a toolResult for a tool use no earlier turn made")
    if history and history[-1]["role"] != "assistant":
        raise AgentSpecError("history must end with an assistant turn (the episode's question comes next)")


def _path_of(obj: Any, what: str) -> str:
    """An import path as it is, or the path of a module-level object (other processes import it)."""
    if isinstance(obj, str):
        return obj
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "") or getattr(obj, "__name__", "")
    if not module or module == "__main__" or "<" in name or not name:
        raise AgentSpecError(f"{what} {obj!r} must be importable by other processes (a module-level object in an "
                             "importable module), or given as module:name")
    return f"{module}:{name}"


_warned_alias = False


def __getattr__(name: str):
    # ``StrandsAgent``: the name of the first releases; the class is a specification, hence its new
    # name. The old one still works and warns once; it goes in agentboost 0.3.
    global _warned_alias
    if name == "StrandsAgent":
        if not _warned_alias:
            _warned_alias = True
            import warnings

            warnings.warn("agentboost.agents.strands_agent.StrandsAgent is now StrandsAgentSpec; the old "
                          "name goes in agentboost 0.3", DeprecationWarning, stacklevel=2)
        return StrandsAgentSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
