"""The gateway's overhead per model call against the in-process trainable model, in the same run.

    .venv/bin/python benchmarks/gateway_overhead.py [--episodes 30] [--turns 4]

Each episode is a real Strands agent with the calculator tools: `--turns` - 1 model calls that call
`add`, then an answer. In-process, the model is the trainable model; through the gateway, it is
Strands' stock `OpenAIModel` (the `openai` client, a real loopback socket) pointed at the gateway,
streaming and not. The policy is a zero-latency scripted sampler with the SmolLM2 tokenizer, so all
time measured is framework time: the figure is (gateway episode - in-process episode) / calls.
Both paths render, extend and record with the same core (`TrainableModel.sample_turn`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.episode_runner import run_episode
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.gateway.server import Gateway
from agentboost.models.embedded import prepare_embedded
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add, mul

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=200)
SPEC = StrandsAgentSpec(tools=[add, mul], system_prompt="You are a calculator agent.", max_model_calls=64)


def script(turns: int):
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>'
    return [call] * (turns - 1) + ["It is 42."]


def in_process(tok, turns: int) -> float:
    t0 = time.perf_counter()
    ep = asyncio.run(run_episode(SPEC, {"task_id": "t", "question": "What is 17 + 25?"},
                                 ScriptedSampler(script(turns), tok), ChatRenderer(tok), PARAMS))
    assert ep.status == "ok" and len(ep.calls) == turns, ep.error
    return time.perf_counter() - t0


def through_gateway(gw: Gateway, tok, turns: int, stream: bool, shared_client: bool = False) -> float:
    """``shared_client``: one ``AsyncOpenAI`` client for the episode (Strands' ``client=``); else
    Strands' default, a new client (and TLS context) per request, which costs the agent, not the
    gateway, tens of milliseconds a call."""
    import openai
    from strands.models.openai import OpenAIModel

    gw.sampler = ScriptedSampler(script(turns), tok)  # lineages opened from now on sample from it
    t0 = time.perf_counter()
    s = gw.open_session({"task_id": "t"})

    async def go():
        args = {"base_url": gw.base_url(s), "api_key": s.key, "max_retries": 0}
        if shared_client:
            async with openai.AsyncOpenAI(**args) as client:
                await SPEC.build(OpenAIModel(client=client, model_id="agentboost-policy", stream=stream)
                                 ).invoke_async("What is 17 + 25?")
        else:
            await SPEC.build(OpenAIModel(client_args=args, model_id="agentboost-policy", stream=stream)
                             ).invoke_async("What is 17 + 25?")

    asyncio.run(go())
    ep = gw.finish(s)
    assert ep.status == "ok" and len(ep.calls) == turns and len(ep.segments) == 1, ep.error
    return time.perf_counter() - t0


def raw_http(gw: Gateway, tok, turns: int) -> float:
    """The same conversation as plain chat-completions requests over one keep-alive connection
    (httpx, no agent framework): the gateway's own cost plus HTTP and JSON."""
    import httpx

    gw.sampler = ScriptedSampler(script(turns), tok)
    tools = [{"type": "function", "function": {"name": t.tool_spec["name"], "description": t.tool_spec["description"],
                                               "parameters": t.tool_spec["inputSchema"]["json"]}} for t in (add, mul)]
    msgs = [{"role": "system", "content": SPEC.system_prompt}, {"role": "user", "content": "What is 17 + 25?"}]
    with httpx.Client(timeout=30) as http:  # made before the clock starts: its TLS setup is not per call
        t0 = time.perf_counter()
        s = gw.open_session({"task_id": "t"})
        for _ in range(turns):
            m = http.post(gw.base_url(s) + "/chat/completions", json={"model": "m", "messages": msgs, "tools": tools}
                          ).json()["choices"][0]["message"]
            msgs.append(m)
            msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in m.get("tool_calls") or []]
    ep = gw.finish(s)
    assert len(ep.calls) == turns and len(ep.segments) == 1
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--turns", type=int, default=4)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    gw = Gateway(ScriptedSampler([], tok), ChatRenderer(tok), PARAMS)
    gw.start_in_thread()
    try:
        for _ in range(3):  # warm-up: imports, tokenizer caches, the first connections
            in_process(tok, a.turns), through_gateway(gw, tok, a.turns, False), through_gateway(gw, tok, a.turns, True)
        runs = {"in-process": lambda: in_process(tok, a.turns),
                "gateway": lambda: through_gateway(gw, tok, a.turns, False, shared_client=True),
                "gateway, stream": lambda: through_gateway(gw, tok, a.turns, True, shared_client=True),
                "stock client/call": lambda: through_gateway(gw, tok, a.turns, True),
                "raw HTTP (no agent)": lambda: raw_http(gw, tok, a.turns)}
        rows: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(a.episodes):  # interleaved, so drift on a shared machine hits all alike
            for name, run in runs.items():
                rows[name].append(run())
    finally:
        gw.stop_thread()
    base = statistics.median(rows["in-process"])
    print(f"{a.episodes} episodes of {a.turns} model calls each (medians, ms)")
    print("gateway: Strands OpenAIModel with one AsyncOpenAI client per episode; stock client/call: "
          "Strands' default, a new client per request (its TLS setup is the agent's cost)")
    print(f"{'path':<22}{'per episode':>12}{'per call':>10}{'overhead/call':>15}")
    for name, xs in rows.items():
        med = statistics.median(xs)
        over = "" if name in ("in-process", "raw HTTP (no agent)") else f"{(med - base) / a.turns * 1000:>15.2f}"
        print(f"{name:<22}{med * 1000:>12.1f}{med / a.turns * 1000:>10.2f}{over}")


if __name__ == "__main__":
    main()
