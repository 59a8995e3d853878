"""agentboost: the Agent Training Kit — reinforcement learning for Strands Agents.

The public surface is ``__all__``: the Python API (``train``, ``evaluate``, ``GRPOConfig``, ``Run``,
``export_trajectories``), the agent specification, the worker pool, the environment, the reward
registry and the types of what users plug in (``agentboost.extensions`` lists every extension
point). Each name is imported on first use, so ``import agentboost`` stays light for the worker
processes.
"""

from . import moved as _moved

__version__ = "0.2.0"

# name -> the module that defines it (imported when the name is first used)
_EXPORTS = {
    # the Python API
    "GRPOConfig": "api", "Run": "api", "train": "api", "evaluate": "api", "export_trajectories": "api",
    # the agent, the pool that runs it, the environment that scores it
    "StrandsAgentSpec": "agents.strands_agent", "StrandsProcessPool": "rollout.pool",
    "StrandsEnv": "environments.strands_env", "Episode": "episodes.record", "Status": "episodes.record",
    # the reward registry
    "RewardResult": "rewards.registry", "register_reward": "rewards.registry", "get_reward": "rewards.registry",
    "registered_rewards": "rewards.registry",
    # the GRPO guide's names: its reward registry, its job-service client
    "get_global_registry": "rewards.global_registry", "Trajectory": "rewards.registry", "TrainingClient": "jobs.client",
    # what users plug in
    "AgentFactory": "extensions", "RewardFunction": "extensions", "Conversation": "extensions",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

_moved.install()  # old module paths (before 0.2) still import, with a DeprecationWarning


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentboost' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
