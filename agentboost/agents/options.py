"""The agent's fields, each declared once with its one default, help, bounds and choices.

``AgentOptions`` is what every kind of agent has (the trainable model's limits, its tool-call and
reasoning formats, the agent's type); ``StrandsFields`` what an agent agentboost builds adds (tools,
system prompt, factory); ``HttpFields`` what an agent in its own process adds (its command or entry
point). ``StrandsAgentSpec``, ``HttpAgentSpec`` and the configuration's ``agent`` section
(``agents/config.py``) are made of these, so a key left out has the same value on every path: the
local trainer, veRL's agent loop, rLLM's engine, the job service, the Python API and ``rollout``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..schema import AT_LEAST_1, POSITIVE, TOKENS, option

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant. Use the calculator tool for arithmetic, then give the final "
    "answer as a number."
)
DEFAULT_TOOLS = ("agentboost.tools.calculator:calculator",)


def _tool_parsers() -> tuple[str, ...]:
    from .tool_parsers import registered_tool_parsers

    return ("auto", *registered_tool_parsers())


def _reasoning_formats() -> tuple[str, ...]:
    from ..reasoning import reasoning_formats

    return ("auto", *reasoning_formats())


@dataclass
class AgentOptions:
    """What every kind of agent has: the trainable model's limits and formats, the agent's type."""
    max_model_calls: int = option(4, bounds=AT_LEAST_1, help="model calls per episode (each tool round is one)")
    max_response_tokens: int = option(512, bounds=TOKENS, help="sampled tokens per episode, all calls together")
    timeout_s: float = option(300.0, bounds=POSITIVE, help="wall time per episode; past it the episode is a timeout")
    agent_type: str = option("calculator", help="the kind of agent, for the per-type default reward")
    reasoning: str = option("auto", choices=_reasoning_formats,
                            help="the policy's reasoning markers: auto (from its chat template), none, or a format or "
                                 "family name (think, qwen3, deepseek_r1, ...): tool calls, the final answer and "
                                 "rewards read the content only; reasoning is recorded, never acted on")
    tool_parser: str = option("auto", choices=_tool_parsers,
                              help="the policy's tool-call format: auto (from its chat template; hermes where it shows "
                                   "no other family) or a parser name (hermes, qwen3_xml, llama3_json, mistral, glm45, "
                                   "kimi_k2; agents/tool_parsers)")
    always_extend: bool = option(False, help="one training sequence per episode even where the chat template would "
                                             "re-render (each such place is counted); the veRL and rLLM paths, which "
                                             "need one row per episode, set it")


@dataclass
class StrandsFields:
    """What an agent agentboost builds around the trainable model adds."""
    tools: list[str] = option(default_factory=lambda: list(DEFAULT_TOOLS),
                              help="the agent's @tool functions, as import paths (module:function or a module's tools; "
                                   "from Python, the functions themselves too)")
    system_prompt: str | None = option(DEFAULT_SYSTEM_PROMPT, help="the agent's system prompt; null: none")
    factory: str = option("", help="module:function(model, tools, system_prompt) -> strands.Agent, for agents with "
                                   "their own conversation managers, hooks or state; \"\" builds a plain Strands Agent")


@dataclass
class HttpFields:
    """What an agent agentboost does not build, in its own process behind the gateway, adds."""
    command: str = option("", help="kind http: the agent's command line (a leading `python` is the run's interpreter), "
                                   "run in the current directory; it prints its answer or posts {\"output\": ...} to "
                                   "$AGENTBOOST_FINISH_URL")
    entry_point: str = option("", help="kind http, instead of command: module:function(prompt, task) -> answer, run "
                                       "in a process of its own")
    env: dict[str, Any] = option(default_factory=dict, help="kind http: more environment variables for the agent")
    max_request_bytes: int = option(1 << 20, bounds=(1024, None, True, False),
                                    help="kind http: the gateway answers a larger request 413 before parsing it (a "
                                         "whole history comes with every call: a 32k-token context is about 130 KiB)")


def fields_of(group: type) -> tuple[str, ...]:
    return tuple(group.__dataclass_fields__)
