"""The answers of each protocol, as the gateway sends them, against the installed SDKs' own types
(pydantic validation of every required field and its type: the SDKs themselves build their objects
without validating): chat completions and their chunks, Responses and every stream event, Anthropic
messages and every stream event; a turn with reasoning, text and parallel tool calls, and a turn cut
at the token limit. The event sequences are the ones the references give."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import json

import httpx
import pytest
from gateway_runs import PARAMS, TASK, calls_text  # noqa: F401
from pydantic import TypeAdapter

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.gateway.server import Gateway
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn

TOOL = {"name": "add", "description": "Add.", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}}}}
REQUESTS = {
    "chat": ("/chat/completions", {"messages": [{"role": "user", "content": "Add."}], "logprobs": True,
                                   "tools": [{"type": "function", "function": TOOL}],
                                   "stream_options": {"include_usage": True}}),
    "responses": ("/responses", {"input": "Add.", "tools": [{"type": "function", **TOOL}],
                                 "include": ["message.output_text.logprobs"]}),
    "anthropic": ("/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "Add."}],
                                "tools": [{"name": "add", "description": "Add.", "input_schema": TOOL["parameters"]}]}),
}


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


@pytest.fixture(scope="module", params=["whole", "cut"])
def answers(qwen3_tokenizer, request):
    """Each protocol's answer, plain and streamed, for a turn of reasoning, text and two calls, or a
    turn cut at the token limit (max_tokens / incomplete)."""
    text = ("<think>\nTwo sums.\n</think>\n\nBoth at once.\n" + calls_text(qwen3_tokenizer, ("add", {"a": 1, "b": 2}),
                                                                       ("add", {"a": 3, "b": 4})))
    turn = ScriptedTurn(text) if request.param == "whole" else ScriptedTurn(text, finish_reason="length")
    out = {}
    with Gateway(ScriptedSampler(lambda p, i: turn, qwen3_tokenizer), ChatRenderer(qwen3_tokenizer), PARAMS) as gw:
        for api, (route, body) in REQUESTS.items():
            for stream in (False, True):
                s = gw.open_session(TASK)
                r = httpx.post(gw.base_url(s) + route, json={"model": "m", **body, "stream": stream}, timeout=30)
                assert r.status_code == 200, r.text
                out[api, stream] = sse_events(r.text) if stream else r.json()
    return request.param, out


def test_chat_completions_against_the_openai_sdks_types(answers):
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    kind, out = answers
    c = ChatCompletion.model_validate(out["chat", False])
    if kind == "whole":
        assert c.choices[0].finish_reason == "tool_calls" and len(c.choices[0].message.tool_calls) == 2
    else:
        assert c.choices[0].finish_reason == "length" and not c.choices[0].message.tool_calls
    assert c.choices[0].logprobs.content and c.usage.completion_tokens == len(c.choices[0].logprobs.content)
    chunks = [ChatCompletionChunk.model_validate(e) for e in out["chat", True]]
    assert chunks[-1].usage is not None and chunks[-2].choices[0].finish_reason == c.choices[0].finish_reason


def test_responses_against_the_openai_sdks_types(answers):
    from openai.types.responses import Response, ResponseStreamEvent

    kind, out = answers
    r = Response.model_validate(out["responses", False])
    types = [item.type for item in r.output]
    if kind == "whole":
        assert r.status == "completed" and types == ["reasoning", "message", "function_call", "function_call"]
        assert r.output[0].content[0].text == "Two sums." and r.output_text == "Both at once."
        assert [json.loads(i.arguments) for i in r.output[2:]] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
        assert r.output[1].content[0].logprobs
    else:
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    events = [TypeAdapter(ResponseStreamEvent).validate_python(e) for e in out["responses", True]]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    assert events[-1].type == ("response.completed" if kind == "whole" else "response.incomplete")
    # the last event holds the whole response, as the plain answer (two sessions: ids apart)
    assert [i.model_dump(exclude={"id", "call_id"}) for i in events[-1].response.output] == [
        i.model_dump(exclude={"id", "call_id"}) for i in r.output]
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == types and [e.item.type for e in events if e.type == "response.output_item.done"] == types


def test_anthropic_messages_against_the_anthropic_sdks_types(answers):
    from anthropic.types import Message, RawMessageStreamEvent

    kind, out = answers
    m = Message.model_validate(out["anthropic", False])
    types = [b.type for b in m.content]
    if kind == "whole":
        assert m.stop_reason == "tool_use" and types == ["thinking", "text", "tool_use", "tool_use"]
        assert m.content[0].thinking == "Two sums." and m.content[0].signature
        assert [b.input for b in m.content[2:]] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    else:
        assert m.stop_reason == "max_tokens"
    events = [TypeAdapter(RawMessageStreamEvent).validate_python(e) for e in out["anthropic", True]]
    assert [e.type for e in events][:1] == ["message_start"] and [e.type for e in events][-2:] == ["message_delta",
                                                                                                  "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == types and events[-2].delta.stop_reason == m.stop_reason
