"""The ``math`` reward: answer equivalence with ``math-verify``; 1.0 / 0.0.

The final answer is the content after the model's reasoning (``<think>...</think>``): reasoning
is never graded, and a turn whose reasoning never closed has no answer. From it the answer is
extracted from the last ``\\boxed{...}`` first, then from the patterns in ``ANSWER_PATTERNS``
(override per task with ``answer_pattern``, a regex with one group), then the last number. The
extracted answer is kept in the metadata; when there is none, ``reason`` says why (e.g. ``answer
only in reasoning``).

The equivalence check runs in a helper process (``rewards.bounded``) and ends within
``MATH_LIMIT_S`` in any thread: an answer such as ``\\boxed{9^{9^{9^{9}}}}`` that math-verify cannot
finish scores 0 with the reason ``math equivalence did not finish within 10 s``.
"""

from __future__ import annotations

import re
from typing import Any

from ..episodes.record import Episode
from ..reasoning import answer_content
from . import bounded
from .registry import RewardResult, graded_answer, missing_reason

MATH_LIMIT_S = 10.0  # one equivalence check, math-verify's parsing of both sides included

ANSWER_PATTERNS = [
    r"(?i)final answer\s*(?:is|:)\s*\$?([^\n$]+?)\$?\s*(?:\.|$)",
    r"(?i)answer\s*(?:is|:)\s*\$?([^\n$]+?)\$?\s*(?:\.|$)",
    r"####\s*([^\n]+)",
]
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")


def last_boxed(text: str) -> str | None:
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def extract_answer(text: str | None, patterns: list[str] | None = None) -> tuple[str | None, str]:
    """(answer, how) from the content of ``text``: its reasoning (``<think>...</think>``) is left
    out, and text whose reasoning never closed has no answer."""
    text = answer_content(text)
    if not text:
        return None, "none"
    boxed = last_boxed(text)
    if boxed:
        return boxed, "boxed"
    for pat in patterns or ANSWER_PATTERNS:
        found = re.findall(pat, text)
        if found:
            return found[-1].strip(), "pattern"
    numbers = _NUMBER.findall(text)
    if numbers:
        return numbers[-1].replace(",", ""), "last_number"
    return None, "none"


def equivalent(gold: str, answer: str, limit_s: float | None = None) -> bool:
    """Whether ``answer`` equals ``gold`` as math-verify judges, within ``limit_s`` seconds (None:
    ``MATH_LIMIT_S``) in any thread; raises ``bounded.Overrun`` past it (and ``bounded.HelperError``
    if the check's process died)."""
    return bool(bounded.call("agentboost.rewards.math:equivalent_here", [gold, answer], limit_s or MATH_LIMIT_S,
                             preload=("math_verify", "agentboost.rewards.math")))


def equivalent_here(gold: str, answer: str) -> bool:
    """The check itself, in this process with no time limit (``equivalent`` runs it in a helper that
    enforces one): math-verify's own timeouts are off, since they would cancel the helper's alarm."""
    from math_verify import parse, verify

    g = parse(f"${gold}$", parsing_timeout=None)
    a = parse(f"${answer}$", parsing_timeout=None)
    if not g or not a:
        return gold.strip() == answer.strip()
    return bool(verify(g, a, timeout_seconds=None))


def math_reward(task: dict[str, Any], episode: Episode, limit_s: float | None = None) -> RewardResult:
    if task.get("answer") in (None, ""):
        raise KeyError(f"task {task.get('task_id')!r} has no 'answer' for the math reward")
    gold = str(task["answer"])
    patterns = [task["answer_pattern"]] if task.get("answer_pattern") else None
    final = graded_answer(episode)
    answer, how = extract_answer(final.text, patterns)
    meta = {"extracted": answer, "extracted_by": how, "expected": gold}
    try:
        ok = answer is not None and equivalent(gold, answer, limit_s)
        if not ok and answer is not None and how == "pattern":
            number = _NUMBER.search(answer)  # "18 dollars", "x = 5 cm": the number without its unit
            if number and number.group(0) != answer:
                ok = equivalent(gold, number.group(0).replace(",", ""), limit_s)
    except (bounded.Overrun, bounded.HelperError) as e:
        ok = False  # the answer's doing (a tower of powers, a huge product): a wrong answer, with why
        meta["reason"] = f"math equivalence {e}" if isinstance(e, bounded.Overrun) else f"math equivalence failed: {e}"
    score = 1.0 if ok else 0.0
    if answer is None:
        in_reasoning = bool(final.reasoning) and extract_answer(final.reasoning, patterns)[0] is not None
        meta["reason"] = missing_reason(final, in_reasoning, "no answer in the final answer")
    return RewardResult(score=score, components={"outcome": score}, metadata=meta)


math_reward.reward_range = (0.0, 1.0)
