"""Always-extend mode and the sequence budget of the trainable model (what the veRL agent loop
runs): one sequence per episode where the template would re-render, each such place counted; an
episode that would not fit (prompt, response) ends truncated. Qwen3 fixture, scripted samplers."""

import asyncio

import pytest
from helpers import qwen_call

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.agents.trainable_model import HistoryRewritten, TrainableModel
from agentboost.episodes.record import check_episode
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)
EMPTY_THINK = "<think>\n\n</think>\n\n"


def run(tok, script, max_model_calls=4, **model_options):
    spec = StrandsAgentSpec(tools=[add], system_prompt="You are a calculator agent.", max_model_calls=max_model_calls)
    return asyncio.run(run_episode(spec, {"task_id": "t", "question": "What is 17 + 25?"}, ScriptedSampler(script, tok),
                                   ChatRenderer(tok), PARAMS, **model_options))


def test_a_dropped_reasoning_block_stays_as_sampled_and_is_counted(qwen3_tokenizer):
    tok = qwen3_tokenizer
    script = [EMPTY_THINK + qwen_call("add", {"a": 17, "b": 25}), EMPTY_THINK + "It is 42."]
    split = run(tok, script)
    assert split.split_reasons == {"dropped_reasoning": 1} and len(split.segments) == 2  # the default mode
    ep = run(tok, script, always_extend=True)
    assert ep.status == "ok" and check_episode(ep) == []
    assert len(ep.segments) == 1 and ep.split_reasons == {} and ep.metadata["forced_extensions"] == {"dropped_reasoning": 1}
    first, second = ep.calls
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.response_ids)] == first.prompt_ids + first.response_ids
    # what is appended is what the template renders after the turn: the tool result and the
    # generation prompt, exactly as the re-rendered prompt of the default mode has them
    appended = tok.decode(second.prompt_ids[len(first.prompt_ids) + len(first.response_ids):])
    rerendered = tok.decode(split.calls[1].prompt_ids)
    assert "<tool_response>\n42\n</tool_response>" in appended
    assert first.response_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")  # sampled, ends the turn
    assert rerendered.endswith(appended) and appended.startswith("\n<|im_start|>user")
    assert EMPTY_THINK.strip() in tok.decode(second.prompt_ids)  # the sampled block is still there


def test_a_rewritten_history_is_an_error_not_a_silent_split(qwen3_tokenizer):
    tok = qwen3_tokenizer
    model = TrainableModel(ScriptedSampler(["First.", "Second."], tok), ChatRenderer(tok), PARAMS, always_extend=True)
    agent = StrandsAgentSpec(tools=[add], system_prompt="s").build(model)

    async def talk():
        await agent.invoke_async("one")
        agent.messages[0]["content"] = [{"text": "a different first question"}]
        await agent.invoke_async("two")

    with pytest.raises(HistoryRewritten):
        asyncio.run(talk())
    assert len(model.calls) == 1


def test_the_sequence_budget_bounds_the_row_and_ends_the_episode_truncated(qwen3_tokenizer):
    tok = qwen3_tokenizer
    looping = lambda prompt, i: qwen_call("add", {"a": i, "b": 1})
    # calls enough that the sequence budget, not the limit of model calls, ends the episode
    ep = run(tok, looping, max_model_calls=20, always_extend=True, sequence_budget=(2000, 150))
    assert ep.status == "truncated" and len(ep.segments) == 1 and len(ep.calls) > 2
    # either no room was left for another turn, or the last turn got only the room left
    assert "sequence budget" in (ep.error or "") or ep.calls[-1].finish_reason == "length"
    seg, first = ep.segments[0], ep.calls[0].prompt_ids
    assert len(seg.input_ids) - len(first) <= 150
    # a first prompt over the prompt part is an error with the numbers, not a cut prompt
    ep = run(tok, looping, always_extend=True, sequence_budget=(10, 150))
    assert ep.status == "error" and "more than the 10" in ep.error and ep.calls == []


def empty_think_script(tokenizer):
    """A sampler script for pool workers: an empty reasoning block Qwen3's template drops later."""
    return [EMPTY_THINK + qwen_call("add", {"a": 17, "b": 25}), EMPTY_THINK + "It is 42."]


@pytest.mark.slow
def test_the_pool_runs_always_extend_from_the_agent_spec(qwen3_tokenizer):
    # the rLLM engine sets always_extend on the spec; the worker must honour it
    from conftest import QWEN3_DIR

    from agentboost.rollout.pool import StrandsProcessPool
    from agentboost.sampling.spec import SamplerSpec

    sampler = SamplerSpec(tokenizer=str(QWEN3_DIR), kind="scripted", script="test_always_extend:empty_think_script")
    task = {"task_id": "t", "question": "What is 17 + 25?"}
    for always, segments in ((False, 2), (True, 1)):
        spec = StrandsAgentSpec(tools=["agentboost.testing.faults:add"], system_prompt="You are a calculator agent.",
                            always_extend=always)
        with StrandsProcessPool(spec, sampler, workers=1, slots=1) as pool:
            [ep] = pool.run([task])
        assert ep.status == "ok" and check_episode(ep) == [] and len(ep.segments) == segments, (always, ep.error)
    assert ep.metadata["forced_extensions"] == {"dropped_reasoning": 1}
