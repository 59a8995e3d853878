"""Any client, any protocol: one scripted policy run in-process through the trainable model and
through the gateway by stock Strands providers speaking OpenAI Responses (``OpenAIResponsesModel``)
and Anthropic Messages (``AnthropicModel``) gives byte-identical records, on three chat templates (SmolLM2, Qwen3, Kimi K2);
thinking goes out as the protocol's reasoning and comes back as the tokens it was."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import pytest
from gateway_runs import (  # noqa: F401 (fixtures)
    in_process,
    kimi_k2_tokenizer,
    record_bytes,
    rerendered_reasons,
    script,
    smollm2_tokenizer,
    through_gateway,
    tok,
)

from agentboost.episodes.record import check_episode


@pytest.mark.parametrize("api", ["responses", "anthropic"])
def test_records_are_byte_identical_to_in_process_whatever_the_protocol(tok, api):
    turns = script(tok)
    local = in_process(tok, turns)
    remote, sampler, _ = through_gateway(tok, turns, stream=True, api=api)
    assert local.status == remote.status == "ok", (local.error, remote.error)
    assert check_episode(remote) == []
    assert len(remote.calls) == 3 and len(remote.segments) == 1 and remote.split_reasons == {}
    assert [(t.name, t.ok) for t in remote.tool_calls] == [("add", True), ("mul", True), ("add", True)]
    assert record_bytes(remote) == record_bytes(local)
    assert sampler.prompts == [c.prompt_ids for c in remote.calls]
    assert remote.metadata["gateway"]["lineages"] == 1 and not remote.metadata["gateway"]["incomplete"]


def stateful_agent(model):
    """Strands refuses a conversation manager beside a model that keeps the conversation on the
    server (``OpenAIResponsesModel(stateful=True)``): the agent is built without one."""
    from gateway_runs import SYSTEM
    from strands import Agent

    from agentboost.testing.faults import add, mul

    return Agent(model=model, tools=[add, mul], system_prompt=SYSTEM, callback_handler=None, conversation_manager=None)


def test_a_stateful_strands_client_is_recorded_as_the_responses_api_would_render_it(tok):
    """Strands' OpenAIResponsesModel(stateful=True) sends previous_response_id and, within one
    invocation's tool loop, the invocation's earlier items again (it clears its messages only after
    an invocation). The Responses API puts the input after the conversation the response ended, so
    the model sees those items twice: the gateway renders them so, and the record is what the model
    saw, one token-exact sequence (a client's quirk, recorded, not repaired)."""
    turns = script(tok)
    remote, sampler, _ = through_gateway(tok, turns, stream=True, api="responses", build=stateful_agent,
                                         stateful=True)
    assert remote.status == "ok" and check_episode(remote) == [], remote.error
    assert len(remote.calls) == 3 and len(remote.segments) == 1 and remote.split_reasons == {}
    assert sampler.prompts == [c.prompt_ids for c in remote.calls]
    second = tok.decode(remote.calls[1].prompt_ids)
    assert second.count("What is 17 + 25, and 3 * 4?") == 2  # the question, kept and sent again


THINKING = ["<think>\nAdd them first.\n</think>\n\n" + '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n'
            "</tool_call>",
            "<think>\nNow the answer.\n</think>\n\n17 + 25 = 42."]


@pytest.mark.parametrize("api,reasons", [
    ("anthropic", []),  # signed thinking blocks come back: the turn is the tokens it was
    # Strands' OpenAIResponsesModel leaves reasoning out of the history it sends: a counted split
    ("responses", ["dropped_reasoning"]),
])
def test_thinking_maps_to_the_protocols_reasoning(qwen3_tokenizer, api, reasons):
    local = in_process(qwen3_tokenizer, THINKING)
    remote, _, _ = through_gateway(qwen3_tokenizer, THINKING, stream=True, api=api)
    assert remote.status == "ok" and check_episode(remote) == [], remote.error
    assert rerendered_reasons(remote) == reasons
    if not reasons:
        assert record_bytes(remote) == record_bytes(local)
    assert remote.final_answer == "17 + 25 = 42."
