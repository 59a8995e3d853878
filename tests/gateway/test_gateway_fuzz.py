"""A property-based fuzz (hypothesis) over random history mutations through the gateway, in each protocol it speaks
(chat completions, Responses, Anthropic Messages) and on three chat templates: whatever a client does to its
history (exact echoes, renumbered tool-call ids, identical resends, edits, trims, foreign turns,
dropped reasoning, a changed system prompt or tool list), every training row is exactly the
sampler's inputs and outputs, the loss mask is 1 exactly on sampled tokens, a call that was not an
extension is a counted split that never merges, and a history the client left as it was never
splits. Derandomized: the same examples on every run (CI), shrunk to the smallest failing plan."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import copy
import json
import random

import httpx
import pytest
from gateway_runs import PARAMS, calls_text, kimi_k2_tokenizer, smollm2_tokenizer, tok  # noqa: F401 (fixtures)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import check_episode
from agentboost.gateway.server import Gateway
from agentboost.sampling.scripted import ScriptedSampler

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
# mutations that leave the conversation what the policy saw: the record must stay one sequence
HARMLESS = {"echo", "renumber_ids", "resend"}
MUTATIONS = ["echo", "echo", "renumber_ids", "resend", "edit_text", "edit_args", "trim", "foreign", "system",
             "tools", "drop_reasoning"]


class Recorder(ScriptedSampler):
    """The scripted policy, keeping every (prompt, response) it was asked and gave."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.pairs = []

    async def sample(self, prompt_ids, params):
        result = await super().sample(prompt_ids, params)
        self.pairs.append((list(prompt_ids), list(result.response_ids)))
        return result


def random_turn(rng: random.Random, thinking: bool, tok) -> str:
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    kind = rng.choice(["text", "call", "calls"])
    text = {"text": f"It is {a + b}.", "call": calls_text(tok, ("add", {"a": a, "b": b})),
            "calls": calls_text(tok, ("add", {"a": a, "b": b}), ("add", {"a": b, "b": 1}))}[kind]
    if thinking and rng.random() < 0.5:
        text = f"<think>\nAdd {a} and {b}.\n</think>\n\n" + text
    return text


def mutate(rng: random.Random, kind: str, msgs: list, body: dict) -> None:
    assistants = [m for m in msgs if m["role"] == "assistant"]
    if kind == "renumber_ids":  # a client that renumbers ids, consistently
        for m in msgs:
            for tc in m.get("tool_calls") or []:
                tc["id"] = "r-" + tc["id"]
            if m["role"] == "tool":
                m["tool_call_id"] = "r-" + m["tool_call_id"]
    elif kind == "edit_text" and assistants:
        rng.choice(assistants)["content"] = "I changed my mind."
    elif kind == "edit_args":
        calls = [tc for m in assistants for tc in m.get("tool_calls") or []]
        if calls:
            rng.choice(calls)["function"]["arguments"] = json.dumps({"a": 0, "b": 0})
    elif kind == "trim":  # drop the oldest exchange up to the next user message (a sliding window)
        users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
        if len(users) > 1:
            del msgs[users[0]:users[1]]
    elif kind == "foreign":
        msgs += [{"role": "assistant", "content": "An aside I never sampled."}, {"role": "user", "content": "Go on."}]
    elif kind == "system":
        msgs[0]["content"] = "You are terse."
    elif kind == "tools":
        body["tools"] = TOOLS + [{"type": "function", "function": {"name": "neg", "description": "Negate.",
                                                                  "parameters": {"type": "object", "properties": {}}}}]
    elif kind == "drop_reasoning":
        for m in assistants:
            m.pop("reasoning_content", None)


