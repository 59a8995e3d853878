"""The gateway's overhead per model call against the in-process trainable model, in the same run.

    .venv/bin/python benchmarks/gateway_overhead.py [--episodes 30] [--turns 4]

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
import statistics
import time

from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.agents.trainable_model import TrainableModel
from agentboost.gateway.server import Gateway
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.episode_runner import run_episode
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--turns", type=int, default=4)
    a = ap.parse_args()
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


if __name__ == "__main__":
    main()
