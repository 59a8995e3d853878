"""The gateway's overhead per model call against the in-process trainable model, in the same run.

    .venv/bin/python benchmarks/gateway_overhead.py [--episodes 30] [--turns 4]
    .venv/bin/python benchmarks/gateway_overhead.py --sessions 1000 [--rate 200] [--api chat]

With ``--sessions N`` (the scale run, ``scale_main`` below): N sessions live at once, each an
agent that makes ``--turns`` calls with a think time between them (exponential, so that all
sessions together call ``--rate`` times a second: the time an agent spends on its tools and its own
code), against a zero-latency scripted policy with the SmolLM2 tokenizer. Both paths in the same
run, each in a process of its own: in-process, N trainable models on one event loop, each call
``TrainableModel.sample_turn``; through the gateway, the same N conversations as requests of the
chosen protocol from a client process (aiohttp, one connection per session) to a gateway process.
Per call, as the agent sees it: from the moment it is ready to call (its think time over) to the
answer in hand: in-process, ``sample_turn``'s result; through the gateway, the parsed answer at the
client. Every process (in-process agent, client, gateway) freezes what it imported as a server does
(``sampling/completions_server.freeze_startup_objects``; ``AGENTBOOST_GC_FREEZE=0``: none does), so
that the paths differ by the gateway alone. So both paths count the time a call waits
for its process (other sessions' work, a garbage collection): in-process the agent's own event loop,
through the gateway the client's and the gateway's. Each process's garbage collections
are counted, with the longest full one: a full collection over the imported libraries takes about
200 ms, and in a server every request waits behind it. The added time per call (gateway minus in-process) at
the median and the 99th percentile is what the targets are about (< 5 ms, < 20 ms); memory per
session is each process's resident growth from before the sessions to after all their calls,
divided by N. Every session's record is checked (ok, every call recorded, one sequence).

Without ``--sessions`` (one session at a time):

Each episode is `--turns` - 1 model calls that call `add`, then an answer, from a zero-latency
scripted policy with the SmolLM2 tokenizer, so all time measured is framework time. Two pairs,
each against its in-process baseline in the same run, interleaved:

- core: the trainable model's core (`TrainableModel.sample_turn`: render, extend, sample, parse,
  record) called in-process, and the same conversation as chat-completions requests to the gateway
  over one keep-alive connection. Their difference per call is the gateway's own overhead (HTTP,
  JSON, the request's conversion, the session): the figure the goal (< 5 ms) is about.
- agent: a real Strands agent with the calculator tools, its model the trainable model, or the
  stock `OpenAIModel` (the `openai` client) pointed at the gateway, streaming and not. Their
  difference adds the `openai` client's and Strands' own per-call cost of a remote model, which
  any OpenAI-compatible endpoint would cost the agent.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time

from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.agents.trainable_model import TrainableModel
from agentboost.gateway.server import Gateway
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.completions_server import freeze_startup_objects
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add, mul

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)
SPEC = StrandsAgentSpec(tools=[add, mul], system_prompt="You are a calculator agent.", max_model_calls=64)


def script(turns: int):
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>'
    return [call] * (turns - 1) + ["It is 42."]


def in_process(tok, turns: int) -> float:
    async def go():
        t0 = time.perf_counter()
        ep = await run_episode(SPEC, {"task_id": "t", "question": "What is 17 + 25?"},
                               ScriptedSampler(script(turns), tok), ChatRenderer(tok), PARAMS)
        assert ep.status == "ok" and len(ep.calls) == turns, ep.error
        return time.perf_counter() - t0

    return asyncio.run(go())


def core(tok, turns: int) -> float:
    """The trainable model's core alone (``sample_turn``: render, extend, sample, parse, record) on
    the conversation the raw HTTP client sends: what the gateway does for a call, in-process."""
    specs = [t.tool_spec for t in (add, mul)]

    async def go():
        model = TrainableModel(ScriptedSampler(script(turns), tok), ChatRenderer(tok), PARAMS, max_model_calls=64)
        msgs = [{"role": "user", "content": [{"text": "What is 17 + 25?"}]}]
        t0 = time.perf_counter()
        for _ in range(turns):
            turn = await model.sample_turn(msgs, specs, SPEC.system_prompt)
            msgs.append({"role": "assistant", "content": turn.blocks()})
            results = [{"toolResult": {"toolUseId": i, "status": "success", "content": [{"text": "42"}]}}
                       for i, _ in turn.tool_calls]
            if results:
                msgs.append({"role": "user", "content": results})
        assert len(model.calls) == turns
        return time.perf_counter() - t0

    return asyncio.run(go())


def through_gateway(gw: Gateway, tok, turns: int, stream: bool, shared_client: bool = True) -> float:
    """A Strands agent with the stock ``OpenAIModel`` pointed at the gateway. ``shared_client``: one
    ``AsyncOpenAI`` client, made before the clock starts (an agent process makes its client once;
    its TLS context alone costs tens of milliseconds); else Strands' default, a new client per
    request, whose setup is the agent's cost, not the gateway's."""
    import openai
    from strands.models.openai import OpenAIModel

    gw.sampler = ScriptedSampler(script(turns), tok)  # lineages opened from now on sample from it

    async def go():
        s = gw.open_session({"task_id": "t"})
        args = {"base_url": gw.base_url(s), "api_key": s.key, "max_retries": 0}
        if shared_client:
            async with openai.AsyncOpenAI(**args) as client:
                t0 = time.perf_counter()
                await SPEC.build(OpenAIModel(client=client, model_id="agentboost-policy", stream=stream)
                                 ).invoke_async("What is 17 + 25?")
                ep = gw.finish(s)
        else:
            t0 = time.perf_counter()
            await SPEC.build(OpenAIModel(client_args=args, model_id="agentboost-policy", stream=stream)
                             ).invoke_async("What is 17 + 25?")
            ep = gw.finish(s)
        elapsed = time.perf_counter() - t0
        assert ep.status == "ok" and len(ep.calls) == turns and len(ep.segments) == 1, ep.error
        return elapsed

    return asyncio.run(go())


def raw_http(gw: Gateway, tok, turns: int) -> float:
    """The same conversation as plain chat-completions requests over one keep-alive connection
    (httpx, no agent framework): the gateway's own cost plus HTTP and JSON."""
    import httpx

    gw.sampler = ScriptedSampler(script(turns), tok)
    tools = [{"type": "function", "function": {"name": t.tool_spec["name"], "description": t.tool_spec["description"],
                                               "parameters": t.tool_spec["inputSchema"]["json"]}} for t in (add, mul)]
    msgs = [{"role": "system", "content": SPEC.system_prompt}, {"role": "user", "content": "What is 17 + 25?"}]
    with httpx.Client(timeout=30) as http:  # made before the clock starts: its TLS setup is not per call
        s = gw.open_session({"task_id": "t"})
        t0 = time.perf_counter()
        for _ in range(turns):
            m = http.post(gw.base_url(s) + "/chat/completions", json={"model": "m", "messages": msgs, "tools": tools}
                          ).json()["choices"][0]["message"]
            msgs.append(m)
            msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in m.get("tool_calls") or []]
        ep = gw.finish(s)
        elapsed = time.perf_counter() - t0
    assert len(ep.calls) == turns and len(ep.segments) == 1
    return elapsed


