"""The reward registry: name -> function, with a default per agent type.

A reward function receives the task (the dataset row) and the finished episode (messages, tool
calls, final answer, status), or, in the GRPO guide's form, one ``Trajectory`` (below:
``trajectory.success``, ``.final_answer``, ``.steps``, ...), and returns a ``RewardResult`` (or a plain number, taken as the
outcome). Rewards grade the content only, never the reasoning (``graded_answer``): an answer that
is only in the reasoning, or a final turn whose reasoning never closed, scores as a format failure
with the reason named in the metadata (``reason``). Functions that raise are caught by the caller: the episode is marked ``error``.
Built-in rewards in other modules are found by name through a lazy table (``_BUILTIN``).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Protocol, runtime_checkable

from ..episodes.record import Episode, Status
from ..errors import InputError
from ..imports import ImportPathError, import_object
from ..reasoning import THINK, UNTERMINATED_REASONING, block_reasoning, split_reasoning


@dataclass
class RewardResult:
    score: float
    components: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RewardFunction(Protocol):
    """``reward(task, episode) -> RewardResult | float``.

    ``task`` is the dataset row (a dict, the task file's columns); ``episode`` the finished
    ``Episode`` (messages, tool calls, ``final_answer``, ``status``). A plain number is taken as the
    outcome reward. An exception marks the episode ``error`` with its text; it is never scored 0
    silently."""

    def __call__(self, task: dict[str, Any], episode: Episode) -> "RewardResult | float": ...


RewardFn = Callable[[dict[str, Any], Episode], "RewardResult | float"]

_REWARDS: dict[str, RewardFn] = {}
# Built-in rewards that live in their own modules, imported on first use: their modules import
# this one (for RewardResult), never the other way round, and their dependencies (the sandbox,
# math-verify) load only when asked for.
_BUILTIN = {
    "code": "agentboost.rewards.code:code_reward",
    "code_partial": "agentboost.rewards.code:code_partial_reward",
    "math": "agentboost.rewards.math:math_reward",
}
_DEFAULTS: dict[str, str] = {}


class UnknownRewardError(InputError, KeyError):
    def __str__(self) -> str:
        return self.args[0]


class RewardRegistrationError(ValueError):
    """A second, different function registered under a taken name (as veRL's registries refuse)."""


def register_reward(name: str, fn: RewardFn | None = None):
    """``register_reward("name", fn)`` or as a decorator ``@register_reward("name")``. A name
    holds one function: registering another one under it is an error."""
    def deco(f: RewardFn) -> RewardFn:
        taken = _REWARDS.get(name)
        if name in _BUILTIN or (taken is not None and taken is not f):
            raise RewardRegistrationError(
                f"reward {name!r} is already registered ({_describe(_REWARDS.get(name)) if taken else _BUILTIN[name]}); "
                "choose another name")
        _REWARDS[name] = f
        return f

    return deco(fn) if fn is not None else deco


def _describe(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def registered_rewards() -> list[str]:
    return sorted({*_REWARDS, *_BUILTIN})


def set_default_reward(agent_type: str, name: str) -> None:
    get_reward(name)
    _DEFAULTS[agent_type] = name


def default_reward(agent_type: str) -> str | None:
    return _DEFAULTS.get(agent_type)


def get_reward(name_or_path: str) -> RewardFn:
    """A registered name, or an import path (``module:function``) to any reward function; always
    in the two-argument form ``reward(task, episode)`` (a one-argument reward gets a ``Trajectory``)."""
    return as_task_episode_reward(_lookup(name_or_path))


def _lookup(name_or_path: str) -> RewardFn:
    if name_or_path in _REWARDS:
        return _REWARDS[name_or_path]
    if name_or_path in _BUILTIN:
        return import_object(_BUILTIN[name_or_path], "built-in reward")
    if ":" in name_or_path:
        try:
            fn = import_object(name_or_path, "reward function")
        except ImportPathError as e:
            raise UnknownRewardError(str(e)) from None
        if not callable(fn):
            raise UnknownRewardError(f"reward {name_or_path!r} is not callable")
        why = _not_a_reward(fn)
        if why:
            raise UnknownRewardError(f"reward {name_or_path!r} {why}: expected a function reward(task, episode) "
                                     "or reward(trajectory)")
        return fn
    raise UnknownRewardError(
        f"unknown reward {name_or_path!r}; registered: {', '.join(registered_rewards()) or '(none)'}; "
        "or give an import path module:function"
    )


def _not_a_reward(fn: Callable) -> str | None:
    """Why an importable callable cannot be a reward, found before a run starts (else every episode
    would err at its first scoring, after the model loaded): a function of Python's standard library
    (``json:loads`` takes one argument, so it would be called with a trajectory), or one that takes
    neither (task, episode) nor (trajectory)."""
    module = str(getattr(fn, "__module__", None) or "")
    if module.split(".")[0] in sys.stdlib_module_names:
        return f"is a function of Python's standard library ({module}), not a reward"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a callable without a signature: judged when it runs
    for args in ((None, None), (None,)):
        try:
            sig.bind(*args)
            return None
        except TypeError:
            continue
    return f"takes neither (task, episode) nor (trajectory): its signature is {sig}"


def portable_reward(reward: str | Callable) -> str:
    """How another process names ``reward`` (a job's trainer, rollout workers): a name registered in
    this process by user code becomes its function's import path, since the registration happened
    here only; agentboost's own names, unknown names (the other side may know them) and import
    paths stay as they are. A function must be importable: module-level in an importable module."""
    if isinstance(reward, str):
        fn = _REWARDS.get(reward)
        if fn is None or (getattr(fn, "__module__", "") or "").startswith("agentboost."):
            return reward
    else:
        fn = reward
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not callable(fn) or not module or module == "__main__" or "<" in name:
        raise UnknownRewardError(
            f"reward {_describe(fn)} must be importable by the processes that score episodes (a module-level "
            "function in a module on their path, not __main__, a lambda or a nested function), or a registered "
            "agentboost reward name")
    return f"{module}:{name}"


class RewardValueError(ValueError):
    """A reward that is not a number a trainer can learn from: not finite (NaN, infinity) or outside the
    range its function declares (``reward_range``). The episode is an error with this reason, never
    a score: a NaN averages into every figure it touches, and health counts errors."""


def as_result(value: RewardResult | float | int, declared: tuple[float, float] | None = None) -> RewardResult:
    """A reward function's return value as a ``RewardResult``, checked: its score and components
    finite, the score within ``declared`` (the function's ``reward_range``) when given; else
    ``RewardValueError``."""
    if isinstance(value, RewardResult):
        result = value
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a reward function must return a RewardResult or a number, got {type(value).__name__}")
    else:
        result = RewardResult(score=float(value), components={"outcome": float(value)})
    check_reward_value(result.score, "its score", declared)
    for name, v in result.components.items():
        check_reward_value(v, f"its component {name!r}")
    return result


def check_reward_value(value: Any, what: str, declared: tuple[float, float] | None = None) -> float:
    """``value`` as a float, or ``RewardValueError`` naming ``what`` when it is not a finite number
    (or lies outside ``declared``, a (low, high) range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardValueError(f"{what} is not a number: {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise RewardValueError(f"{what} is {x} (not a finite number)")
    if declared is not None and not declared[0] <= x <= declared[1]:
        raise RewardValueError(f"{what} {x:g} is outside the reward's declared range [{declared[0]:g}, {declared[1]:g}]")
    return x


def declared_range(fn: Any) -> tuple[float, float] | None:
    """A reward function's declared ``reward_range`` (low, high), if it declares one."""
    r = getattr(fn, "reward_range", None)
    if r is None:
        return None
    lo, hi = r
    return float(lo), float(hi)


# why a reward found nothing to grade (the ``reason`` in its metadata)
NO_ANSWER_UNTERMINATED = "no final answer (reasoning never closed)"
ANSWER_ONLY_IN_REASONING = "answer only in reasoning"
NO_FINAL_ANSWER = "no final answer"


@dataclass
class GradedAnswer:
    text: str | None  # the final turn's content: the only thing a reward grades
    reasoning: str = ""  # that turn's reasoning, for a term that wants it (length, format); never graded
    missing: str | None = None  # why ``text`` is None: NO_ANSWER_UNTERMINATED or NO_FINAL_ANSWER


def graded_answer(episode: Episode) -> GradedAnswer:
    """The episode's final answer as rewards grade it: ``final_answer`` (the content of the last
    assistant turn; its reasoning is in a ``reasoningContent`` block, taken as ``reasoning``). An
    answer that still holds its reasoning (given as plain text) is split with the ``<think>`` format."""
    last = next((m for m in reversed(episode.messages or []) if m.get("role") == "assistant"), None)
    content = last.get("content") if last is not None else None
    reasoning = block_reasoning(content) if isinstance(content, list) else ""
    text, missing = episode.final_answer, None
    if text is not None:
        split = split_reasoning(text, THINK)
        if split.reasoning and split.reasoning not in reasoning:
            reasoning = "\n\n".join(r for r in (reasoning, split.reasoning) if r)
        text = split.content if split.terminated or split.content else None
        if text is None:
            missing = NO_ANSWER_UNTERMINATED
    if text is None and missing is None:
        missing = NO_ANSWER_UNTERMINATED if episode.final_answer_status == UNTERMINATED_REASONING else NO_FINAL_ANSWER
    return GradedAnswer(text, reasoning, missing)


def missing_reason(answer: GradedAnswer, found_in_reasoning: bool, otherwise: str) -> str:
    """Why a reward found nothing to grade in ``answer``: the reasoning never closed, else the
    answer is only in the reasoning (``found_in_reasoning``), else ``otherwise``."""
    if answer.missing == NO_ANSWER_UNTERMINATED:
        return NO_ANSWER_UNTERMINATED
    if found_in_reasoning:
        return ANSWER_ONLY_IN_REASONING
    return answer.missing or otherwise


_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def last_number(text: str | None) -> float | None:
    if not text:
        return None
    found = _NUMBER.findall(text)
    if not found:
        return None
    return float(found[-1].replace(",", ""))


def numbers_equal(expected: str, got: str) -> bool:
    """Two numbers as written (thousands commas allowed), compared as decimals: an integer exactly
    (``42.0`` is 42; ``42.0000000001`` is not, nor is a 19-digit integer off by one, which floats
    would call equal), a decimal within 1e-9."""
    e, g = Decimal(expected.replace(",", "").replace(" ", "")), Decimal(got.replace(",", ""))
    if "." not in expected:
        return e == g
    return abs(e - g) < Decimal("1e-9")


@register_reward("exact_answer")
def exact_answer(task: dict[str, Any], episode: Episode) -> RewardResult:
    """1.0 when the final answer's last number equals the task's ``answer`` (numbers compared
    numerically), or, for non-numeric answers, when the stripped texts are equal (an answer given as the
    guide's ``{"result": ..., "test_passed": ...}`` is compared by its ``result``). The final answer
    is the content after the reasoning; a number only in the reasoning scores 0 (``reason``)."""
    if "answer" not in task:
        raise KeyError(f"task {task.get('task_id')!r} has no 'answer' field for the exact_answer reward")
    outcome = task["answer"]
    if isinstance(outcome, dict) and "result" in outcome:  # the guide's {"result": ..., "test_passed": ...}
        outcome = outcome["result"]
    expected = str(outcome).strip()
    answer = graded_answer(episode)
    got_text = (answer.text or "").strip()
    want = last_number(expected)
    if want is not None and _NUMBER.fullmatch(expected.replace(" ", "")):
        got = last_number(got_text)
        ok = got is not None and numbers_equal(expected, _NUMBER.findall(got_text)[-1])
        meta = {"extracted": got, "expected": want}
        if got is None:
            meta["reason"] = missing_reason(answer, last_number(answer.reasoning) is not None, "no number in the final answer")
    else:
        ok = got_text == expected
        meta = {"extracted": got_text[-200:], "expected": expected}
        if not got_text:
            meta["reason"] = missing_reason(answer, expected in answer.reasoning, NO_FINAL_ANSWER)
    score = 1.0 if ok else 0.0
    return RewardResult(score=score, components={"outcome": score}, metadata=meta)


exact_answer.reward_range = (0.0, 1.0)


# The GRPO guide's form of a reward: ``reward(trajectory)``. get_reward hands every caller the
# two-argument form, wrapping a one-argument function (global_registry.py has the guide's registry API).

@dataclass
class Trajectory:
    """One episode as the guide's rewards read it. ``success``: the episode ran to an end and its
    final answer matches the task's expected outcome (``exact_answer``: numbers numerically, text
    exactly, a ``{"result": ...}`` outcome by its result); without an expected outcome, that it ran
    to an end. ``steps``: model calls (the guide's trajectory steps). ``episode`` and ``task``: the
    full record and row, for anything else."""

    query: str
    expected_outcome: Any
    final_answer: str | None
    success: bool
    status: str
    steps: int
    tool_calls: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    task: dict[str, Any] = field(repr=False)
    episode: Episode = field(repr=False)

    @classmethod
    def of(cls, task: dict[str, Any], episode: Episode) -> "Trajectory":
        ended = Status(episode.status) in (Status.OK, Status.TRUNCATED)
        success = ended and ("answer" not in task or exact_answer(task, episode).score >= 1.0)
        return cls(query=task.get("question", ""), expected_outcome=task.get("answer"),
                   final_answer=graded_answer(episode).text, success=success, status=str(Status(episode.status).value),
                   steps=len(episode.calls), tool_calls=[{"name": t.name, "ok": t.ok, "error": t.error}
                                                         for t in episode.tool_calls],
                   messages=list(episode.messages or []), task=task, episode=episode)


def takes_trajectory(fn: Callable) -> bool:
    """A function of one required positional argument (the guide's ``reward(trajectory)``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and C callables: taken as agentboost's form
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) == 1 and len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params)


@functools.lru_cache(maxsize=None)
def as_task_episode_reward(fn: Callable) -> Callable:
    """``fn`` in agentboost's two-argument form: a one-argument reward gets a ``Trajectory``, and a
    number it returns is the episode's reward, with ``trajectory.success`` as its outcome (an
    episode succeeds when the trajectory does, whatever the reward's scale). Any other function is
    returned as it is. Cached: one wrapper per function."""
    if not takes_trajectory(fn):
        return fn

    @functools.wraps(fn)
    def reward(task: dict[str, Any], episode: Episode):
        trajectory = Trajectory.of(task, episode)
        value = fn(trajectory)
        if isinstance(value, RewardResult):
            return value
        score = as_result(value).score
        # the guide keeps success apart from the reward: the outcome component is trajectory.success
        # (what success rates and pass@k count), the rest of the reward is the function's own term
        outcome = 1.0 if trajectory.success else 0.0
        return RewardResult(score=score, components={"outcome": outcome, "custom": score - outcome})

    return reward


set_default_reward("calculator", "exact_answer")
_DEFAULTS.update({"code": "code", "math": "math"})
