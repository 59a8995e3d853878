"""Rewards grade the content, never the reasoning: an answer (a number, a ``\\boxed{}``, a code
block) only inside ``<think>...</think>`` scores 0 with the reason named; a final turn whose
reasoning never closed is a format failure; ``agentboost score`` splits plain-text answers the same
way."""

from agentboost.episodes.record import Episode
from agentboost.reasoning import UNTERMINATED_REASONING, reasoning_block
from agentboost.rewards.code import code_reward, submitted_code
from agentboost.rewards.math import extract_answer, math_reward
from agentboost.rewards.registry import (
    ANSWER_ONLY_IN_REASONING,
    NO_ANSWER_UNTERMINATED,
    exact_answer,
    graded_answer,
)
from agentboost.rewards.scoring import answer_episode, score_answers
from agentboost.sandbox.judge import latest_code

CODE_TASK = {"task_id": "sum", "question": "Read two integers and print their sum.",
             "tests": {"public": [], "hidden": [{"kind": "stdio", "input": "5 7\n", "output": "12\n"}]}}
CODE = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def split_episode(reasoning, content, status=None):
    """An episode as the trainable model records one: the reasoning in a reasoningContent block,
    the content as text and as the final answer."""
    blocks = ([reasoning_block(reasoning)] if reasoning else []) + ([{"text": content}] if content else [])
    return Episode(episode_id="e", task_id="t", group_id="g", final_answer=content or None, final_answer_status=status,
                   messages=[{"role": "user", "content": [{"text": "q"}]}, {"role": "assistant", "content": blocks}])


def test_extract_answer_reads_the_content_after_the_reasoning():
    assert extract_answer("<think>I guess \\boxed{7}, but unsure</think>I cannot tell.") == (None, "none")
    assert extract_answer("<think>maybe 3</think>\\boxed{7}") == ("7", "boxed")
    assert extract_answer("<think>\\boxed{7}") == (None, "none")  # never closed: no answer


def test_math_answer_only_in_reasoning_scores_zero_with_the_reason():
    task = {"task_id": "t", "answer": "7"}
    r = math_reward(task, answer_episode("t", "<think>I guess \\boxed{7}, but unsure</think>I cannot tell."))
    assert r.score == 0.0 and r.metadata["reason"] == ANSWER_ONLY_IN_REASONING and r.metadata["extracted"] is None
    r = math_reward(task, split_episode("I guess \\boxed{7}", "I cannot tell."))
    assert r.score == 0.0 and r.metadata["reason"] == ANSWER_ONLY_IN_REASONING
    assert math_reward(task, split_episode("Is it 3? No.", "\\boxed{7}")).score == 1.0
    # the answer in the reasoning never wins over the content's
    r = math_reward(task, split_episode("\\boxed{7}", "\\boxed{8}"))
    assert r.score == 0.0 and r.metadata["extracted"] == "8" and "reason" not in r.metadata


def test_unterminated_reasoning_is_a_format_failure_with_its_reason():
    task = {"task_id": "t", "answer": "7"}
    ep = split_episode("I guess \\boxed{7}", "", status=UNTERMINATED_REASONING)
    assert graded_answer(ep).text is None and graded_answer(ep).missing == NO_ANSWER_UNTERMINATED
    for reward in (math_reward, exact_answer):
        r = reward(task, ep)
        assert r.score == 0.0 and r.metadata["reason"] == "no final answer (reasoning never closed)"
    # the same from plain text
    r = math_reward(task, answer_episode("t", "<think>I guess \\boxed{7}"))
    assert r.score == 0.0 and r.metadata["reason"] == NO_ANSWER_UNTERMINATED


def test_exact_answer_reads_the_content():
    task = {"task_id": "t", "answer": "42"}
    r = exact_answer(task, split_episode("17 + 25 = 42", "I do not know."))
    assert r.score == 0.0 and r.metadata["reason"] == ANSWER_ONLY_IN_REASONING
    assert exact_answer(task, split_episode("17 + 25 = 41? no", "It is 42.")).score == 1.0
    # a final answer that still holds its reasoning (given as text) is split the same way
    hand = Episode(episode_id="e", task_id="t", group_id="g", final_answer="<think>It is 42.</think>No idea.")
    assert exact_answer(task, hand).score == 0.0
    assert exact_answer({"task_id": "t", "answer": "Paris"}, split_episode("Paris", "")).metadata["reason"] == (
        ANSWER_ONLY_IN_REASONING)
    assert exact_answer({"task_id": "t", "answer": "Paris"}, split_episode("Lyon?", "Paris")).score == 1.0


def test_code_block_only_in_reasoning_is_not_submitted():
    ep = split_episode("Draft:\n" + CODE, "I could not solve it.")
    assert submitted_code(ep) is None
    r = code_reward(CODE_TASK, ep)
    assert r.score == 0.0 and r.metadata["verdict"] == "no_code" and r.metadata["reason"] == ANSWER_ONLY_IN_REASONING
    r = code_reward(CODE_TASK, answer_episode("sum", "<think>\n" + CODE + "\n</think>\n\nNo code today."))
    assert r.metadata["verdict"] == "no_code" and r.metadata["reason"] == ANSWER_ONLY_IN_REASONING
    r = code_reward(CODE_TASK, answer_episode("sum", "<think>\n" + CODE))
    assert r.metadata["verdict"] == "no_code" and r.metadata["reason"] == NO_ANSWER_UNTERMINATED
    # the test_code tool reads the latest message's content only, too
    assert latest_code(ep.messages) is None
    assert latest_code([{"role": "assistant", "content": [{"text": "<think>" + CODE + "</think>no code"}]}]) is None
    assert submitted_code(split_episode("First a draft.", CODE)).startswith("a, b = map")


def test_agentboost_score_splits_plain_text_answers():
    ep = answer_episode("t", "<think>\nplan\n</think>\n\nThe answer is 7.")
    assert ep.final_answer == "The answer is 7." and ep.messages[0]["content"][0] == reasoning_block("plan")
    assert answer_episode("t", "<think>plan").final_answer_status == UNTERMINATED_REASONING
    assert answer_episode("t", "just 7").messages[0]["content"] == [{"text": "just 7"}]
    tasks = {"a": {"task_id": "a", "answer": "7"}, "b": {"task_id": "b", "answer": "7"}}
    res = score_answers("math", tasks, [{"task_id": "a", "answer": "<think>\\boxed{7}</think>Not sure."},
                                        {"task_id": "b", "answer": "<think>hmm</think>\\boxed{7}"}], jobs=1)
    assert [(r.score, r.verdict, r.metadata.get("reason")) for r in res] == [
        (0.0, "failed", ANSWER_ONLY_IN_REASONING), (1.0, "passed", None)]