def main(a) -> None:
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    gw = Gateway(ScriptedSampler([], tok), ChatRenderer(tok), PARAMS)
    gw.start_in_thread()
    runs = {"core, in-process": lambda: core(tok, a.turns),
            "core, raw HTTP": lambda: raw_http(gw, tok, a.turns),
            "agent, in-process": lambda: in_process(tok, a.turns),
            "agent, gateway": lambda: through_gateway(gw, tok, a.turns, False),
            "agent, gateway stream": lambda: through_gateway(gw, tok, a.turns, True),
            "agent, client/call": lambda: through_gateway(gw, tok, a.turns, True, shared_client=False)}
    baseline = {"core, raw HTTP": "core, in-process", "agent, gateway": "agent, in-process",
                "agent, gateway stream": "agent, in-process", "agent, client/call": "agent, in-process"}
    try:
        for _ in range(3):  # warm-up: imports, tokenizer caches, the first connections
            for run in runs.values():
                run()
        rows: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(a.episodes):  # interleaved, so drift on a shared machine hits all alike
            for name, run in runs.items():
                rows[name].append(run())
    finally:
        gw.stop_thread()
    med = {name: statistics.median(xs) for name, xs in rows.items()}
    print(f"{a.episodes} episodes of {a.turns} model calls each (medians, ms)")
    print("core: the trainable model's sample_turn alone, in-process or behind the gateway (httpx, one keep-alive "
          "connection): the gateway's own overhead.\nagent: a Strands agent with the calculator tools, its model "
          "the trainable model or the stock OpenAIModel (one AsyncOpenAI client; client/call: Strands' default, "
          "a new client per request): the gateway's overhead plus the openai client's own per-call cost.")
    print(f"{'path':<24}{'per episode':>12}{'per call':>10}{'overhead/call':>15}")
    for name in runs:
        over = f"{(med[name] - med[baseline[name]]) / a.turns * 1000:>15.2f}" if name in baseline else ""
        print(f"{name:<24}{med[name] * 1000:>12.1f}{med[name] / a.turns * 1000:>10.2f}{over}")
    gateway_own = (med["core, raw HTTP"] - med["core, in-process"]) / a.turns * 1000
    print(f"gateway overhead per call (core, raw HTTP - core, in-process): {gateway_own:.2f} ms "
          f"(goal < 5 ms: {'met' if gateway_own < 5 else 'NOT met'})")


