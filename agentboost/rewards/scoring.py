"""``agentboost score``: given answers (``task_id``, ``answer``) scored with any reward, each as a
one-message episode, so a reward sees exactly what it would see at the end of a rollout: an answer
that holds its reasoning (``<think>...</think>``) is split as the trainable model splits a turn, the
reasoning into a ``reasoningContent`` block and the content as the final answer."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..episodes.record import Episode
from ..files import iter_jsonl
from ..reasoning import THINK, split_blocks, split_reasoning
from ..tasks import TaskFileError
from .registry import as_result, get_reward


@dataclass
class ScoredAnswer:
    task_id: str
    score: float
    verdict: str
    metadata: dict[str, Any] = field(default_factory=dict)


def read_answers(path: str, tasks: dict[str, dict[str, Any]], tasks_path: str) -> list[dict[str, Any]]:
    answers = []
    for lineno, row in iter_jsonl(path, TaskFileError):
        if not isinstance(row, dict) or "task_id" not in row or not isinstance(row.get("answer"), str):
            raise TaskFileError(f"{path}:{lineno}: expected an object with task_id and answer (text)")
        if str(row["task_id"]) not in tasks:
            raise TaskFileError(f"{path}:{lineno}: task_id {row['task_id']!r} is not in {tasks_path}")
        answers.append(row)
    return answers


def score_answers(reward_name: str, tasks: dict[str, dict[str, Any]], answers: list[dict[str, Any]],
                  jobs: int = 4, judge: Any = None) -> list[ScoredAnswer]:
    """Score every answer (``jobs`` at once); a reward that raises scores 0 with its error kept.
    ``reward_name`` "judge": ``judge`` (a ``rewards.judge.JudgeConfig``) scores each answer, a
    pass being a score at or above its ``pass_threshold``."""
    if reward_name == "judge":
        from .judge import judge_episode

        def reward(task, ep):
            res = judge_episode(judge, task, ep)
            res.metadata["verdict"] = "passed" if res.score >= judge.pass_threshold else "failed"
            return res
    else:
        reward = get_reward(reward_name)

    def one(row: dict[str, Any]) -> ScoredAnswer:
        tid = str(row["task_id"])
        ep = answer_episode(tid, row["answer"])
        try:
            res = as_result(reward(tasks[tid], ep))
        except Exception as e:  # the reward's failure is this answer's verdict, not the run's end
            return ScoredAnswer(tid, 0.0, f"reward error: {type(e).__name__}", {"error": f"{type(e).__name__}: {e}"})
        verdict = res.metadata.get("verdict") or ("passed" if res.score >= 1.0 else "failed")
        return ScoredAnswer(tid, res.score, verdict, res.metadata)

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        return list(ex.map(one, answers))


def answer_episode(task_id: str, text: str) -> Episode:
    """A one-message episode whose only assistant turn is ``text``, split into reasoning and
    content with the ``<think>`` format."""
    split = split_reasoning(text, THINK)
    return Episode(episode_id=f"score-{task_id}", task_id=task_id, group_id=task_id,
                   final_answer=split.content if split.terminated or split.content else None,
                   final_answer_status=split.status if not split.content else None,
                   messages=[{"role": "assistant", "content": split_blocks(split) if split.reasoning else [{"text": text}]}])


def tests_by_verdict(results: list[ScoredAnswer]) -> Counter:
    """Tests run, per verdict, over all answers (rewards that run tests report ``test_verdicts``)."""
    tests: Counter = Counter()
    for r in results:
        tests.update(r.metadata.get("test_verdicts") or {})
    return tests


def judge_agreement(judged: list[ScoredAnswer], verified: list[ScoredAnswer], threshold: float):
    """How often the judge agrees with the verifier on the same answers (in the same order): the
    judge passes at ``threshold``, the verifier at 1. Answers the judge could not score are
    counted apart, in no cell."""
    from .judge import Agreement

    out = Agreement()
    for j, v in zip(judged, verified):
        if j.verdict.startswith("reward error"):
            out.errors += 1
            continue
        out.add(j.score >= threshold, v.score >= 1.0)
    return out
