"""Every template drift is counted: a call extends the previous one only if the template's full
render starts with exactly what the model saw plus what it sampled (plus the end-of-turn text);
otherwise the episode splits and the reason is recorded. Qwen3 fixture and SmolLM2's tokenizer,
scripted samplers."""

import asyncio

import pytest
from helpers import model_call, qwen_call

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.agents.trainable_model import TrainableModel
from agentboost.episodes.record import Episode, SplitReason, build_segments, check_episode
from agentboost.episodes.summary import split_metrics
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add, mul

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)


def episode(tok, script, prompt="What is 17 + 25?", template_kwargs=None):
    renderer = ChatRenderer(tok, template_kwargs=template_kwargs)
    spec = StrandsAgentSpec(tools=[add, mul], system_prompt="You are a calculator agent.")
    ep = asyncio.run(run_episode(spec, {"task_id": "t", "question": prompt}, ScriptedSampler(script, tok), renderer,
                                 PARAMS))
    assert ep.status == "ok", ep.error
    assert check_episode(ep) == []
    return ep


def conversation(tok, script, turns, mutate=None):
    """Several user turns with one agent; ``mutate(agent)`` runs between turns."""
    model = TrainableModel(ScriptedSampler(script, tok), ChatRenderer(tok), PARAMS)
    agent = StrandsAgentSpec(tools=[add, mul], system_prompt="You are a calculator agent.").build(model)

    async def talk():
        for i, t in enumerate(turns):
            if i and mutate:
                mutate(agent)
            await agent.invoke_async(t)

    asyncio.run(talk())
    ep = Episode(episode_id="e", task_id="t", group_id="g", calls=model.calls, segments=build_segments(model.calls))
    assert check_episode(ep) == []
    return model


def reasons(model):
    return [c.rerender_reason for c in model.calls]


def test_empty_reasoning_block_is_dropped_by_qwen3_and_counted(qwen3_tokenizer):
    # what Qwen3 writes in no-think mode: an empty block the template leaves out of later turns
    ep = episode(qwen3_tokenizer, ["<think>\n\n</think>\n\n" + qwen_call("add", {"a": 17, "b": 25}), "It is 42."])
    assert [c.rerender_reason for c in ep.calls] == [None, "dropped_reasoning"]
    assert ep.split_reasons == {"dropped_reasoning": 1} and len(ep.segments) == 2 and ep.num_splits == 1
    # the second prompt is the template's own render: the empty block is gone
    assert "<think>\n\n</think>" not in qwen3_tokenizer.decode(ep.calls[1].prompt_ids)


def test_no_think_generation_prompt_is_dropped_too(qwen3_tokenizer):
    # enable_thinking=false puts the empty block in the generation prompt; later renders drop it
    ep = episode(qwen3_tokenizer, [qwen_call("add", {"a": 17, "b": 25}), "It is 42."],
                 template_kwargs={"enable_thinking": False})
    assert ep.split_reasons == {"dropped_reasoning": 1}


def test_reasoning_that_also_appears_in_the_answer_is_still_a_drop(qwen3_tokenizer):
    # the old check ("is the reasoning text somewhere in the rendered turn?") was fooled by this
    m = conversation(qwen3_tokenizer, ["<think>\nThe answer is 42.\n</think>\n\nThe answer is 42.", "84"],
                     ["What is 17 + 25?", "And twice that?"])
    assert reasons(m) == [None, "dropped_reasoning"]


def test_a_turn_the_template_lays_out_differently_is_reformatted(qwen3_tokenizer):
    # one newline after </think>: Qwen3 renders two, with the same reasoning
    ep = episode(qwen3_tokenizer, ["<think>\nAdd them.\n</think>\n" + qwen_call("add", {"a": 17, "b": 25}), "It is 42."])
    assert ep.split_reasons == {"reformatted_turn": 1}


def test_history_rewritten_between_calls_is_counted(qwen3_tokenizer):
    def trim(agent):
        del agent.messages[:2]  # what a sliding-window conversation manager does

    m = conversation(qwen3_tokenizer, ["42", "84"], ["What is 17 + 25?", "And twice that?"], mutate=trim)
    assert reasons(m) == [None, "rewritten_history"]


def test_non_thinking_tool_conversations_merge_into_one_segment(qwen3_tokenizer, smollm2_path):
    from transformers import AutoTokenizer

    smol = AutoTokenizer.from_pretrained(str(smollm2_path))
    # SmolLM2's template knows no tools: agentboost renders the turns; calls written the model's
    # own way (no newlines, keys reordered, extra spaces) must still extend, exactly as sampled
    odd = '<tool_call>{"arguments": {"b": 25,  "a": 17}, "name": "add"}</tool_call>'
    eps = [episode(smol, [odd, odd.replace("add", "mul"), "It is 42, then 425."]),
           episode(smol, ["Let me add.\n" + odd, "It is 42."]),
           episode(qwen3_tokenizer, [qwen_call("add", {"a": 17, "b": 25}) + "\n" + qwen_call("mul", {"a": 3, "b": 4}),
                                     qwen_call("add", {"a": 42, "b": 12}), "54"])]
    for ep in eps:
        assert len(ep.calls) >= 2 and len(ep.segments) == 1 and ep.split_reasons == {}
        seg = ep.segments[0]
        sampled = [t for t, m in zip(seg.input_ids, seg.loss_mask) if m]
        assert sampled == [t for c in ep.calls for t in c.response_ids]
    assert split_metrics(eps) == {"merge_rate": 1.0, "split_reasons": {**{r.value: 0 for r in SplitReason}, "dropped_reasoning": 0, "reformatted_turn": 0,
                                                                       "rewritten_history": 0}}
    assert eps[0].tool_calls[0].ok and eps[0].tool_calls[1].ok


def test_merge_rate_counts_extended_calls():
    def call(rerendered=False, reason=None):
        return model_call([1], [2], logprob=0.0, rerendered=rerendered, rerender_reason=reason)

    a = Episode("a", "t", "g", calls=[call(), call(), call(True, "dropped_reasoning")],
                split_reasons={"dropped_reasoning": 1})
    b = Episode("b", "t", "g", calls=[call()])
    m = split_metrics([a, b])
    assert m["merge_rate"] == pytest.approx(0.5) and m["split_reasons"]["dropped_reasoning"] == 1