# -- the conversation (kept as chat messages, which the mutations edit) in each protocol ---------------
def to_responses(body: dict) -> dict:
    """A chat-completions request as the Responses request a client with the same history sends."""
    items, instructions = [], None
    for m in body["messages"]:
        if m["role"] == "system":
            instructions = m["content"]
        elif m["role"] == "user":
            items.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            if m.get("reasoning_content"):
                items.append({"type": "reasoning", "id": "rs_x", "summary": [],
                              "content": [{"type": "reasoning_text", "text": m["reasoning_content"]}]})
            if m.get("content"):
                items.append({"type": "message", "role": "assistant", "status": "completed", "id": "msg_x",
                              "content": [{"type": "output_text", "text": m["content"], "annotations": []}]})
            items += [{"type": "function_call", "call_id": tc["id"], "name": tc["function"]["name"],
                       "arguments": tc["function"]["arguments"]} for tc in m.get("tool_calls") or []]
        else:
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
    tools = [{"type": "function", **t["function"]} for t in body["tools"]]
    return {"model": "m", "input": items, "tools": tools, **({"instructions": instructions} if instructions else {})}


def to_anthropic(body: dict) -> dict:
    """The same as an Anthropic Messages request (tool results of one turn in one user message)."""
    messages, system = [], None
    for m in body["messages"]:
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "user":
            messages.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            blocks = []
            if m.get("reasoning_content"):
                blocks.append({"type": "thinking", "thinking": m["reasoning_content"], "signature": "s"})
            if m.get("content") or not m.get("tool_calls"):
                blocks.append({"type": "text", "text": m.get("content") or ""})
            blocks += [{"type": "tool_use", "id": tc["id"], "name": tc["function"]["name"],
                        "input": json.loads(tc["function"]["arguments"])} for tc in m.get("tool_calls") or []]
            messages.append({"role": "assistant", "content": blocks})
        else:
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if messages and messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
                messages[-1]["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in body["tools"]]
    return {"model": "m", "max_tokens": 256, "messages": messages, "tools": tools,
            **({"system": system} if system else {})}


def answer_as_chat(api: str, r: dict) -> dict:
    """The answer in any protocol, as the chat message a client echoes back."""
    if api == "chat":
        a = r["choices"][0]["message"]
        return {k: a[k] for k in ("role", "content", "tool_calls", "reasoning_content") if k in a}
    out: dict = {"role": "assistant", "content": None}
    calls = []
    if api == "responses":
        for item in r["output"]:
            if item["type"] == "reasoning":
                out["reasoning_content"] = item["content"][0]["text"]
            elif item["type"] == "message":
                out["content"] = item["content"][0]["text"]
            else:
                calls.append({"id": item["call_id"], "type": "function",
                              "function": {"name": item["name"], "arguments": item["arguments"]}})
    else:
        for b in r["content"]:
            if b["type"] == "thinking":
                out["reasoning_content"] = b["thinking"]
            elif b["type"] == "text":
                out["content"] = b["text"]
            else:
                calls.append({"id": b["id"], "type": "function",
                              "function": {"name": b["name"], "arguments": json.dumps(b["input"])}})
    if calls:
        out["tool_calls"] = calls
    return out


ROUTES = {"chat": ("/chat/completions", lambda b: b), "responses": ("/responses", to_responses),
          "anthropic": ("/messages", to_anthropic)}


def run_episode(gw, plan, api="chat"):
    s = gw.open_session({"task_id": "fuzz"})
    msgs = [{"role": "system", "content": "You are a calculator agent."}, {"role": "user", "content": "Add things."}]
    body = {"model": "m", "tools": TOOLS}
    last = None
    rng = random.Random(len(plan))  # which message an edit takes: part of the plan, reproducible

    after_user = []  # per recorded call: its request ends with a user's own message (not a tool result)

    def exchange(http, request, resend=False):
        if resend:
            after_user.pop()
        after_user.append(request["messages"][-1]["role"] == "user")
        route, convert = ROUTES[api]
        r = http.post(route, json=convert(request))
        assert r.status_code == 200, r.text
        del msgs[len(request["messages"]):]  # a resend's answer replaces the one it lost
        echo = answer_as_chat(api, r.json())
        msgs.append(echo)
        for tc in echo.get("tool_calls") or []:
            args = json.loads(tc["function"]["arguments"])
            msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": str(sum(args.values()))})
        if not echo.get("tool_calls"):
            msgs.append({"role": "user", "content": "And then?"})

    with httpx.Client(base_url=gw.base_url(s), timeout=30) as http:
        for kind in ["echo", *plan]:
            if kind == "resend":  # the previous request again, as a client that lost the answer
                exchange(http, last, resend=True)
                continue
            mutate(rng, kind, msgs, body)
            last = {**body, "messages": copy.deepcopy(msgs)}
            exchange(http, last)
    return gw.finish(s), after_user


def assert_rows_are_the_samplers(ep, pairs, applied, thinking, after_user):
    assert check_episode(ep) == []
    recorded = [(c.prompt_ids, c.response_ids) for c in ep.calls]
    # every recorded call is one the sampler made, in order; the ones left out were replaced by a resend
    it = iter(pairs)
    assert all(any(rec == p for p in it) for rec in recorded), "a recorded call the sampler never made"
    assert len(pairs) - len(recorded) == ep.metadata["gateway"]["resends"]
    for seg in ep.segments:
        # the row, rebuilt from its calls: each call's prompt is the row so far (mask 0 on what is new),
        # its response follows with mask 1, and nothing else is in the row
        ids, mask = [], []
        for i in seg.call_indices:
            prompt, response = ep.calls[i].prompt_ids, ep.calls[i].response_ids
            assert prompt[: len(ids)] == ids, "a call in the row does not extend what came before it"
            mask += [0] * (len(prompt) - len(ids)) + [1] * len(response)
            ids = list(prompt) + list(response)
        assert seg.input_ids == ids and seg.loss_mask == mask
    # a call that was not an extension opens a row of its own and is counted by its reason
    starts = {seg.call_indices[0] for seg in ep.segments}
    assert all(i in starts for i, c in enumerate(ep.calls) if c.rerendered)
    assert sum(ep.split_reasons.values()) == sum(c.rerendered for c in ep.calls)
    if set(applied) <= HARMLESS:
        # a history left as it was never splits, but where the template itself renders earlier
        # turns anew: Qwen3's drops the reasoning of every turn before the latest user message, so
        # the call after a user's message (never one after a tool result) may split there
        for i, c in enumerate(ep.calls):
            if c.rerendered:
                assert thinking and after_user[i] and c.rerender_reason in ("dropped_reasoning", "rewritten_history"), \
                    (applied, i, c.rerender_reason)
        if not thinking:
            assert len(ep.segments) == 1, applied


@pytest.fixture(scope="module")
def gateways():
    """One gateway per template for all examples (each example is a session of its own)."""
    held = {}
    yield held
    for gw in held.values():
        gw.stop_thread()


# plans that leave the history as it was (they must never split) have a share of their own
PLANS = st.one_of(st.lists(st.sampled_from(sorted(HARMLESS)), min_size=2, max_size=5),
                  st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=5))


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=PLANS, policy_seed=st.integers(0, 2**16))
def test_random_history_mutations_keep_rows_exact(tok, gateways, api, plan, policy_seed):
    thinking = "<think>" in (tok.chat_template or "")  # Qwen3's: reasoning to keep or drop
    if id(tok) not in gateways:
        gateways[id(tok)] = Gateway(ScriptedSampler([], tok), ChatRenderer(tok), PARAMS)
        gateways[id(tok)].start_in_thread()
    gw = gateways[id(tok)]
    rng = random.Random(policy_seed)
    gw.sampler = sampler = Recorder(lambda prompt, i: random_turn(rng, thinking, tok), tok)  # for this session
    ep, after_user = run_episode(gw, plan, api)
    assert_rows_are_the_samplers(ep, sampler.pairs, ["echo", *plan], thinking, after_user)
