"""The reward registry: name -> function, with a default per agent type.

A reward function receives the task (the dataset row) and the finished episode (messages, tool
calls, final answer, status) and returns a ``RewardResult`` (or a plain number, taken as the
outcome). Functions that raise are caught by the caller: the episode is marked ``error``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..episodes.record import Episode


@dataclass
class RewardResult:
    score: float
    components: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


RewardFn = Callable[[dict[str, Any], Episode], "RewardResult | float"]

_REWARDS: dict[str, RewardFn] = {}
_DEFAULTS: dict[str, str] = {}


class UnknownRewardError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def register_reward(name: str, fn: RewardFn | None = None):
    """``register_reward("name", fn)`` or as a decorator ``@register_reward("name")``."""
    def deco(f: RewardFn) -> RewardFn:
        _REWARDS[name] = f
        return f

    return deco(fn) if fn is not None else deco


def _load_builtins() -> None:
    # the built-in rewards register themselves on import; imported here, not at module top, to
    # keep this module free of their dependencies (sandbox, math-verify)
    from . import code_reward, math_reward  # noqa: F401


def registered_rewards() -> list[str]:
    _load_builtins()
    return sorted(_REWARDS)


def set_default_reward(agent_type: str, name: str) -> None:
    if name not in _REWARDS:
        get_reward(name)
    _DEFAULTS[agent_type] = name


def default_reward(agent_type: str) -> str | None:
    return _DEFAULTS.get(agent_type)


def get_reward(name_or_path: str) -> RewardFn:
    """A registered name, or an import path (``module:function``) to any reward function."""
    _load_builtins()
    if name_or_path in _REWARDS:
        return _REWARDS[name_or_path]
    if ":" in name_or_path:
        from ..agents.strands_agent import import_object

        fn = import_object(name_or_path, "reward function")
        if not callable(fn):
            raise UnknownRewardError(f"reward {name_or_path!r} is not callable")
        return fn
    raise UnknownRewardError(
        f"unknown reward {name_or_path!r}; registered: {', '.join(registered_rewards()) or '(none)'}; "
        "or give an import path module:function"
    )


def as_result(value: RewardResult | float | int) -> RewardResult:
    if isinstance(value, RewardResult):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a reward function must return a RewardResult or a number, got {type(value).__name__}")
    return RewardResult(score=float(value), components={"outcome": float(value)})


_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def last_number(text: str | None) -> float | None:
    if not text:
        return None
    found = _NUMBER.findall(text)
    if not found:
        return None
    return float(found[-1].replace(",", ""))


@register_reward("exact_answer")
def exact_answer(task: dict[str, Any], episode: Episode) -> RewardResult:
    """1.0 when the final answer's last number equals the task's ``answer`` (numbers compared
    numerically), or, for non-numeric answers, when the stripped texts are equal."""
    if "answer" not in task:
        raise KeyError(f"task {task.get('task_id')!r} has no 'answer' field for the exact_answer reward")
    expected = str(task["answer"]).strip()
    got_text = (episode.final_answer or "").strip()
    want = last_number(expected)
    if want is not None and _NUMBER.fullmatch(expected.replace(" ", "")):
        got = last_number(got_text)
        ok = got is not None and abs(got - want) < 1e-9
        meta = {"extracted": got, "expected": want}
    else:
        ok = got_text == expected
        meta = {"extracted": got_text[-200:], "expected": expected}
    score = 1.0 if ok else 0.0
    return RewardResult(score=score, components={"outcome": score}, metadata=meta)


set_default_reward("calculator", "exact_answer")
_DEFAULTS.update({"code": "code", "math": "math"})
