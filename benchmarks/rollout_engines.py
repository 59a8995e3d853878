"""The same rollout workload on the hf engine and on the vllm engine, in one run.

The quickstart's tasks and agent (calculator tool, 3 model calls, temperature 0.8, 48 new tokens
per call), 32, 64 and 128 episodes in flight (tasks x 4 samples; 1 worker x 32 slots, 1 x 64,
2 x 64). Per engine and level: sampled tokens/s, episodes/s, p50/p90 episode latency, timeouts;
then the vllm/hf ratios. The hf engine decodes at most --max-batch requests together, the others
queue, the oldest episode's request first (what `agentboost rollout` does); engine `hf-fifo` is the
same with the queue served in arrival order (the engine's schedule before it served the oldest
episode first); engine `hf-uncapped` decodes every request in flight together (what `rollout` did
before it had a cap: workers x slots).

    .venv/bin/python benchmarks/rollout_engines.py [--levels 32,64,128] [--engines hf,vllm] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from statistics import quantiles

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.models.loading import resolve_model_path
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.spec import SamplerSpec
from agentboost.tasks import load_tasks

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
SYSTEM = ("You are a helpful assistant with a calculator tool. Solve the problem and end with the final answer "
          "as a number.")
LAYOUT = {8: (1, 8), 32: (1, 32), 64: (1, 64), 128: (2, 64), 256: (2, 128), 512: (4, 128)}  # in flight -> (workers, slots)


def pct(xs: list[float], q: int) -> float:
    if len(xs) < 2:
        return xs[0] if xs else float("nan")
    return quantiles(xs, n=100, method="inclusive")[q - 1]


def run_level(url: str, policy_file: str | None, model_dir: str, tasks: list[dict], in_flight: int,
              timeout_s: float) -> dict:
    workers, slots = LAYOUT[in_flight]
    spec = StrandsAgentSpec(system_prompt=SYSTEM, max_model_calls=3, max_response_tokens=192, timeout_s=timeout_s)
    sampler = SamplerSpec(tokenizer=model_dir, url=url, policy_file=policy_file,
                          sampling=SamplingParams(temperature=0.8, max_new_tokens=48))
    chosen = tasks[: in_flight // 4]
    with StrandsProcessPool(spec, sampler, StrandsEnv(reward="exact_answer"), workers=workers, slots=slots) as pool:
        pool.run(chosen[:1], samples=1)  # workers up (imports, tokenizer) before the clock starts
        t0 = time.perf_counter()
        eps = pool.run(chosen, samples=4)
        wall = time.perf_counter() - t0
    tokens = sum(ep.num_response_tokens for ep in eps)
    lat = [ep.timings.get("wall_s", float("nan")) for ep in eps]
    return {"in_flight": in_flight, "episodes": len(eps), "wall_s": wall, "tok_s": tokens / wall,
            "episodes_s": len(eps) / wall, "p50_s": pct(lat, 50), "p90_s": pct(lat, 90),
            "timeouts": sum(1 for ep in eps if ep.status == "timeout"),
            "not_ok": sum(1 for ep in eps if ep.status not in ("ok", "truncated")), "tokens": tokens,
            "calls_per_episode": sum(len(ep.calls) for ep in eps) / max(1, len(eps))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="32,64,128")
    ap.add_argument("--engines", default="hf,vllm")
    ap.add_argument("--max-batch", type=int, default=32, help="hf engine batch cap (default: 32, as rollout)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per episode (default: 300)")
    ap.add_argument("--hf-threads", type=int, help="torch threads for the hf engine (default: torch's, one per core)")
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if args.hf_threads:
        import torch

        # only the hf engine runs torch in this process (the agents are worker processes)
        torch.set_num_threads(args.hf_threads)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"hf engine torch threads: {args.hf_threads or 'default'}", flush=True)
    model_dir = str(resolve_model_path("smollm2-135m-instruct"))
    tasks = load_tasks(str(QUICKSTART / "data" / "train.jsonl"))
    results: dict[str, list[dict]] = {}
    for engine in args.engines.split(","):
        t0 = time.perf_counter()
        if engine in ("hf", "hf-fifo", "hf-uncapped"):
            from agentboost.sampling.policy_server import HFPolicyServer

            # hf-uncapped: every request in flight in one batch, as `rollout` did before the cap
            cap = max(levels) if engine == "hf-uncapped" else args.max_batch
            server = HFPolicyServer.from_pretrained(model_dir, max_batch_size=cap, batch_wait_s=0.1,
                                                  schedule="fifo" if engine == "hf-fifo" else "oldest-episode")
            policy_file = None
        else:
            from agentboost.sampling.vllm_server import VLLMPolicyServer

            server = VLLMPolicyServer(model_dir, max_num_seqs=max(levels)).start()
            policy_file = str(server.policy_file)
        start_s = time.perf_counter() - t0
        print(f"{engine}: engine up in {start_s:.0f} s", flush=True)
        try:
            results[engine] = []
            for n in levels:
                if engine == "hf-fifo" and n <= args.max_batch:
                    continue  # nothing queues there: the same schedule as hf
                before = server.engine.stats.continuations if policy_file is None else 0
                r = run_level(server.url, policy_file, model_dir, tasks, n, args.timeout)
                r["engine_start_s"] = start_s
                if policy_file is None:  # requests the hf engine recognised as an episode's later turn
                    r["continuations"] = server.engine.stats.continuations - before
                results[engine].append(r)
                print(f"{engine} {n:4d} in flight: {r['tok_s']:7.1f} tok/s  {r['episodes_s']:5.2f} episodes/s  "
                      f"p50 {r['p50_s']:6.1f} s  p90 {r['p90_s']:6.1f} s  timeouts {r['timeouts']}/{r['episodes']}  "
                      f"wall {r['wall_s']:.0f} s  calls/episode {r['calls_per_episode']:.2f}" + (f"  later turns recognised {r['continuations']}"
                                                     if "continuations" in r else ""), flush=True)
        finally:
            server.close()
    for base in ("hf", "hf-fifo", "hf-uncapped"):
        if base in results and "vllm" in results:
            print(f"\nratio vllm/{base} (same run):")
            vllm = {v["in_flight"]: v for v in results["vllm"]}
            for h in results[base]:
                if h["in_flight"] not in vllm:
                    continue
                v = vllm[h["in_flight"]]
                print(f"  {h['in_flight']:4d} in flight: tok/s x{v['tok_s'] / max(h['tok_s'], 1e-9):.2f}  "
                      f"episodes/s x{v['episodes_s'] / max(h['episodes_s'], 1e-9):.2f}  "
                      f"timeouts {base} {h['timeouts']} vllm {v['timeouts']}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
