"""The GRPO guide's reward registry API on agentboost's one registry (``registry.py``):
``get_global_registry()`` with ``register``, ``set_agent_strategy``; rewards in the guide's
one-argument form ``reward(trajectory)`` (a ``Trajectory``) or agentboost's ``reward(task, episode)``.
What is registered here is what ``get_reward``, jobs, ``train`` and ``eval`` find."""

from __future__ import annotations

from typing import Callable

from .registry import Trajectory, default_reward, get_reward, register_reward, registered_rewards, set_default_reward

__all__ = ["RewardRegistry", "Trajectory", "get_global_registry"]


class RewardRegistry:
    """The guide's registry object; each method is one of ``registry.py``'s functions."""

    def register(self, name: str, fn: Callable) -> Callable:
        return register_reward(name, fn)

    def set_agent_strategy(self, agent_type: str, name: str) -> None:
        """The reward used for agents of ``agent_type`` when a job or run names none."""
        set_default_reward(agent_type, name)

    def get_agent_strategy(self, agent_type: str) -> str | None:
        return default_reward(agent_type)

    def get(self, name: str) -> Callable:
        return get_reward(name)

    def list(self) -> list[str]:
        return registered_rewards()


_GLOBAL = RewardRegistry()


def get_global_registry() -> RewardRegistry:
    return _GLOBAL
