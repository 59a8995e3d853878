"""The headline: one scripted policy run in-process through the trainable model and through a
stock Strands OpenAIModel pointed at the gateway gives byte-identical episode records, for the
SmolLM2, Qwen3 and Kimi K2 templates, streaming and not (the other protocols: test_protocols.py)."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import pytest
from gateway_runs import (  # noqa: F401 (fixtures)
    calls_text,
    in_process,
    kimi_k2_tokenizer,
    record_bytes,
    script,
    smollm2_tokenizer,
    through_gateway,
    tok,
)

from agentboost.episodes.record import check_episode



@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_gateway_records_are_byte_identical_to_in_process(tok, stream):
    turns = script(tok)
    local = in_process(tok, turns)
    remote, sampler, session = through_gateway(tok, turns, stream=stream)
    assert local.status == remote.status == "ok", (local.error, remote.error)
    assert check_episode(remote) == []
    assert len(remote.calls) == 3 and len(remote.segments) == 1 and remote.split_reasons == {}
    assert [(t.name, t.ok) for t in remote.tool_calls] == [("add", True), ("mul", True), ("add", True)]
    assert record_bytes(remote) == record_bytes(local)
    # the policy was asked for exactly the recorded prompts
    assert sampler.prompts == [c.prompt_ids for c in remote.calls]
    assert remote.metadata["gateway"]["lineages"] == 1 and not remote.metadata["gateway"]["incomplete"]


def test_a_multi_turn_conversation_stays_one_sequence(tok):
    """A second user message (the agent invoked again) extends the same token sequence."""
    from gateway_runs import TASK

    script = [calls_text(tok, ("add", {"a": 17, "b": 25})), "42.", "Twice that is 84."]
    remote, _, _ = through_gateway(tok, script, stream=True, prompts=[TASK["question"], "And twice that?"])
    assert remote.status == "ok", remote.error
    assert len(remote.calls) == 3 and len(remote.segments) == 1 and remote.split_reasons == {}
    assert check_episode(remote) == []
