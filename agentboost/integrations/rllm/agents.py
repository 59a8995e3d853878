"""agentboost's Strands agent and environment as rLLM classes (the ``rllm`` path).

Pass them to rLLM's trainer (``AgentTrainer(agent_class=StrandsRLLMAgent, env_class=StrandsRLLMEnv,
agent_args=..., env_args=...)``). They carry configuration only: rLLM's trainer builds one of each
per row, and agentboost's override of rLLM's ``AgentExecutionEngine`` (installed by
``python apply_patches.py``) runs each pair as one agentboost episode. Needs rLLM installed.

- ``agent_args``: the keys of a configuration's ``agent`` section (``agents/config.py``: tools, system
  prompt, limits, tool parser, factory; ``kind: http`` for an agent in its own process), with its
  defaults.
- ``env_args``: ``strands_env`` = the fields of ``agentboost.environments.strands_env.StrandsEnv``
  (reward, prompt field or template, shaping, failed reward); every other key is part of the task,
  as are the row's ``extra_info`` fields (rLLM merges them).
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from rllm.agents.agent import BaseAgent
from rllm.environments.base.base_env import BaseEnv

from ...agents.config import spec_from_keys
from ...environments.strands_env import StrandsEnv
from ...files import sha256_bytes
from ...rewards.shaping import ShapingConfig

_NOT_PATCHED = ("{cls} runs only inside agentboost's override of rLLM's AgentExecutionEngine; this engine "
                "is rLLM's own. Run `python apply_patches.py` in this environment (docs/rllm.md, linked from the README).")


def _plain(value: Any) -> Any:
    """Hydra hands over DictConfig/ListConfig values; the pool needs picklable plain data."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def agent_spec_from_args(agent_args: dict[str, Any]):
    """rLLM's ``agent_args`` read as a configuration's ``agent`` section: the same schema, the same
    defaults as every other path."""
    return spec_from_keys({k: _plain(v) for k, v in agent_args.items()}, "agent.agent_args")


def _known_fields(cls: type, args: dict[str, Any], where: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(args) - names)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected fields of {cls.__name__}: {sorted(names)}")
    return {k: _plain(v) for k, v in args.items()}


class StrandsRLLMAgent(BaseAgent):
    is_agentboost_strands = True

    def __init__(self, **agent_args: Any):
        self.spec = agent_spec_from_args(agent_args)

    def update_from_env(self, observation, reward, done, info, **kwargs):
        raise RuntimeError(_NOT_PATCHED.format(cls=type(self).__name__))

    def update_from_model(self, response, **kwargs):
        raise RuntimeError(_NOT_PATCHED.format(cls=type(self).__name__))

    def reset(self):
        return None  # rLLM's execute_tasks resets agents before its own checks; nothing to reset


def _task_id(task: dict[str, Any]) -> str:
    if task.get("task_id") is not None:
        return str(task["task_id"])
    # rLLM rows need not carry an id; a stable one from the content keeps GRPO groups and
    # episode records traceable
    blob = json.dumps(task, sort_keys=True, default=repr).encode()
    return "task-" + sha256_bytes(blob)[:16]


class StrandsRLLMEnv(BaseEnv):
    is_agentboost_strands = True

    def __init__(self, task: dict[str, Any], strands_env: StrandsEnv):
        self.task = dict(task)
        self.task["task_id"] = _task_id(self.task)
        self.strands_env = strands_env

    @staticmethod
    def from_dict(info: dict) -> "StrandsRLLMEnv":
        info = {k: _plain(v) for k, v in dict(info).items()}
        cfg = info.pop("strands_env", None) or {}
        if isinstance(cfg, StrandsEnv):
            env = cfg
        else:
            cfg = _known_fields(StrandsEnv, dict(cfg), "env.env_args.strands_env")
            if isinstance(cfg.get("shaping"), dict):
                cfg["shaping"] = ShapingConfig(**cfg["shaping"])
            env = StrandsEnv(**cfg)
        return StrandsRLLMEnv(info, env)

    def reset(self):
        raise RuntimeError(_NOT_PATCHED.format(cls=type(self).__name__))

    def step(self, action):
        raise RuntimeError(_NOT_PATCHED.format(cls=type(self).__name__))

    @staticmethod
    def is_multithread_safe() -> bool:
        return True
