"""``StrandsEnv``: a task becomes the first user message; the reward scores the finished episode."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..episodes.record import Episode, Status
from ..errors import InputError
from ..rewards.registry import RewardValueError, as_result, check_reward_value, declared_range, get_reward
from ..rewards.shaping import ShapingConfig, shaping_terms

JUDGE = "judge"  # reward.name of the judge reward (agentboost.rewards.judge): a chat model and a rubric


class TaskFormatError(InputError):
    pass


class ConversationEnded(Exception):
    """A conversation's limit ended it inside the agent's turn (raised from a hook, before the
    agent's next model call): an ending, recorded by the conversation, not a failure."""

    def __init__(self, reason: str):
        super().__init__(f"the conversation ended: {reason}")
        self.reason = reason


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


@runtime_checkable
class ConversationFactory(Protocol):
    """``factory(task, policy=None, **options) -> Conversation`` (``env.conversation``, its
    options ``env.conversation_options``): one conversation per episode."""

    def __call__(self, task: dict[str, Any], policy: Any = None, **options: Any) -> Conversation: ...


@dataclass
class StrandsEnv:
    reward: str | None = None  # registered name or module:function; None: episodes are not scored
    prompt_field: str = "question"
    # a str.format template over the task's fields, e.g. "Solve and answer with a number: {question}"
    prompt_template: str | None = None
    shaping: ShapingConfig | None = None
    # the score a failed episode (timeout, crashed, error) gets, with the "keep" group policy, so
    # that its GRPO group stays whole (applied by apply_group_policy)
    failed_reward: float = 0.0
    # a multi-turn conversation per episode (``module:function(task, policy=None, **options)``, e.g.
    # ``agentboost.environments.tau2.conversation:tau2_conversation``): a user simulator answers
    # the agent until the conversation ends; None: one prompt, one agent run
    conversation: str | None = None
    conversation_options: dict[str, Any] = field(default_factory=dict)
    # with reward "judge": the judge (agentboost.rewards.judge.judge_config: model, rubric, mode, ...)
    judge: dict[str, Any] | None = None

    def validate(self) -> "StrandsEnv":
        if self.reward == JUDGE:
            self._judge()
        elif self.reward is not None:
            get_reward(self.reward)
        if self.prompt_template is not None:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.prompt_template) if f]
            if not fields:
                raise TaskFormatError(f"prompt_template {self.prompt_template!r} names no task field")
        if self.conversation is not None:
            self._conversation_factory()
        return self

    def _conversation_factory(self):
        from ..imports import ImportPathError, import_object

        try:
            return import_object(self.conversation, "conversation factory")
        except ImportPathError as e:
            raise TaskFormatError(str(e)) from None

    def new_conversation(self, task: dict[str, Any], policy: tuple | None = None):
        """This episode's conversation (None without one); ``policy`` is (sampler, tokenizer) of the
        episode's policy, for a user simulator that samples from it."""
        if self.conversation is None:
            return None
        return self._conversation_factory()(task, policy=policy, **self.conversation_options)

    def first_message(self, task: dict[str, Any]) -> str:
        if self.prompt_template is not None:
            try:
                return self.prompt_template.format(**task)
            except KeyError as e:
                raise TaskFormatError(f"task {task.get('task_id')!r} has no field {e.args[0]!r} "
                                      f"used by prompt_template") from None
        value = task.get(self.prompt_field)
        if not isinstance(value, str) or not value:
            raise TaskFormatError(f"task {task.get('task_id')!r} has no text field {self.prompt_field!r}")
        return value

    def score(self, task: dict[str, Any], episode: Episode) -> None:
        """Set the reward of an episode that ran to an end. Failed episodes (timeout, crashed,
        error) are left unscored here: they get ``failed_reward`` where the group policy is
        applied (``environments.groups.apply_group_policy``), the one place that decides what a
        failure is worth. A reward function that raises marks the episode ``error`` with its
        message."""
        if episode.failed or episode.aborted or self.reward is None:  # an aborted one has no outcome at all
            return
        if self.reward == JUDGE and self._judge().mode == "group":
            return  # the whole group at once, when it is complete: score_groups
        try:
            if self.reward == JUDGE:
                from ..rewards.judge import judge_episode

                result = as_result(judge_episode(self._judge(), task, episode), (0.0, 1.0))
            else:
                fn = get_reward(self.reward)
                result = as_result(fn(task, episode), declared_range(fn))
            self._apply(episode, result)
        except Exception as e:  # the user's reward: recorded on the episode, never lost
            self._reward_failed(episode, e)

    @property
    def scores_groups(self) -> bool:
        """Whether episodes are scored a whole group at once, after rollout (``score_groups``)."""
        return self.reward == JUDGE and self._judge().mode == "group"

    def score_groups(self, tasks: dict[str, dict[str, Any]], episodes: list[Episode]) -> None:
        """A group-ranking judge: every task's episodes that ran to an end, scored in one call."""
        from ..rewards.judge import judge_group

        groups: dict[str, list[Episode]] = {}
        for ep in episodes:
            if not (ep.failed or ep.aborted):
                groups.setdefault(ep.group_id, []).append(ep)
        for members in groups.values():
            try:
                results = judge_group(self._judge(), tasks[members[0].task_id], members)
            except Exception as e:
                for ep in members:
                    self._reward_failed(ep, e)
                continue
            for ep, result in zip(members, results):
                try:
                    self._apply(ep, as_result(result, (0.0, 1.0)))
                except RewardValueError as e:
                    self._reward_failed(ep, e)

    def _judge(self):
        from ..rewards.judge import judge_config

        if getattr(self, "_judge_cfg", None) is None:
            self._judge_cfg = judge_config(self.judge)
        return self._judge_cfg

    def _reward_failed(self, episode: Episode, e: Exception) -> None:
        from ..models.chat import is_outage

        # a judge's service that is down says nothing of the episode: aborted, not an error
        episode.status = Status.ABORTED if is_outage(e) else Status.ERROR
        episode.reward = None  # nothing of a failed scoring is kept as a reward
        if isinstance(e, RewardValueError):
            episode.error = f"reward {self.reward!r} gave an invalid reward: {e}"
        else:
            episode.error = f"reward {self.reward!r} raised {type(e).__name__}: {e}"

    def _apply(self, episode: Episode, result) -> None:
        components = dict(result.components) or {"outcome": result.score}
        total = result.score
        if self.shaping is not None:
            for name, value in shaping_terms(self.shaping, episode).items():
                components[name] = value
                total += value
        for name, value in components.items():
            check_reward_value(value, f"its component {name!r}")
        episode.reward = check_reward_value(total, "the total of the reward and its shaping terms")
        episode.reward_components = components
        episode.reward_metadata = dict(result.metadata)
