"""Reasoning is recorded, never acted on: the one split of a sampled turn into reasoning and content
(per format, edge cases), and Qwen3 episodes through the real trainable model with a scripted
sampler: a call drafted inside ``<think>`` is counted, never run; an unterminated turn has no
content and its status; the tokens and the invariant are unchanged."""

import asyncio
import copy
import types

import pytest
from helpers import qwen_call

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec
from agentboost.agents.trainable_model import TrainableModel
from agentboost.environments.strands_env import StrandsEnv
from agentboost.episodes.record import check_episode, read_episodes, write_episodes
from agentboost.episodes.summary import reasoning_metrics, summarize
from agentboost.reasoning import (
    NONE,
    THINK,
    UNTERMINATED_REASONING,
    ReasoningFormatError,
    answer_content,
    detect_reasoning_format,
    get_reasoning_format,
    opens_reasoning,
    resolve_reasoning_format,
    split_message,
    split_reasoning,
)
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)
DRAFT = qwen_call("add", {"a": 2, "b": 2})


# -- the split --------------------------------------------------------------------------------
def test_split_by_the_think_format():
    s = split_reasoning("<think>\nmaybe " + DRAFT + " no\n</think>\n\nThe answer is 4.", THINK)
    assert s.reasoning == "maybe " + DRAFT + " no" and s.content == "The answer is 4." and s.terminated
    assert s.status is None
    # no markers: all content, as it is (whitespace too)
    assert split_reasoning("  The answer is 4.\n", THINK) == split_reasoning("  The answer is 4.\n", NONE)
    assert split_reasoning("  The answer is 4.\n", THINK).content == "  The answer is 4.\n"
    # an empty block (Qwen3's no-think mode): no reasoning, the content after it
    assert split_reasoning("<think>\n\n</think>\n\n42", THINK) == split_reasoning("42", THINK)
    # the end marker alone (the prompt opened the block): what precedes it is reasoning
    s = split_reasoning("I add.\n</think>\n\n" + DRAFT, THINK)
    assert (s.reasoning, s.content, s.terminated) == ("I add.", DRAFT, True)


def test_unterminated_reasoning_has_no_content():
    s = split_reasoning("<think>\nLet me call " + DRAFT, THINK)
    assert s.content == "" and not s.terminated and s.status == UNTERMINATED_REASONING
    assert s.reasoning == "Let me call " + DRAFT
    # a prompt that opened the block and no end marker: all reasoning
    s = split_reasoning("Hmm, " + DRAFT, THINK, opened=True)
    assert (s.reasoning, s.content, s.terminated) == ("Hmm, " + DRAFT, "", False)
    assert split_reasoning("", THINK, opened=True).status == UNTERMINATED_REASONING
    # a start marker anywhere opens a block: nothing after it is acted on
    assert split_reasoning("Sure. <think> " + DRAFT, THINK).content == ""


def test_later_blocks_are_reasoning_too():
    s = split_reasoning("<think>a</think>First. <think>b " + DRAFT + "</think> Second.", THINK)
    assert s.reasoning == "a\n\nb " + DRAFT and s.content == "First.  Second." and s.terminated
    s = split_reasoning("<think>a</think>First. <think>b", THINK)
    assert (s.content, s.reasoning, s.terminated) == ("First.", "a\n\nb", False)


def test_none_and_other_formats():
    assert split_reasoning("<think>x</think>y", NONE).content == "<think>x</think>y"
    mistral = get_reasoning_format("magistral")
    s = split_reasoning("[THINK]plan[/THINK]Done.", mistral)
    assert (s.reasoning, s.content) == ("plan", "Done.")
    assert get_reasoning_format("qwen3") is THINK and get_reasoning_format("DeepSeek-R1") is THINK
    with pytest.raises(ReasoningFormatError, match="unknown reasoning format 'thinking'"):
        get_reasoning_format("thinking")


def test_answer_content_is_idempotent_and_none_when_unterminated():
    text = "<think>\nI guess \\boxed{7}\n</think>\n\nI cannot tell."
    assert answer_content(text) == "I cannot tell." == answer_content(answer_content(text))
    assert answer_content("<think>\\boxed{7}") is None and answer_content(None) is None
    assert answer_content("no markers") == "no markers"