# -- the scale run -------------------------------------------------------------------------------
CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>'
TOOLS_CHAT = [{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]
TOOL_SPECS = [{"name": "add", "description": "Add two integers.",
               "inputSchema": {"json": TOOLS_CHAT[0]["function"]["parameters"]}}]
SYSTEM = "You are a calculator agent."


class ScaleSampler:
    """Zero latency: a call of ``add`` until the session's conversation holds ``turns - 1`` tool
    rounds, then the answer; the round is read from the prompt's end-of-turn tokens (the system and
    user turns, then two per round), so one sampler serves every session."""

    def __init__(self, tok, turns: int):
        self.end = tok.convert_tokens_to_ids(tok.eos_token)
        self.call = list(tok(CALL_TEXT, add_special_tokens=False)["input_ids"]) + [self.end]
        self.answer = list(tok("It is 42.", add_special_tokens=False)["input_ids"]) + [self.end]
        self.turns = turns

    async def sample(self, prompt_ids, params):
        from agentboost.sampling.protocol import SampleResult

        rounds = (prompt_ids.count(self.end) - 2) // 2
        ids = self.call if rounds < self.turns - 1 else self.answer
        return SampleResult(response_ids=list(ids), logprobs=[-0.5] * len(ids), finish_reason="stop")


class GcPauses:
    """The garbage collector's pauses in this process (``gc.callbacks``): every collection's time,
    by generation, so that a latency percentile can be told apart from the collector's stops."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._t0 = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._t0))

    def summary(self) -> dict:
        full = [d for g, d in self.pauses if g == 2]
        return {"collections": len(self.pauses), "full": len(full), "full_max_ms": max(full, default=0) * 1e3,
                "full_total_ms": sum(full) * 1e3}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def think_times(n: int, turns: int, rate: float, seed: int) -> list[list[float]]:
    """Per session, the wait before each call: exponential with mean n / rate (so that the n
    sessions together call ``rate`` times a second), the first spread over one mean."""
    rng = random.Random(seed)
    mean = n / rate
    return [[rng.uniform(0, mean)] + [rng.expovariate(1 / mean) for _ in range(turns - 1)] for _ in range(n)]


def inproc_role(a) -> dict:
    """N trainable models on one event loop, paced as the agents are."""
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    sampler, renderer = ScaleSampler(tok, a.turns), ChatRenderer(tok)
    freeze_startup_objects()  # tuned as the gateway's process is, so that only the gateway differs
    gc.collect()
    rss0 = rss_bytes()
    pauses = GcPauses()
    waits = think_times(a.sessions, a.turns, a.rate, a.seed)
    latencies: list[float] = []

    async def session(i: int, model: TrainableModel):
        msgs = [{"role": "user", "content": [{"text": "What is 17 + 25?"}]}]
        for t in range(a.turns):
            t0 = time.perf_counter() + waits[i][t]  # when the agent is ready to call (see the docstring)
            await asyncio.sleep(waits[i][t])
            turn = await model.sample_turn(msgs, TOOL_SPECS, SYSTEM)
            latencies.append(time.perf_counter() - t0)
            msgs.append({"role": "assistant", "content": turn.blocks()})
            if turn.tool_calls:
                msgs.append({"role": "user", "content": [{"toolResult": {"toolUseId": tid, "status": "success",
                                                                        "content": [{"text": "42"}]}}
                                                         for tid, _ in turn.tool_calls]})

    models = [TrainableModel(sampler, renderer, PARAMS, max_model_calls=64) for _ in range(a.sessions)]

    async def all_sessions():
        t0 = time.perf_counter()
        await asyncio.gather(*(session(i, m) for i, m in enumerate(models)))
        return time.perf_counter() - t0

    wall = asyncio.run(all_sessions())
    rss1 = rss_bytes()
    assert all(len(m.calls) == a.turns and m.rerenders == 0 for m in models)
    return {"latencies": latencies, "wall_s": wall, "bytes_per_session": (rss1 - rss0) / a.sessions,
            "gc": pauses.summary()}


def server_role(a) -> None:
    """The gateway in a process of its own: opens the sessions, prints their base URLs and keys,
    serves until a line comes on standard input, then checks every record and prints its figures."""
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    gw = Gateway(ScaleSampler(tok, a.turns), ChatRenderer(tok), PARAMS, max_model_calls=64)
    gw.start_in_thread()
    gc.collect()
    rss0 = rss_bytes()
    pauses = GcPauses()
    sessions = [gw.open_session({"task_id": f"t{i}"}) for i in range(a.sessions)]
    # the client appends the protocol's route to /v1 (an Anthropic client would append /v1/messages
    # to the base without it: the same URL)
    print(json.dumps({"sessions": [[gw.base_url(s), s.key] for s in sessions]}), flush=True)
    sys.stdin.readline()
    rss1 = rss_bytes()
    episodes = [gw.finish(s) for s in sessions]
    gw.stop_thread()
    bad = [(ep.status, ep.error, len(ep.calls), len(ep.segments)) for ep in episodes
           if ep.status != "ok" or len(ep.calls) != a.turns or len(ep.segments) != 1]
    print(json.dumps({"bytes_per_session": (rss1 - rss0) / a.sessions, "bad": bad[:3], "n_bad": len(bad),
                      "gc": pauses.summary()}), flush=True)


def request_body(api: str, msgs: list[dict]) -> tuple[str, dict]:
    """The conversation so far (chat-completions messages) as the chosen protocol's request."""
    if api == "chat":
        return "/chat/completions", {"model": "m", "messages": msgs, "tools": TOOLS_CHAT}
    if api == "responses":
        items = []
        for m in msgs[1:]:
            if m["role"] == "user":
                items.append({"role": "user", "content": m["content"]})
            elif m["role"] == "assistant":
                if m.get("content"):
                    items.append({"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": m["content"]}]})
                items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                           "arguments": c["function"]["arguments"]} for c in m.get("tool_calls") or []]
            else:
                items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        return "/responses", {"model": "m", "instructions": SYSTEM, "input": items,
                              "tools": [{"type": "function", **t["function"]} for t in TOOLS_CHAT]}
    out = []
    for m in msgs[1:]:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"])} for c in m.get("tool_calls") or []]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"],
                                                     "content": m["content"]}]})
    return "/messages", {"model": "m", "max_tokens": 256, "system": SYSTEM, "messages": out,
                         "tools": [{"name": t["function"]["name"], "description": t["function"]["description"],
                                    "input_schema": t["function"]["parameters"]} for t in TOOLS_CHAT]}


