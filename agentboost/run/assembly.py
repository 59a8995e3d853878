"""The agent and the environment a training config describes. The trainer, ``agentboost eval`` and
the benchmarks build them here, so a policy is trained and measured with one agent and one reward."""

from __future__ import annotations

from ..agents.http_agent import HttpAgentSpec, spec_from_keys
from ..agents.strands_agent import DEFAULT_SYSTEM_PROMPT, AgentSpecError, StrandsAgentSpec
from ..environments.strands_env import StrandsEnv
from .config import TrainConfig


def agent_spec(cfg: TrainConfig) -> StrandsAgentSpec | HttpAgentSpec:
    """The agent the config describes (``agent.kind``: built here, or its own process behind the
    gateway), with ``agent.prompt_policy`` applied when it names one."""
    a = cfg.agent
    spec = spec_from_keys({"kind": a.kind, "command": a.command, "entry_point": a.entry_point,
                           "tools": list(a.tools), "factory": a.factory or None,
                           "system_prompt": a.system_prompt if a.system_prompt is not None else DEFAULT_SYSTEM_PROMPT,
                           "max_model_calls": a.max_model_calls, "max_response_tokens": a.max_response_tokens,
                           "timeout_s": a.timeout_s, "agent_type": a.agent_type, "reasoning": a.reasoning,
                           "tool_parser": a.tool_parser, "max_request_bytes": a.max_request_bytes})
    if isinstance(spec, HttpAgentSpec):
        if a.prompt_policy:
            raise AgentSpecError("agent.prompt_policy sets the prompt of an agent agentboost builds; an http "
                                 "agent keeps its own")
        if cfg.algorithm.policy == "prompt":
            raise AgentSpecError("algorithm.policy prompt trains the prompt of an agent agentboost builds; an "
                                 "http agent keeps its own (train its weights: algorithm.policy weights)")
        if cfg.env.conversation:
            raise AgentSpecError("env.conversation needs an agent agentboost builds (agent.kind strands): an "
                                 "http agent runs its own conversation")
        return spec
    if a.prompt_policy:
        from .prompt_policy import load_prompt_policy

        spec = load_prompt_policy(a.prompt_policy).apply(spec)
    return spec


def runs_model_code(reward: str | None, tools: list[str]) -> list[str]:
    """Which of ``reward`` (None: the agent type's default, decided later) and ``tools`` run
    model-written code (those marked ``runs_model_code``)."""
    from ..imports import import_object
    from ..rewards.registry import get_reward

    found = []
    if reward and reward != "judge" and getattr(get_reward(reward), "runs_model_code", False):
        found.append(f"reward {reward}")
    for path in tools:
        if getattr(import_object(path, what="tool"), "runs_model_code", False):
            found.append(f"tool {path}")
    return found


def check_sandbox(reward: str | None, tools: list[str], allow_weak: bool | None) -> str | None:
    """Before any work: a run whose reward or tools execute model-written code refuses to start
    (``InputError``, one line) where the sandbox cannot isolate it, unless weak is allowed
    (``sandbox.allow_weak``, ``--allow-weak-sandbox`` or ``AGENTBOOST_SANDBOX_ALLOW_WEAK=1``); then
    the warning to give at start and keep in the run's result. None when nothing runs code or the
    sandbox isolates."""
    users = runs_model_code(reward, tools)
    if not users:
        return None
    import os

    from ..sandbox.runner import require_isolation

    warning = require_isolation(allow_weak, what=f"this run ({' and '.join(users)})")
    if warning is not None:
        os.environ["AGENTBOOST_SANDBOX_ALLOW_WEAK"] = "1"  # the rollout workers run the code: they inherit it
    return warning


def check_config_sandbox(cfg: TrainConfig) -> str | None:
    # an http agent's tools run in its own process, not here: only the reward is the host's
    tools = list(cfg.agent.tools) if cfg.agent.kind != "http" else []
    return check_sandbox(cfg.reward.name, tools, cfg.sandbox.allow_weak or None)


def environment(cfg: TrainConfig) -> StrandsEnv:
    from .config import shaping_config

    return StrandsEnv(reward=cfg.reward.name, failed_reward=cfg.reward.failed_reward,
                      prompt_template=cfg.env.prompt_template or None,
                      shaping=shaping_config(cfg.reward.shaping) if cfg.reward.shaping else None,
                      conversation=cfg.env.conversation or None,
                      conversation_options=dict(cfg.env.conversation_options),
                      judge=dict(cfg.reward.judge) or None)
