"""The gateway's HTTP contract: session identity (path, bearer key, header), 401 and 409, refused
requests (400 with a reason), the run's sampling settings over the client's, identical resends,
and 64 interleaved sessions without cross-talk."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import asyncio
import json
import re

import httpx
import openai
import pytest
from gateway_runs import PARAMS, TASK, smollm2_tokenizer  # noqa: F401 (a fixture)
from helpers import qwen_call

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import check_episode
from agentboost.gateway.server import SESSION_HEADER, Gateway
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn

MSGS = [{"role": "user", "content": "What is 2 + 3?"}]


class RecordingSampler(ScriptedSampler):
    """A scripted sampler that keeps the sampling settings of every request."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.params = []

    async def sample(self, prompt_ids, params):
        self.params.append(params)
        return await super().sample(prompt_ids, params)


@pytest.fixture
def gateway(smollm2_tokenizer):
    sampler = RecordingSampler(lambda prompt, i: "5.", smollm2_tokenizer)
    with Gateway(sampler, ChatRenderer(smollm2_tokenizer), PARAMS) as gw:
        yield gw, sampler


def post(url, body, **headers):
    return httpx.post(url + "/chat/completions", json=body, headers=headers, timeout=30)


def test_session_by_path_key_or_header_and_401_409(gateway):
    gw, _ = gateway
    s = gw.open_session(TASK)
    assert post(gw.base_url(s), {"messages": MSGS}).status_code == 200
    assert post(gw.base_url(s, by="key"), {"messages": MSGS}, Authorization=f"Bearer {s.key}").status_code == 200
    assert post(gw.url + "/v1", {"messages": MSGS}, **{SESSION_HEADER: s.id}).status_code == 200
    for r in (post(gw.url + "/s/nope/v1", {"messages": MSGS}),
              post(gw.url + "/v1", {"messages": MSGS}, Authorization="Bearer ab-guess"),
              post(gw.url + "/v1", {"messages": MSGS})):
        assert r.status_code == 401 and "unknown session" in r.json()["error"]["message"]
    assert httpx.get(gw.base_url(s) + "/models").json()["data"][0]["id"] == "agentboost-policy"
    ep = gw.finish(s)
    # the same request three times, whichever way the session was named: one logical turn
    assert len(ep.calls) == 1 and ep.metadata["gateway"]["resends"] == 2 and check_episode(ep) == []
    for r in (post(gw.base_url(s), {"messages": MSGS}),
              post(gw.url + "/v1", {"messages": MSGS}, Authorization=f"Bearer {s.key}")):
        assert r.status_code == 409 and "finished" in r.json()["error"]["message"]


@pytest.mark.parametrize("body,reason", [
    ({"n": 2}, "'n' must be 1"),
    ({"tool_choice": "required"}, "'tool_choice'"),
    ({"tool_choice": {"type": "function", "function": {"name": "add"}}}, "'tool_choice'"),
    ({"response_format": {"type": "json_object"}}, "'response_format'"),
    ({"messages": []}, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "only text content"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}]}, "only at the start"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}, "not valid JSON"),
])
def test_bad_requests_are_400_with_a_reason_and_sample_nothing(gateway, body, reason):
    gw, sampler = gateway
    s = gw.open_session(TASK)
    r = post(gw.base_url(s), {"messages": MSGS, **body})
    assert r.status_code == 400 and reason in r.json()["error"]["message"]
    assert sampler.calls == 0


def test_the_runs_sampling_settings_win(gateway):
    gw, sampler = gateway
    s = gw.open_session(TASK)
    client = openai.OpenAI(base_url=gw.base_url(s), api_key=s.key, max_retries=0)
    client.chat.completions.create(model="x", messages=MSGS, temperature=0.0, top_p=0.1, max_tokens=3,
                                   stop=["5"], seed=99)
    client.chat.completions.create(model="x", messages=MSGS + [{"role": "assistant", "content": "5."},
                                                             {"role": "user", "content": "Sure?"}],
                                   temperature=1.9)
    assert [(p.temperature, p.top_p, p.max_new_tokens) for p in sampler.params] == [(0.7, 0.9, 200)] * 2
    assert all(p.stop_token_ids == PARAMS.stop_token_ids for p in sampler.params)
    ep = gw.finish(s)
    assert ep.metadata["gateway"]["ignored_client_settings"] == {"temperature": 2, "top_p": 1, "max_tokens": 1,
                                                                "stop": 1, "seed": 1}