def answer_message(api: str, r: dict) -> dict:
    if api == "chat":
        return r["choices"][0]["message"]
    calls, text = [], None
    for x in (r["output"] if api == "responses" else r["content"]):
        if x["type"] in ("message", "text"):
            text = x["content"][0]["text"] if api == "responses" else x["text"]
        elif x["type"] == "function_call":
            calls.append({"id": x["call_id"], "type": "function",
                          "function": {"name": x["name"], "arguments": x["arguments"]}})
        elif x["type"] == "tool_use":
            calls.append({"id": x["id"], "type": "function",
                          "function": {"name": x["name"], "arguments": json.dumps(x["input"])}})
    return {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}


def through_gateway_paced(a) -> dict:
    """The client side: the gateway started as a process of its own, then N paced sessions over
    one connection each."""
    import aiohttp

    proc = subprocess.Popen([sys.executable, __file__, "--role", "server", "--sessions", str(a.sessions),
                             "--turns", str(a.turns), "--api", a.api], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        sessions = json.loads(proc.stdout.readline())["sessions"]
        waits = think_times(a.sessions, a.turns, a.rate, a.seed)
        # the client is tuned as the gateway and the in-process agent are (its own full collections
        # over what this process imported would be the client's pauses, not the gateway's)
        freeze_startup_objects()
        pauses = GcPauses()
        latencies: list[float] = []

        async def session(i: int, base: str, key: str):
            msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 17 + 25?"}]
            connector = aiohttp.TCPConnector(limit=1)  # one keep-alive connection per session, as an agent has
            async with aiohttp.ClientSession(connector=connector, headers={"Authorization": f"Bearer {key}"}) as http:
                for t in range(a.turns):
                    t0 = time.perf_counter() + waits[i][t]  # when the agent is ready to call
                    await asyncio.sleep(waits[i][t])
                    route, body = request_body(a.api, msgs)
                    async with http.post(base + route, json=body) as r:
                        reply = await r.json()
                        assert r.status == 200, reply
                    m = answer_message(a.api, reply)
                    latencies.append(time.perf_counter() - t0)
                    msgs.append(m)
                    msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in m.get("tool_calls") or []]

        async def all_sessions():
            t0 = time.perf_counter()
            await asyncio.gather(*(session(i, base, key) for i, (base, key) in enumerate(sessions)))
            return time.perf_counter() - t0

        wall = asyncio.run(all_sessions())
        proc.stdin.write("done\n")
        proc.stdin.flush()
        server = json.loads(proc.stdout.readline())
        assert server["n_bad"] == 0, server["bad"]
        gc.callbacks.remove(pauses._callback)
        return {"latencies": latencies, "wall_s": wall, "bytes_per_session": server["bytes_per_session"],
                "gc": server["gc"], "client_gc": pauses.summary()}
    finally:
        proc.kill()
        proc.wait()


