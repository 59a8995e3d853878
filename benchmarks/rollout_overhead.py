"""Framework overhead per episode with a zero-latency scripted policy: the persistent worker pool
versus a fresh interpreter per episode (the seed's design, reimplemented minimally here), on the
same machine in the same run.

    .venv/bin/python benchmarks/rollout_overhead.py [--episodes 400] [--fresh 6]

Each episode is a real Strands agent: one model call that calls the `add` tool, the tool runs,
a second model call answers, the reward scores it. The policy answers instantly through the
sampler protocol with the SmolLM2 tokenizer, so all time measured is framework time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.spec import SamplerSpec
from agentboost.testing.faults import FAULT_TOOLS, fault_tasks

REWARD = "agentboost.testing.faults:fault_reward"
SCRIPT = "agentboost.testing.faults:fault_script"

FRESH_EPISODE = r"""
import asyncio, json, time
t0 = time.perf_counter()
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.rollout.episode_runner import run_episode
from agentboost.rollout.sampler_factory import SamplerFactory
from agentboost.sampling.spec import SamplerSpec
spec = StrandsAgentSpec(tools=%(tools)r)
factory = SamplerFactory(SamplerSpec(tokenizer=%(tok)r, kind="scripted", script=%(script)r))
ep = asyncio.run(run_episode(spec, %(task)r, factory.sampler_for_episode(), factory.renderer,
                             factory.spec.sampling, env=StrandsEnv(reward=%(reward)r)))
assert ep.status == "ok", ep.error
print(json.dumps({"episode_s": ep.timings["wall_s"], "total_s": time.perf_counter() - t0}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=400)
    ap.add_argument("--fresh", type=int, default=6, help="episodes for the fresh-interpreter baseline")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slots", type=int, default=8)
    args = ap.parse_args()
    tok = str(prepare_embedded())
    tasks = fault_tasks(args.episodes, rate=0.0)

    spec = StrandsAgentSpec(tools=FAULT_TOOLS)
    sampler = SamplerSpec(tokenizer=tok, kind="scripted", script=SCRIPT)
    with StrandsProcessPool(spec, sampler, StrandsEnv(reward=REWARD), workers=args.workers, slots=args.slots) as pool:
        pool.run(fault_tasks(args.workers * args.slots, rate=0.0))  # start-up is paid once, not per episode
        t0 = time.perf_counter()
        eps = pool.run(tasks)
        pool_wall = time.perf_counter() - t0
    assert all(ep.status == "ok" for ep in eps), {ep.status for ep in eps}
    in_episode = [ep.timings["wall_s"] for ep in eps]
    pool_per_ep = pool_wall / len(eps)
    print(f"pool: {len(eps)} episodes on {args.workers} workers x {args.slots} slots in {pool_wall:.2f} s "
          f"-> {pool_per_ep * 1000:.1f} ms/episode (throughput)")
    print(f"pool: per-episode latency median {statistics.median(in_episode) * 1000:.1f} ms, "
          f"p90 {statistics.quantiles(in_episode, n=10)[-1] * 1000:.1f} ms "
          f"(agent + 2 model calls + tool + reward, {args.slots} episodes sharing each worker)")

    # latency of one episode alone in its worker: what each episode costs the framework
    with StrandsProcessPool(spec, sampler, StrandsEnv(reward=REWARD), workers=1, slots=1) as pool:
        pool.run(fault_tasks(4, rate=0.0))
        alone = [ep.timings["wall_s"] for ep in pool.run(tasks[:100])]
    print(f"pool, one episode at a time: latency median {statistics.median(alone) * 1000:.1f} ms, "
          f"p90 {statistics.quantiles(alone, n=10)[-1] * 1000:.1f} ms")

    def fresh(i: int) -> float:
        code = FRESH_EPISODE % {"tools": FAULT_TOOLS, "tok": tok, "task": tasks[i], "script": SCRIPT, "reward": REWARD}
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as ex:  # as many at once as the pool has workers
        fresh_times = list(ex.map(fresh, range(args.fresh)))
    fresh_wall = time.perf_counter() - t0
    fresh_per_ep = fresh_wall / args.fresh
    print(f"fresh interpreter: {args.fresh} episodes, {args.workers} at a time, in {fresh_wall:.2f} s -> "
          f"{fresh_per_ep * 1000:.0f} ms/episode (throughput); median process {statistics.median(fresh_times):.2f} s")
    print(f"median_overhead_ms={statistics.median(alone) * 1000:.1f} (one episode alone; target <= 50)")
    print(f"ratio_vs_fresh_process={fresh_per_ep / pool_per_ep:.1f}")


if __name__ == "__main__":
    main()
