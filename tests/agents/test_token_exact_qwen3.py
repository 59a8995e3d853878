"""Token-exact episodes with the Qwen3 tokenizer and chat template (tools in the template) and a
scripted sampler: specific multi-turn sequences, checked against the template's own full render."""

import asyncio

from helpers import qwen_call, tool_result_texts
from strands import tool

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.episodes.record import Episode, check_episode
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn
from agentboost.testing.faults import add, mul

SYSTEM = "You are a calculator agent."
PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)


@tool
def broken(x: str) -> str:
    """A tool that always fails.

    Args:
        x: anything
    """
    raise ValueError(f"cannot handle {x}")


def spec(**kw):
    kw.setdefault("tools", [add, mul, broken])
    return StrandsAgentSpec(system_prompt=SYSTEM, **kw)


def run(tok, script, prompt="What is 17 + 25, and 3 * 4?", template_kwargs=None, **spec_kw):
    renderer = ChatRenderer(tok, template_kwargs=template_kwargs)
    sampler = ScriptedSampler(script, tok)
    ep = asyncio.run(run_episode(spec(**spec_kw), {"task_id": "t1", "question": prompt}, sampler, renderer, PARAMS))
    return ep, sampler, renderer


def hf_tools(tok):
    r = ChatRenderer(tok)
    return r.to_hf_messages([], None, [t.tool_spec for t in (add, mul, broken)])[1]


def test_qwen3_template_renders_tools(qwen3_tokenizer):
    assert ChatRenderer(qwen3_tokenizer).supports_tools


def test_incremental_prompts_equal_full_template_render(qwen3_tokenizer):
    tok = qwen3_tokenizer
    turn1 = qwen_call("add", {"a": 17, "b": 25}) + "\n" + qwen_call("mul", {"a": 3, "b": 4})
    ep, sampler, _ = run(tok, [turn1, "17 + 25 = 42 and 3 * 4 = 12."])
    assert ep.status == "ok", ep.error
    assert check_episode(ep) == []
    assert len(ep.calls) == 2 and len(ep.segments) == 1 and ep.num_splits == 0
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("add", True), ("mul", True)]
    assert sorted(tool_result_texts(ep)) == ["12", "42"]

    # the template's own full render of the conversation before the second call
    conv = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 17 + 25, and 3 * 4?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "add", "arguments": {"a": 17, "b": 25}}},
            {"type": "function", "function": {"name": "mul", "arguments": {"a": 3, "b": 4}}}]},
    ] + [{"role": "tool", "content": t} for t in tool_result_texts(ep)]
    full = tok.apply_chat_template(conv, tools=hf_tools(tok), tokenize=True, add_generation_prompt=True,
                                   return_dict=True)["input_ids"]
    assert ep.calls[1].prompt_ids == list(full)
    first = tok.apply_chat_template(conv[:2], tools=hf_tools(tok), tokenize=True, add_generation_prompt=True,
                                    return_dict=True)["input_ids"]
    assert ep.calls[0].prompt_ids == list(first)
    # the sampled tokens are in the sequence exactly as sampled, under mask 1
    seg = ep.segments[0]
    assert seg.input_ids[: len(ep.calls[1].prompt_ids)] == ep.calls[1].prompt_ids
    assert sum(seg.loss_mask) == len(ep.calls[0].response_ids) + len(ep.calls[1].response_ids)
    assert ep.final_answer == "17 + 25 = 42 and 3 * 4 = 12."


def test_template_dropping_earlier_thinking_splits_the_episode(qwen3_tokenizer):
    tok = qwen3_tokenizer
    renderer = ChatRenderer(tok)
    script = [
        "<think>\nI should add.\n</think>\n\n" + qwen_call("add", {"a": 17, "b": 25}),
        "<think>\nThe tool said 42.\n</think>\n\nThe answer is 42.",
        "<think>\nDouble it.\n</think>\n\n84",
    ]
    sampler = ScriptedSampler(script, tok)
    from agentboost.agents.trainable_model import TrainableModel

    model = TrainableModel(sampler, renderer, PARAMS)
    agent = spec().build(model)

    async def converse():
        await agent.invoke_async("What is 17 + 25?")
        await agent.invoke_async("And twice that?")

    asyncio.run(converse())
    from agentboost.episodes.record import build_segments

    segs = build_segments(model.calls)
    ep = Episode(episode_id="e", task_id="t", group_id="g", calls=model.calls, segments=segs)
    assert check_episode(ep) == []
    # within the tool loop Qwen3 keeps the reasoning: one sequence; the second user turn makes
    # the template drop earlier thinking: a new sequence, counted
    assert [s.call_indices for s in segs] == [[0, 1], [2]]
    assert model.rerenders == 1 and model.calls[2].rerendered
    assert "<think>\nI should add.\n</think>" in tok.decode(segs[0].input_ids)
    # the re-rendered prompt is what the template shows: earlier thinking gone
    text2 = tok.decode(model.calls[2].prompt_ids)
    assert "I should add." not in text2 and "The answer is 42." in text2


def test_turn_cut_by_max_tokens_is_truncated(qwen3_tokenizer):
    ep, _, _ = run(qwen3_tokenizer, [ScriptedTurn("<tool_call>\n{\"name\": \"add\", \"argu", finish_reason="length")])
    assert ep.status == "truncated"
    assert "max_new_tokens" in ep.error
    assert ep.calls[0].finish_reason == "length"
    assert ep.tool_calls == []
    assert check_episode(ep) == []


def test_malformed_tool_call_is_a_plain_answer(qwen3_tokenizer):
    bad = '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>'
    ep, sampler, _ = run(qwen3_tokenizer, [bad])
    assert ep.status == "ok"
    assert ep.malformed_tool_calls == 1
    assert ep.tool_calls == []
    assert ep.final_answer == bad
    assert sampler.calls == 1  # the agent stopped: it saw an answer, not a call


def test_tool_that_raises_is_recorded_and_episode_goes_on(qwen3_tokenizer):
    ep, _, _ = run(qwen3_tokenizer, [qwen_call("broken", {"x": "zz"}), "The tool failed."])
    assert ep.status == "ok"
    assert len(ep.tool_calls) == 1 and not ep.tool_calls[0].ok
    assert "cannot handle zz" in ep.tool_calls[0].error
    assert len(ep.calls) == 2 and len(ep.segments) == 1
    assert check_episode(ep) == []


def test_model_call_limit_truncates(qwen3_tokenizer):
    loop = [qwen_call("add", {"a": 1, "b": 1})] * 5
    ep, _, _ = run(qwen3_tokenizer, loop, max_model_calls=2)
    assert ep.status == "truncated" and "2 model calls" in ep.error
    assert len(ep.calls) == 2 and check_episode(ep) == []


def test_sampling_parameters_come_from_the_run_not_the_agent(qwen3_tokenizer):
    tok = qwen3_tokenizer
    seen = []

    class Recording(ScriptedSampler):
        async def sample(self, prompt_ids, params):
            seen.append(params)
            return await super().sample(prompt_ids, params)

    from agentboost.agents.trainable_model import TrainableModel

    model = TrainableModel(Recording(["ok"], tok), ChatRenderer(tok), SamplingParams(temperature=0.3, max_new_tokens=77))
    model.update_config(temperature=1.5, max_tokens=5)  # what an agent might try
    agent = spec().build(model)
    asyncio.run(agent.invoke_async("hi"))
    assert seen[0].temperature == 0.3 and seen[0].max_new_tokens == 77