def in_process_paced(a) -> dict:
    out = subprocess.run([sys.executable, __file__, "--role", "inproc", "--sessions", str(a.sessions), "--turns",
                          str(a.turns), "--rate", str(a.rate), "--seed", str(a.seed)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale_main(a) -> None:
    print(f"{a.sessions} sessions at once, {a.turns} calls each, {a.rate:g} calls/s in all (think time between calls "
          f"exponential, mean {a.sessions / a.rate:g} s), protocol {a.api}; zero-latency scripted policy, SmolLM2 "
          f"tokenizer; {os.cpu_count()} CPUs", flush=True)
    runs = {"in-process": [], "gateway": []}
    for _ in range(a.rounds):  # alternated, so drift on a shared machine hits both alike
        runs["in-process"].append(in_process_paced(a))
        runs["gateway"].append(through_gateway_paced(a))
    lat = {k: [x for r in v for x in r["latencies"]] for k, v in runs.items()}
    print(f"{'path':<12}{'calls':>7}{'median ms':>11}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}{'wall s':>9}"
          f"{'KiB/session':>13}")
    for k, v in runs.items():
        xs = lat[k]
        print(f"{k:<12}{len(xs):>7}{pct(xs, .5) * 1e3:>11.2f}{pct(xs, .9) * 1e3:>9.2f}{pct(xs, .99) * 1e3:>9.2f}"
              f"{max(xs) * 1e3:>9.2f}{statistics.mean(r['wall_s'] for r in v):>9.1f}"
              f"{statistics.mean(r['bytes_per_session'] for r in v) / 1024:>13.1f}")
    for k, v in runs.items():
        for r in v:
            for who in ("gc", "client_gc"):
                if who in r:
                    g = r[who]
                    print(f"{k} {'client' if who == 'client_gc' else 'process' if k == 'in-process' else 'server'}: "
                          f"{g['collections']} collections, {g['full']} full (longest {g['full_max_ms']:.0f} ms, "
                          f"{g['full_total_ms']:.0f} ms in all)")
    added_med = (pct(lat["gateway"], .5) - pct(lat["in-process"], .5)) * 1e3
    added_p99 = (pct(lat["gateway"], .99) - pct(lat["in-process"], .99)) * 1e3
    ratio = pct(lat["gateway"], .5) / pct(lat["in-process"], .5)
    print(f"added time per call through the gateway: median {added_med:.2f} ms (target < 5: "
          f"{'met' if added_med < 5 else 'NOT met'}), p99 {added_p99:.2f} ms (target < 20: "
          f"{'met' if added_p99 < 20 else 'NOT met'}); median ratio gateway / in-process {ratio:.2f}x")


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=0, help="the scale run: this many sessions at once")
    ap.add_argument("--rate", type=float, default=200.0, help="scale run: calls per second, all sessions together")
    ap.add_argument("--api", choices=["chat", "responses", "anthropic"], default="chat", help="scale run: protocol")
    ap.add_argument("--rounds", type=int, default=1, help="scale run: alternated rounds of both paths")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--role", choices=["inproc", "server"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "inproc":
        print(json.dumps(inproc_role(a)))
    elif a.role == "server":
        server_role(a)
    elif a.sessions:
        scale_main(a)
    else:
        main(a)


if __name__ == "__main__":
    cli()
