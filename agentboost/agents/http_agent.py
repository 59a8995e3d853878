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
from dataclasses import dataclass
from typing import Any, ClassVar

from ..imports import ImportPathError, import_object
from .options import AgentOptions, HttpFields, fields_of
from .strands_agent import AgentSpecError, check_model_options


@dataclass
class HttpAgentSpec(AgentOptions, HttpFields):
    """An agent in its own process behind the gateway: its fields and their defaults are
    ``agents/options.py``'s, the same as the configuration's ``agent`` section. ``command`` may also
    be an argument list."""
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
        keys = {name: getattr(self, name) for name in (*fields_of(HttpFields), *fields_of(AgentOptions))}
        keys["command"] = self.command if isinstance(self.command, str) else shlex.join(self.command)
        return {"kind": "http", **keys}

    def build(self, model: Any) -> Any:
        raise AgentSpecError("an http agent runs in its own process: episode_runner.run_episode runs it")
