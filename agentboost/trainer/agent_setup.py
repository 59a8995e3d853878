"""The agent and the environment a training config describes. The trainer, ``agentboost eval`` and
the benchmarks build them here, so a policy is trained and measured with one agent and one reward."""

from __future__ import annotations

from ..agents.strands_agent import DEFAULT_SYSTEM_PROMPT, StrandsAgentSpec
from ..environments.strands_env import StrandsEnv
from .config import TrainConfig


def agent_spec(cfg: TrainConfig) -> StrandsAgentSpec:
    a = cfg.agent
    return StrandsAgentSpec(tools=list(a.tools),
                            system_prompt=a.system_prompt if a.system_prompt is not None else DEFAULT_SYSTEM_PROMPT,
                            max_model_calls=a.max_model_calls, max_response_tokens=a.max_response_tokens,
                            timeout_s=a.timeout_s, agent_type=a.agent_type, reasoning=a.reasoning,
                            tool_parser=a.tool_parser)


def environment(cfg: TrainConfig) -> StrandsEnv:
    return StrandsEnv(reward=cfg.reward.name, failed_reward=cfg.reward.failed_reward,
                      conversation=cfg.env.conversation or None,
                      conversation_options=dict(cfg.env.conversation_options))