def test_an_identical_resend_replaces_the_last_call(smollm2_tokenizer):
    sampler = ScriptedSampler(["first answer.", "second answer.", "then more."], smollm2_tokenizer)
    with Gateway(sampler, ChatRenderer(smollm2_tokenizer), PARAMS) as gw:
        s = gw.open_session(TASK)
        assert post(gw.base_url(s), {"messages": MSGS}).status_code == 200
        r = post(gw.base_url(s), {"messages": MSGS})  # the client lost the answer and asks again
        assert r.json()["choices"][0]["message"]["content"] == "second answer."
        follow = MSGS + [{"role": "assistant", "content": "second answer."}, {"role": "user", "content": "More?"}]
        assert post(gw.base_url(s), {"messages": follow}).status_code == 200
        ep = gw.finish(s)
    assert sampler.calls == 3 and len(ep.calls) == 2 and ep.metadata["gateway"]["resends"] == 1
    assert len(ep.segments) == 1 and ep.split_reasons == {} and check_episode(ep) == []


def test_64_interleaved_sessions_do_not_cross_talk(qwen3_tokenizer):
    tok = qwen3_tokenizer

    def script(prompt_ids, index):
        # each session's first call asks for add(n, 1), its second answers n + 1: taken from its own prompt
        text = tok.decode(prompt_ids)
        n = int(re.findall(r"Session (\d+)", text)[-1])
        if "<tool_response>" not in text:
            return ScriptedTurn(qwen_call("add", {"a": n, "b": 1}), delay_s=0.002 * (n % 7))
        result = re.findall(r"<tool_response>[^0-9]*(\d+)", text)[-1]
        return ScriptedTurn(f"It is {result}.", delay_s=0.001 * (n % 5))

    tools = [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
    with Gateway(ScriptedSampler(script, tok), ChatRenderer(tok), PARAMS) as gw:
        sessions = [gw.open_session({"task_id": f"t{n}"}) for n in range(64)]

        async def agent(n, s):
            async with openai.AsyncOpenAI(base_url=gw.base_url(s, by="key"), api_key=s.key, max_retries=0) as c:
                msgs = [{"role": "user", "content": f"Session {n}: what is {n} + 1?"}]
                r = await c.chat.completions.create(model="x", messages=msgs, tools=tools, temperature=2.0,
                                                    stream=n % 2 == 0)
                if n % 2 == 0:
                    calls, call_id = {}, None
                    async for chunk in r:
                        for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                            call_id = d.id or call_id
                            calls[d.index] = calls.get(d.index, "") + (d.function.arguments or "")
                    args, call = calls[0], {"id": call_id, "type": "function",
                                            "function": {"name": "add", "arguments": calls[0]}}
                else:
                    call = r.choices[0].message.tool_calls[0].model_dump()
                    args = call["function"]["arguments"]
                a = json.loads(args)
                msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": call["id"], "content": str(a["a"] + a["b"])}]
                r = await c.chat.completions.create(model="x", messages=msgs, tools=tools)
                return r.choices[0].message.content

        async def all_agents():
            return await asyncio.gather(*(agent(n, s) for n, s in enumerate(sessions)))

        answers = asyncio.run(all_agents())
        episodes = [gw.finish(s) for s in sessions]
    assert answers == [f"It is {n + 1}." for n in range(64)]
    for n, ep in enumerate(episodes):
        assert check_episode(ep) == [] and len(ep.calls) == 2 and len(ep.segments) == 1, n
        assert ep.split_reasons == {} and ep.final_answer == f"It is {n + 1}."
        text = tok.decode(ep.segments[0].input_ids)
        assert set(re.findall(r"Session (\d+)", text)) == {str(n)}
        assert ep.metadata["gateway"]["ignored_client_settings"] == {"temperature": 1}
