"""``HttpAgentSpec``: an agent agentboost does not build, run in its own process and reached over HTTP.

The agent is a command (``python my_agent.py``) or a Python entry point (``module:function``,
called as ``function(prompt, task)`` in a process of its own). Each episode it is given
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, and ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` (a
gateway session: ``agentboost.gateway``, which speaks both vendors' protocols), the task
(``AGENTBOOST_TASK``, JSON, also on its standard input) and the prompt (``AGENTBOOST_PROMPT``); it
runs unchanged and returns its output (its standard output, the entry point's return value, or
``{"output": ...}`` posted to ``AGENTBOOST_FINISH_URL``). The host scores the episode with the
run's reward, as for an agent it builds. ``episode_runner.run_episode`` runs both kinds, so the
pool, ``train``, ``rollout``, ``eval`` and the veRL agent loop take either spec.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..imports import ImportPathError, import_object
from .strands_agent import AgentSpecError, StrandsAgentSpec, check_model_options

AGENT_KINDS = ("strands", "http")


@dataclass
class HttpAgentSpec:
    command: str | list[str] = ""  # the agent's command line (a string is split as a shell would)
    entry_point: str = ""  # or module:function(prompt, task) -> output, run in a process of its own
    env: dict[str, str] = field(default_factory=dict)  # more environment variables for the agent
    # the trainable model's options behind the gateway: the same meaning as StrandsAgentSpec's
    max_model_calls: int = 6
    max_response_tokens: int = 1024
    timeout_s: float = 300.0
    tool_parser: str = "auto"
    reasoning: str = "auto"
    agent_type: str = "calculator"
    always_extend: bool = False
    max_request_bytes: int = 1 << 20  # the gateway refuses larger requests (413) before parsing them
    kind: ClassVar[str] = "http"
    # what the host would build for a Strands agent: none here (the agent's own process has its
    # tools and prompt; a sandbox check of host tools has nothing to check)
    tools: ClassVar[tuple] = ()
    system_prompt: ClassVar[None] = None
    history: ClassVar[tuple] = ()

    def validate(self) -> "HttpAgentSpec":
        if bool(self.command) == bool(self.entry_point):
            raise AgentSpecError("an http agent needs exactly one of command and entry_point "
                                 f"(got command={self.command!r}, entry_point={self.entry_point!r})")
        if self.entry_point:
            try:
                import_object(self.entry_point, "agent entry point")
            except ImportPathError as e:
                raise AgentSpecError(str(e)) from None
        if not isinstance(self.max_request_bytes, int) or self.max_request_bytes < 1024:
            raise AgentSpecError(f"max_request_bytes must be an integer of at least 1024, got {self.max_request_bytes!r}")
        if not isinstance(self.env, dict) or not all(isinstance(v, str) for v in self.env.values()):
            raise AgentSpecError("env must map names to strings")
        check_model_options(self)
        return self

    def argv(self) -> list[str]:
        """The agent's command line. A leading ``python`` is the run's own interpreter, so that the
        agent sees the packages the run sees."""
        if self.entry_point:
            return [sys.executable, "-m", "agentboost.gateway.http_episode", self.entry_point]
        argv = shlex.split(self.command) if isinstance(self.command, str) else list(self.command)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        return argv

    def as_config(self) -> dict[str, Any]:
        return {"kind": "http", "command": self.command if isinstance(self.command, str) else shlex.join(self.command),
                "entry_point": self.entry_point, "max_model_calls": self.max_model_calls,
                "max_response_tokens": self.max_response_tokens, "timeout_s": self.timeout_s,
                "agent_type": self.agent_type, "reasoning": self.reasoning, "tool_parser": self.tool_parser}

    def build(self, model: Any) -> Any:
        raise AgentSpecError("an http agent runs in its own process: episode_runner.run_episode runs it")


def spec_from_keys(keys: dict[str, Any]) -> StrandsAgentSpec | HttpAgentSpec:
    """A spec from a configuration's ``agent`` keys: ``kind`` picks the spec (``strands``: built
    here around the trainable model; ``http``: its own process, through the gateway); keys that
    belong to the other kind must be left at their defaults."""
    keys = dict(keys)
    kind = keys.pop("kind", "strands") or "strands"
    if kind not in AGENT_KINDS:
        raise AgentSpecError(f"agent.kind must be one of {', '.join(AGENT_KINDS)}, got {kind!r}")
    http_only = {k: keys.pop(k) for k in ("command", "entry_point", "env", "max_request_bytes") if k in keys}
    if kind == "strands":
        given = [k for k, v in http_only.items() if v and v != getattr(HttpAgentSpec, k, None)]
        if given:
            raise AgentSpecError(f"agent.{given[0]} is for agent.kind http (this agent is kind strands)")
        return StrandsAgentSpec(**keys)
    defaults = StrandsAgentSpec()
    for name in ("tools", "system_prompt", "factory"):
        if name in keys and keys.pop(name) not in (getattr(defaults, name), None, "", []):
            raise AgentSpecError(f"agent.{name} is not used by an http agent (its own process has its "
                                 "tools and prompt): leave it out")
    return HttpAgentSpec(**http_only, **keys)
