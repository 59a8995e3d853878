"""Figures for the foundation: embedded-model cache preparation and reload, demo wall time, and
local-sampler throughput at batch 1 versus 8 concurrent episodes (same run, same machine).

    .venv/bin/python benchmarks/foundation_figures.py [--skip-prepare] [--episodes 8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.models.embedded import prepare_embedded
from agentboost.models.loading import load_policy
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.hf_engine import EngineSampler, HFEngine
from agentboost.sampling.protocol import SamplingParams


async def episodes(engine: HFEngine, n: int, concurrency: int, max_new_tokens: int) -> tuple[int, float]:
    renderer = ChatRenderer(engine.tokenizer)
    sampler = EngineSampler(engine)
    sem = asyncio.Semaphore(concurrency)
    spec = StrandsAgentSpec(max_model_calls=2)

    async def one(i: int):
        async with sem:
            return await run_episode(spec, {"task_id": f"t{i}", "question": f"What is {17 + i} + {25 * i}?"},
                                     sampler, renderer,
                                     SamplingParams(temperature=0.7, max_new_tokens=max_new_tokens, seed=i))

    t0 = time.perf_counter()
    eps = await asyncio.gather(*(one(i) for i in range(n)))
    return sum(ep.num_response_tokens for ep in eps), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-prepare", action="store_true", help="do not time a fresh cache preparation")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()

    if not args.skip_prepare:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            prepare_embedded("smollm2-135m-instruct", cache_dir=d, log=lambda m: None)
            print(f"cache_prepare_s={time.perf_counter() - t0:.1f}")
    path = prepare_embedded("smollm2-135m-instruct")
    load_policy(str(path))  # warm the imports; the figure below is the reload alone
    t0 = time.perf_counter()
    load_policy(str(path))
    print(f"cache_reload_s={time.perf_counter() - t0:.2f}")

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "agentboost.cli", "rollout", "--prompt", "What is 17 + 25?",
                        "--samples", "2", "--out", f"{d}/e.jsonl"], check=True, capture_output=True)
    print(f"demo_wall_s={time.perf_counter() - t0:.1f}  (process start, model load, 2 episodes)")

    engine = HFEngine.from_pretrained(str(path), max_batch_size=8)
    try:
        tok1, s1 = asyncio.run(episodes(engine, args.episodes, 1, args.max_new_tokens))
        tok8, s8 = asyncio.run(episodes(engine, args.episodes, 8, args.max_new_tokens))
    finally:
        engine.close()
    r1, r8 = tok1 / s1, tok8 / s8
    print(f"batch1: {args.episodes} episodes, {tok1} sampled tokens in {s1:.1f} s -> {r1:.1f} tok/s")
    print(f"concurrent8: {args.episodes} episodes, {tok8} sampled tokens in {s8:.1f} s -> {r8:.1f} tok/s")
    print(f"ratio_concurrent8_vs_batch1={r8 / r1:.2f}")


if __name__ == "__main__":
    main()