def test_detection_from_the_chat_template(qwen3_tokenizer):
    assert detect_reasoning_format(qwen3_tokenizer.chat_template) is THINK
    assert resolve_reasoning_format("auto", qwen3_tokenizer) is THINK
    assert resolve_reasoning_format("none", qwen3_tokenizer) is NONE  # the override wins
    plain = types.SimpleNamespace(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
    assert resolve_reasoning_format("auto", plain) is NONE
    # Qwen3's no-think generation prompt closes the block; an R1-style one leaves it open
    closed = qwen3_tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                 add_generation_prompt=True, enable_thinking=False)
    assert not opens_reasoning(closed, THINK) and opens_reasoning("<|im_start|>assistant\n<think>\n", THINK)
    assert not opens_reasoning("<|im_start|>assistant\n<think>\n", NONE)


def test_split_message_for_text_that_still_holds_reasoning():
    raw = {"role": "assistant", "content": [{"text": "<think>plan</think>Answer."}]}
    assert split_message(raw)["content"] == [{"reasoningContent": {"reasoningText": {"text": "plan"}}},
                                              {"text": "Answer."}]
    plain = {"role": "assistant", "content": [{"text": "Answer."}]}
    assert split_message(plain) is plain
    user = {"role": "user", "content": [{"text": "<think>x</think>"}]}
    assert split_message(user) is user


def test_the_agent_spec_validates_the_setting():
    assert StrandsAgentSpec(reasoning="qwen3").validate().reasoning == "qwen3"
    with pytest.raises(AgentSpecError, match="agent: reasoning must be one of auto, .*qwen3.*; got 'thinking'"):
        StrandsAgentSpec(reasoning="thinking").validate()


# -- episodes through the trainable model -----------------------------------------------------
def run(tok, script, task=None, reward=None, renderer=None, **spec_kw):
    spec = StrandsAgentSpec(tools=[add], system_prompt="You are a calculator agent.", **spec_kw)
    sampler = ScriptedSampler(script, tok)
    task = task or {"task_id": "t", "question": "What is 2 + 2?", "answer": "4"}
    env = StrandsEnv(reward=reward) if reward else None
    ep = asyncio.run(run_episode(spec, task, sampler, renderer or ChatRenderer(tok), PARAMS, env=env))
    return ep, sampler


def invariant_holds(ep, tmp_path):
    """What `agentboost check` verifies, on the record as written to and read back from JSONL."""
    assert check_episode(ep) == []
    write_episodes(tmp_path / "e.jsonl", [ep])
    (back,) = read_episodes(tmp_path / "e.jsonl")
    assert check_episode(back.to_dict()) == [] and back.calls_in_reasoning == ep.calls_in_reasoning
    seg = ep.segments[0]
    assert [t for t, m in zip(seg.input_ids, seg.loss_mask) if m] == [t for c in ep.calls for t in c.response_ids]


def test_a_call_drafted_in_reasoning_is_counted_never_run(qwen3_tokenizer, tmp_path):
    tok = qwen3_tokenizer
    turn = "<think>\nmaybe " + DRAFT + " no\n</think>\n\nThe answer is 4."
    ep, sampler = run(tok, [turn], reward="exact_answer")
    assert ep.status == "ok", ep.error
    assert ep.tool_calls == [] and sampler.calls == 1  # nothing ran: the turn was an answer
    assert ep.calls_in_reasoning == 1 and ep.calls[0].calls_in_reasoning == 1
    assert ep.malformed_tool_calls == 0 and ep.unterminated_reasoning == 0
    assert ep.final_answer == "The answer is 4." and ep.reward == 1.0
    # Strands holds the split: a reasoningContent block, then the text
    assert ep.messages[-1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "maybe " + DRAFT + " no"}}}, {"text": "The answer is 4."}]
    # the tokens are exactly what was sampled, reasoning included
    assert tok.decode(ep.calls[0].response_ids) == turn + "<|im_end|>"
    invariant_holds(ep, tmp_path)
    assert reasoning_metrics([ep, ep]) == {"calls_in_reasoning": 2, "unterminated_reasoning": 0,
                                           "unterminated_reasoning_rate": 0.0}
    assert summarize([ep])["calls_in_reasoning"] == 1


