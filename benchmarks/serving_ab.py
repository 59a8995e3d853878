"""Serving throughput and the A/B router's overhead per call against the bare engine, in one run.

    .venv/bin/python benchmarks/serving_ab.py [--calls 30] [--sessions 64] [--max-tokens 8]

The real embedded model (SmolLM2-135M) on the hf engine, greedy, ``--max-tokens`` per answer; one
engine behind both arms of an A/B router (so the two arms cost the same and only routing differs).

1. Overhead per call: one call at a time, interleaved, medians over ``--calls``: the bare engine
   (the chat prompt's token ids, rendered once beforehand, straight to the engine's sampler) against
   a plain HTTP client's ``/v1/chat/completions`` through the router (HTTP, JSON, the session, arm
   assignment, rendering the chat, parsing the answer, the event log, Prometheus). The difference is
   what the router adds to every call.
   The same with a zero-latency scripted policy (``ScriptedSampler``, the SmolLM2 tokenizer) behind a
   router of its own: the router's own cost, without the engine's noise around it.
2. Throughput: ``--sessions`` sessions of a stock Strands agent (``OpenAIModel``, one conversation
   per session, ``--concurrency`` at once) through the router, each ending with a feedback post,
   against the same number of concurrent calls straight to the engine: sessions per minute and the
   ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.request

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.models.embedded import prepare_embedded
from agentboost.models.loading import load_policy
from agentboost.sampling.hf_engine import EngineSampler, HFEngine
from agentboost.sampling.protocol import SamplingParams
from agentboost.serving.policies import ServedPolicy
from agentboost.serving.router import Router

QUESTION = "Ivo has 8 cards and gets 7 more. How many cards does Ivo have now?"
SYSTEM = "You are a helpful assistant. Answer with the final number."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=8)
    args = ap.parse_args()

    path = prepare_embedded("smollm2-135m-instruct")
    model, tok = load_policy(str(path))
    engine = HFEngine(model, tok, max_batch_size=args.concurrency, batch_wait_s=0.01)
    sampler = EngineSampler(engine)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_tokens)
    renderer = ChatRenderer(tok)

    def arm(name: str) -> ServedPolicy:
        return ServedPolicy(name=name, spec="smollm2-135m-instruct", description="SmolLM2-135M (shared engine)",
                            engine="hf", sampler=sampler, renderer=renderer, sampling=params, env=None)

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    prompt_ids = renderer.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(prompt_ids, list):
        prompt_ids = list(prompt_ids["input_ids"])
    out = tempfile.mkdtemp(prefix="serving-ab-")
    router = Router({"baseline": arm("baseline"), "experiment": arm("experiment")}, split=0.5, out_dir=out,
                    salt="bench")
    with router:
        url = router.url + "/v1"

        def bare() -> float:
            t0 = time.perf_counter()
            asyncio.run(sampler.sample(prompt_ids, params))
            return time.perf_counter() - t0

        def routed(i: int, base: str = url) -> float:
            body = json.dumps({"model": "agentboost", "messages": messages}).encode()
            req = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "X-Agentboost-Session": f"overhead-{i}"})
            t0 = time.perf_counter()
            with urllib.request.urlopen(req, timeout=120) as r:
                answer = json.loads(r.read())
            assert answer["usage"]["prompt_tokens"] == len(prompt_ids), answer["usage"]
            return time.perf_counter() - t0

        bare(), routed(-1)  # warm both paths
        b, r = [], []
        for i in range(args.calls):  # interleaved: both paths see the same machine load
            b.append(bare())
            r.append(routed(i))
        mb, mr = statistics.median(b), statistics.median(r)
        print(f"one call at a time, median of {args.calls} ({args.max_tokens} tokens, greedy):")
        print(f"  bare engine       {mb * 1000:8.1f} ms")
        print(f"  through the router{mr * 1000:8.1f} ms   overhead {1000 * (mr - mb):+.1f} ms per call "
              f"({mr / mb:.2f}x)")

        from agentboost.sampling.scripted import ScriptedSampler

        scripted = ScriptedSampler(lambda ids, i: "The answer is 15.", tok)
        fast = {n: ServedPolicy(name=n, spec="scripted", description="scripted", engine="scripted",
                                sampler=scripted, renderer=renderer, sampling=params, env=None)
                for n in ("baseline", "experiment")}
        with Router(fast, split=0.5, out_dir=tempfile.mkdtemp(prefix="serving-ab-"), salt="bench") as zero:
            sb, sr = [], []
            for i in range(10 * args.calls):
                t0 = time.perf_counter()
                asyncio.run(scripted.sample(prompt_ids, params))
                sb.append(time.perf_counter() - t0)
                sr.append(routed(i, zero.url + "/v1"))
        zb, zr = statistics.median(sb), statistics.median(sr)
        print(f"  zero-latency policy: {zb * 1000:.2f} ms bare, {zr * 1000:.2f} ms through the router: "
              f"the router's own cost {1000 * (zr - zb):.2f} ms per call ({10 * args.calls} calls)")

        async def engine_burst() -> float:
            t0 = time.perf_counter()
            gate = asyncio.Semaphore(args.concurrency)

            async def one():
                async with gate:
                    await sampler.sample(prompt_ids, params)

            await asyncio.gather(*(one() for _ in range(args.sessions)))
            return time.perf_counter() - t0

        async def sessions() -> float:
            from strands import Agent
            from strands.models.openai import OpenAIModel

            gate = asyncio.Semaphore(args.concurrency)

            def feedback(sid: str) -> None:
                req = urllib.request.Request(url + "/feedback", method="POST", headers={"Content-Type": "application/json"},
                                             data=json.dumps({"session_id": sid, "success": True}).encode())
                urllib.request.urlopen(req, timeout=60).read()

            async def one(i: int):
                sid = f"bench-{i}"
                m = OpenAIModel(client_args={"base_url": url, "api_key": "none", "max_retries": 0,
                                             "default_headers": {"X-Agentboost-Session": sid}},
                                model_id="agentboost", stream=False)
                async with gate:
                    try:
                        await Agent(model=m, system_prompt=SYSTEM, callback_handler=None).invoke_async(QUESTION)
                    except Exception as e:  # a cut turn ends the session as it would in production
                        if "MaxTokensReached" not in type(e).__name__:
                            raise
                    await asyncio.to_thread(feedback, sid)

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(args.sessions)))
            return time.perf_counter() - t0

        te = asyncio.run(engine_burst())
        ts = asyncio.run(sessions())
        print(f"{args.sessions} sessions, {args.concurrency} at once:")
        print(f"  bare engine calls           {60 * args.sessions / te:8.0f} per minute ({te:.1f} s)")
        print(f"  Strands sessions via router {60 * args.sessions / ts:8.0f} per minute ({ts:.1f} s), "
              f"{te / ts:.2f}x the bare engine's rate")
        from agentboost.serving.report import ab_report

        rep = ab_report(router.events.path)
        print(f"  split observed {rep['split']['observed']:.3f} of {rep['sessions']} sessions "
              f"(setting 0.5); errors {sum(a['errors'] for a in rep['arms'].values())}")
    engine.close()


if __name__ == "__main__":
    main()
