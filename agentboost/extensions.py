"""What users plug in, as typed protocols: an agent factory, a reward function, a conversation.

Nothing has to subclass these; they document the call signatures agentboost uses and let a type
checker verify a user's function (``fn: RewardFunction = my_reward``). Each is named by an import
path in a config (``agent.factory``, ``reward.name``, ``env.conversation``) or passed directly in
Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # typing only: the record layer imports nothing from Strands at run time
    from .episodes.record import Episode
    from .rewards.registry import RewardResult


@runtime_checkable
class AgentFactory(Protocol):
    """``factory(model=..., tools=..., system_prompt=...) -> strands.Agent``.

    ``model`` is agentboost's trainable model (a ``strands.models.Model``), ``tools`` the resolved
    Strands tools of the spec, ``system_prompt`` the spec's. Build the agent around exactly this
    model so that every call is recorded token for token; add hooks, state or a conversation manager
    that never trims history (trimming would break the token-exact extension)."""

    def __call__(self, *, model: Any, tools: list[Any], system_prompt: str | None) -> Any: ...


@runtime_checkable
class RewardFunction(Protocol):
    """``reward(task, episode) -> RewardResult | float``.

    ``task`` is the dataset row (a dict, the task file's columns); ``episode`` the finished
    ``Episode`` (messages, tool calls, ``final_answer``, ``status``). A plain number is taken as the
    outcome reward. An exception marks the episode ``error`` with its text; it is never scored 0
    silently."""

    def __call__(self, task: dict[str, Any], episode: "Episode") -> "RewardResult | float": ...


@runtime_checkable
class Conversation(Protocol):
    """A multi-turn episode: a user simulator that answers the agent (``env.conversation`` names a
    ``factory(task, policy=None, **options) -> Conversation``).

    ``setup(agent)`` runs once, before the first turn (add hooks or tools); ``await
    next_user_message(agent)`` gives the next user message (``""``: the agent goes on without one;
    ``None``: the conversation is over); ``record(agent)`` returns what goes into the episode's
    ``metadata["conversation"]`` (termination reason, user turns)."""

    def setup(self, agent: Any) -> None: ...

    async def next_user_message(self, agent: Any) -> str | None: ...

    def record(self, agent: Any) -> dict[str, Any]: ...


__all__ = ["AgentFactory", "RewardFunction", "Conversation"]
