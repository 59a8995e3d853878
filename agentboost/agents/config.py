"""The configuration's ``agent`` section: the agent spec itself, one schema for every path.

``AgentConfig`` is made of the fields the two specs are made of (``agents/options.py``), with their
one set of defaults, plus the agent's ``kind`` and the prompt policy it runs with. The local
trainer's YAML, veRL's agent-loop YAML (its ``agent:`` entry), rLLM's ``agent_args``, the job
service's and the Python API's agent keys and ``rollout``'s flags are all read by ``agent_config``
and built by ``AgentConfig.spec``, so one agent described once is the same agent everywhere."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..schema import ConfigError, apply, check, keys, option
from .http_agent import HttpAgentSpec
from .options import AgentOptions, HttpFields, StrandsFields, fields_of
from .strands_agent import AgentSpecError, StrandsAgentSpec

AGENT_KINDS = ("strands", "http")


@dataclass
class _Kind:
    kind: str = option("strands", choices=AGENT_KINDS,
                       help="\"strands\": a Strands agent built here around the trainable model (tools, system_prompt, "
                            "factory); \"http\": the user's own agent in its own process, given OPENAI_BASE_URL and "
                            "OPENAI_API_KEY (a gateway session) and the task, scored here by the run's reward "
                            "(docs/gateway.md)")


@dataclass
class AgentConfig(AgentOptions, StrandsFields, HttpFields, _Kind):
    """The agent that runs each episode."""
    prompt_policy: str = option("", help="a prompt policy (run/prompt_policy.py) the agent runs with: its system "
                                         "prompt, instructions and demonstration turns replace agent.system_prompt; a "
                                         "prompt_policy.json, a checkpoint or a prompt-training run directory (its "
                                         "newest intact checkpoint). \"\": none. Prompt first, then GRPO from the "
                                         "improved prompt: a weights run that names the prompt run's policy here")

    def spec(self) -> StrandsAgentSpec | HttpAgentSpec:
        """The spec this section describes (``kind``); a key of the other kind must be left at its
        default. The prompt policy is applied by the run's assembly (``run/assembly.py``)."""
        own, other, cls = ((StrandsFields, HttpFields, StrandsAgentSpec) if self.kind == "strands" else
                           (HttpFields, StrandsFields, HttpAgentSpec))
        defaults = AgentConfig()
        for name in fields_of(other):
            if getattr(self, name) not in (getattr(defaults, name), None, "", [], {}):
                raise AgentSpecError(f"agent.{name} is not used by an http agent (its own process has its tools and "
                                     "prompt): leave it out" if self.kind == "http" else
                                     f"agent.{name} is for agent.kind http (this agent is kind strands)")
        values = {name: getattr(self, name) for name in (*fields_of(own), *fields_of(AgentOptions))}
        return cls(**_copied(values))

    def keys(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _copied(values: dict[str, Any]) -> dict[str, Any]:
    # a spec must not share a list or mapping with the section it came from
    return {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in values.items()}


def agent_config(values: dict[str, Any], where: str = "agent") -> AgentConfig:
    """``values`` (an ``agent`` mapping: a YAML entry, a job's or the API's keys, veRL's or rLLM's
    arguments) as the section, checked as a configuration's is: an unknown key names the closest
    valid one, a wrong type or a value outside its bounds or choices is one line."""
    section = AgentConfig()
    try:
        apply(section, dict(values), where, "agent.", keys(AgentConfig, "agent."))
        check(section, where, "agent.")
    except ConfigError as e:
        raise AgentSpecError(str(e)) from None
    return section


def spec_from_keys(values: dict[str, Any], where: str = "agent") -> StrandsAgentSpec | HttpAgentSpec:
    """The spec an ``agent`` mapping describes (``agent_config(values).spec()``)."""
    if "prompt_policy" in values and values["prompt_policy"]:
        raise AgentSpecError(f"{where}: agent.prompt_policy is read by a run's configuration; here give the prompt "
                             "policy's system prompt and tools themselves")
    return agent_config(values, where).spec()