def test_a_call_after_the_reasoning_runs_and_the_episode_stays_one_sequence(qwen3_tokenizer, tmp_path):
    tok = qwen3_tokenizer
    script = ["<think>\nI should add, e.g. " + qwen_call("add", {"a": 1, "b": 1}) + "\n</think>\n\n"
              + qwen_call("add", {"a": 2, "b": 2}),
              "<think>\nThe tool said 4.\n</think>\n\nThe answer is 4."]
    ep, _ = run(tok, script, reward="exact_answer")
    assert ep.status == "ok", ep.error
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("add", True)] and ep.calls_in_reasoning == 1
    assert ep.final_answer == "The answer is 4." and ep.reward == 1.0
    # the echoed turns are rendered back exactly as sampled: one sequence, no split
    assert len(ep.segments) == 1 and ep.split_reasons == {}
    assert tok.decode(ep.calls[1].prompt_ids).count("<think>\nI should add, e.g.") == 1
    invariant_holds(ep, tmp_path)


def test_an_unterminated_turn_has_no_content_and_its_status(qwen3_tokenizer, tmp_path):
    ep, sampler = run(qwen3_tokenizer, ["<think>\nLet me call " + DRAFT + " and then say \\boxed{4}"],
                      reward="exact_answer")
    assert ep.status == "ok", ep.error
    assert ep.tool_calls == [] and sampler.calls == 1
    assert ep.calls[0].reasoning_status == UNTERMINATED_REASONING and ep.unterminated_reasoning == 1
    assert ep.final_answer is None and ep.final_answer_status == UNTERMINATED_REASONING
    assert ep.calls_in_reasoning == 1
    assert [list(b) for b in ep.messages[-1]["content"]] == [["reasoningContent"]]
    # never graded from the reasoning: a format failure with the reason named
    assert ep.reward == 0.0 and ep.reward_metadata["reason"] == "no final answer (reasoning never closed)"
    assert reasoning_metrics([ep])["unterminated_reasoning_rate"] == 1.0
    invariant_holds(ep, tmp_path)


def test_a_prompt_that_opens_the_block(qwen3_tokenizer):
    """R1 distills' templates end the generation prompt with ``<think>\\n``: the sampled text has
    only the end marker."""
    tok = copy.deepcopy(qwen3_tokenizer)
    gen = "{{- '<|im_start|>assistant\\n' }}"
    assert gen in tok.chat_template
    tok.chat_template = tok.chat_template.replace(gen, "{{- '<|im_start|>assistant\\n<think>\\n' }}")
    ep, _ = run(tok, ["I add.\n</think>\n\n" + DRAFT, "Hmm, " + DRAFT])
    assert [t.name for t in ep.tool_calls] == ["add"]  # the first turn's call is content: it ran
    assert ep.calls[0].reasoning_status is None and ep.calls[0].calls_in_reasoning == 0
    assert ep.calls[1].reasoning_status == UNTERMINATED_REASONING and ep.calls[1].calls_in_reasoning == 1
    assert ep.final_answer is None and ep.final_answer_status == UNTERMINATED_REASONING
    assert check_episode(ep) == []


def test_reasoning_none_acts_on_the_whole_text(qwen3_tokenizer):
    # the configured format wins over detection: with none, a <think> block is content
    ep, _ = run(qwen3_tokenizer, ["<think>\n" + DRAFT + "\n</think>", "4"], reasoning="none")
    assert [t.name for t in ep.tool_calls] == ["add"] and ep.calls_in_reasoning == 0


def test_the_split_rule_still_counts_dropped_reasoning(qwen3_tokenizer):
    tok = qwen3_tokenizer
    model = TrainableModel(ScriptedSampler(["<think>\nA.\n</think>\n\n42", "<think>\nB.\n</think>\n\n84"], tok),
                           ChatRenderer(tok), PARAMS)
    assert model.reasoning is THINK and model.get_config()["reasoning"] == "think"
    agent = StrandsAgentSpec(tools=[add], system_prompt="s").build(model)

    async def talk():
        await agent.invoke_async("What is 17 + 25?")
        await agent.invoke_async("And twice that?")

    asyncio.run(talk())
    assert [c.rerender_reason for c in model.calls] == [None, "dropped_reasoning"]
    assert [b for m in agent.messages if m["role"] == "assistant" for b in m["content"]] == [
        {"reasoningContent": {"reasoningText": {"text": "A."}}}, {"text": "42"},
        {"reasoningContent": {"reasoningText": {"text": "B."}}}, {"text": "84"}]
