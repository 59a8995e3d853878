"""1,000 episodes in flight at once against a policy with injected latency: peak memory per
worker and episodes per minute.

    .venv/bin/python benchmarks/rollout_scale.py [--episodes 1000] [--workers 4] [--latency 2.0]
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.spec import SamplerSpec
from agentboost.testing.faults import FAULT_TOOLS, fault_tasks


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--latency", type=float, default=2.0, help="seconds the policy takes per turn")
    args = ap.parse_args()
    slots = -(-args.episodes // args.workers)  # enough slots for every episode to be in flight
    tok = str(prepare_embedded())
    spec = StrandsAgentSpec(tools=FAULT_TOOLS, timeout_s=600)
    sampler = SamplerSpec(tokenizer=tok, kind="scripted", script="agentboost.testing.faults:fault_script",
                          script_kwargs={"latency_s": args.latency})
    env = StrandsEnv(reward="agentboost.testing.faults:fault_reward")
    peak: dict[int, int] = {}
    max_in_flight = 0
    with StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=slots) as pool:
        pool.run(fault_tasks(args.workers, rate=0.0))  # workers up and warm
        idle = {pid: rss_kib(pid) for pid in pool.worker_pids()}
        stop = threading.Event()

        def watch() -> None:
            nonlocal max_in_flight
            while not stop.is_set():
                for pid in pool.worker_pids():
                    peak[pid] = max(peak.get(pid, 0), rss_kib(pid))
                max_in_flight = max(max_in_flight, pool.stats()["busy_slots"])
                time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()
        t0 = time.perf_counter()
        eps = pool.run(fault_tasks(args.episodes, rate=0.0))
        wall = time.perf_counter() - t0
        stop.set()
        stats = pool.stats()
    ok = sum(ep.status == "ok" for ep in eps)
    ideal = 2 * args.latency  # two policy turns per episode, all in flight at once
    print(f"{len(eps)} episodes ({ok} ok), max in flight {max_in_flight}, {args.workers} workers x {slots} slots, "
          f"{args.latency:g} s policy latency per turn")
    print(f"wall {wall:.1f} s (ideal with infinite concurrency {ideal:.1f} s); "
          f"latency p50 {stats['latency_s']['p50']:.2f} s, p99 {stats['latency_s']['p99']:.2f} s")
    print(f"worker RSS idle: {', '.join(f'{v / 1024:.0f}' for v in idle.values())} MiB; "
          f"peak: {', '.join(f'{v / 1024:.0f}' for v in peak.values())} MiB")
    print(f"peak_rss_per_worker_mib={max(peak.values()) / 1024:.0f} episodes_per_minute={len(eps) / wall * 60:.0f}")


if __name__ == "__main__":
    main()
