"""What an agent behind the gateway may do to its history, each a counted split with its reason and
never a merge: Strands' sliding-window and summarising conversation managers, an edited assistant
message, dropped reasoning, a changed system prompt or tool list, a foreign assistant message."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import json

import httpx
import pytest
from gateway_runs import (PARAMS, SYSTEM, TASK, calls_text, kimi_k2_tokenizer,  # noqa: F401 (fixtures)
                          rerendered_reasons, smollm2_tokenizer, through_gateway, tok)
from helpers import qwen_call
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager, SummarizingConversationManager

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import check_episode
from agentboost.gateway.server import Gateway
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add, mul

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                            "parameters": {"type": "object", "properties": {
                                                "a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


def assert_counted_split(ep, reason: str, at: int):
    """Call ``at`` was re-rendered for ``reason``, started a segment of its own, and every split
    of the episode is counted by its reason."""
    assert check_episode(ep) == []
    call = ep.calls[at]
    assert call.rerendered and call.rerender_reason == reason, (call.rerendered, call.rerender_reason)
    assert any(seg.call_indices[0] == at for seg in ep.segments), "merged into the previous segment"
    assert ep.split_reasons.get(reason, 0) >= 1
    assert sum(ep.split_reasons.values()) == sum(1 for c in ep.calls if c.rerendered)


def test_sliding_window_trims_history_and_is_counted(tok):
    script = ["42.", "Twice that is 84.", "Twice again is 168."]

    def build(model):
        return Agent(model=model, tools=[add, mul], system_prompt=SYSTEM, callback_handler=None,
                     conversation_manager=SlidingWindowConversationManager(window_size=2))

    # the window keeps the last two messages: the third call's history is trimmed
    ep, _, _ = through_gateway(tok, script, stream=True, build=build,
                               prompts=[TASK["question"], "And twice?", "And again?"])
    assert not ep.calls[1].rerendered
    assert ep.status == "ok", ep.error
    assert_counted_split(ep, "rewritten_history", at=2)
    assert rerendered_reasons(ep) == ["rewritten_history"]


def test_summarising_manager_is_its_own_lineage_then_a_counted_rewrite(tok):
    script = [calls_text(tok, ("add", {"a": 17, "b": 25})), "42.", "Summary: the user asked for 17 + 25, it is 42.",
              "Twice that is 84."]

    def build(model):
        return Agent(model=model, tools=[add, mul], system_prompt=SYSTEM, callback_handler=None,
                     conversation_manager=SummarizingConversationManager(summary_ratio=0.5,
                                                                         preserve_recent_messages=1))

    ep, sampler, _ = through_gateway(tok, script, stream=False, build=build, prompts=[TASK["question"], "And twice?"],
                                     between=lambda agent: agent.conversation_manager.reduce_context(agent))
    assert ep.status == "ok", ep.error
    assert sampler.calls == 4 and len(ep.calls) == 4
    assert check_episode(ep) == []
    # the parent's call after the summary could not extend its history: counted, never merged
    parent_after = next(c for c in ep.calls if c.rerendered)
    assert parent_after.rerender_reason in ("rewritten_history", "changed_system_prompt")
    assert sum(ep.split_reasons.values()) == sum(1 for c in ep.calls if c.rerendered) >= 1
    # the summariser (another system prompt, a conversation of its own) never extends the parent's sequence
    summary_call = ep.calls[[c.prompt_ids for c in ep.calls].index(sampler.prompts[2])]
    seg_of = {i: si for si, s in enumerate(ep.segments) for i in s.call_indices}
    idx = ep.calls.index(summary_call)
    assert all(seg_of[idx] != seg_of[j] for j in range(len(ep.calls)) if j != idx)


# -- a client's own requests: the openai wire format, mutated ---------------------------------
class Client:
    """Raw chat-completions requests to one gateway session (the mutations a framework could make)."""

    def __init__(self, tok, script):
        self.gw = Gateway(ScriptedSampler(script, tok), ChatRenderer(tok), PARAMS)
        self.gw.start_in_thread()
        self.session = self.gw.open_session(TASK)
        self.http = httpx.Client(base_url=self.gw.base_url(self.session), timeout=30)

    def chat(self, messages, tools=TOOLS, **extra):
        r = self.http.post("/chat/completions", json={"model": "m", "messages": messages, "tools": tools, **extra})
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]

    def finish(self):
        ep = self.gw.finish(self.session)
        self.http.close()
        self.gw.stop_thread()
        return ep


def first_turn(client, system=SYSTEM):
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": TASK["question"]}]
    answer = client.chat(msgs)
    echo = {k: answer[k] for k in ("role", "content", "tool_calls", "reasoning_content") if k in answer}
    return msgs, echo


def tool_result(echo, text="42"):
    return {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": text}


def script(tok) -> list[str]:
    return [calls_text(tok, ("add", {"a": 17, "b": 25})), "42."]


def test_an_exact_echo_extends(tok):
    c = Client(tok, script(tok))
    msgs, echo = first_turn(c)
    c.chat(msgs + [echo, tool_result(echo)])
    ep = c.finish()
    assert len(ep.segments) == 1 and ep.split_reasons == {} and check_episode(ep) == []


@pytest.mark.parametrize("edit", ["arguments", "text", "name"])
def test_an_edited_assistant_message_is_rendered_as_sent_and_counted(tok, edit):
    c = Client(tok, script(tok))
    msgs, echo = first_turn(c)
    call = echo["tool_calls"][0]
    if edit == "arguments":
        call["function"]["arguments"] = json.dumps({"a": 17, "b": 26})
    elif edit == "text":
        echo["content"] = "I will add."
    else:
        call["function"]["name"] = "mul"
    c.chat(msgs + [echo, tool_result(echo)])
    assert_counted_split(c.finish(), "edited_turn", at=1)


def test_a_changed_system_prompt_is_counted(tok):
    c = Client(tok, script(tok))
    msgs, echo = first_turn(c)
    c.chat([{"role": "system", "content": "You are terse."}] + msgs[1:] + [echo, tool_result(echo)])
    ep = c.finish()
    assert ep.metadata["gateway"]["lineages"] == 1
    assert_counted_split(ep, "changed_system_prompt", at=1)


def test_a_changed_tool_list_is_counted(tok):
    c = Client(tok, script(tok))
    msgs, echo = first_turn(c)
    more = TOOLS + [{"type": "function", "function": {"name": "neg", "description": "Negate.",
                                                      "parameters": {"type": "object", "properties": {}}}}]
    c.chat(msgs + [echo, tool_result(echo)], tools=more)
    assert_counted_split(c.finish(), "changed_tools", at=1)


def test_a_foreign_assistant_message_is_counted(tok):
    c = Client(tok, script(tok) + ["84."])
    msgs, echo = first_turn(c)
    c.chat(msgs + [echo, tool_result(echo), {"role": "assistant", "content": "It is 42, I am sure."},
                   {"role": "user", "content": "Twice?"}])
    assert_counted_split(c.finish(), "foreign_turn", at=1)


def test_dropped_reasoning_is_counted_and_echoed_reasoning_extends(qwen3_tokenizer):
    thinking = ["<think>\nAdd them.\n</think>\n\n" + qwen_call("add", {"a": 17, "b": 25}), "42."]
    # a client that sends the reasoning back (reasoning_content): the turn is the sampled one
    c = Client(qwen3_tokenizer, thinking)
    msgs, echo = first_turn(c)
    assert echo["reasoning_content"] == "Add them."
    c.chat(msgs + [echo, tool_result(echo)])
    ep = c.finish()
    assert len(ep.segments) == 1 and ep.split_reasons == {}
    # one that drops it (Strands' OpenAIModel, most clients): rendered as sent, counted
    c = Client(qwen3_tokenizer, thinking)
    msgs, echo = first_turn(c)
    echo.pop("reasoning_content")
    c.chat(msgs + [echo, tool_result(echo)])
    assert_counted_split(c.finish(), "dropped_reasoning", at=1)
