"""500 episodes with about 5% injected faults: tool hangs, tool raises, worker SIGKILL, sampler
errors and timeouts, reward function raises. Every submitted task must come back, with the status
its fault calls for, and no process may be left behind.

    .venv/bin/python benchmarks/rollout_faults.py [--episodes 500] [--rate 0.05]

The last line: submitted=<n> returned=<n> lost=<n> orphans=<n> mismatched=<n>
"""

from __future__ import annotations

import argparse
import collections
import os
import time
import uuid

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.spec import SamplerSpec
from agentboost.testing.faults import EXPECTED_STATUS, FAULT_TOOLS, fault_tasks
from agentboost.testing.processes import wait_no_processes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slots", type=int, default=16)
    args = ap.parse_args()
    marker = f"AGENTBOOST_FAULTS_{uuid.uuid4().hex}"
    os.environ[marker] = "1"
    tok = str(prepare_embedded())
    spec = StrandsAgentSpec(tools=FAULT_TOOLS, timeout_s=3.0)
    sampler = SamplerSpec(tokenizer=tok, kind="scripted", script="agentboost.testing.faults:fault_script",
                          script_kwargs={"latency_s": 0.05})
    env = StrandsEnv(reward="agentboost.testing.faults:fault_reward")
    tasks = fault_tasks(args.episodes, rate=args.rate, seed=1)
    t0 = time.perf_counter()
    with StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=args.slots, hard_timeout_s=10) as pool:
        futures = [pool.submit(t) for t in tasks]
        episodes = [f.result() for f in futures]
        stats = pool.stats()
    wall = time.perf_counter() - t0
    orphans = wait_no_processes(marker, timeout=15)
    table = collections.Counter()
    mismatched = 0
    for task, ep in zip(tasks, episodes):
        want = EXPECTED_STATUS[task["fault"]]
        table[(task["fault"] or "none", ep.status)] += 1
        if ep.status != want:
            mismatched += 1
            print(f"MISMATCH {task['task_id']} fault={task['fault']} status={ep.status} want={want}: {ep.error}")
    for (fault, status), n in sorted(table.items()):
        print(f"fault={fault:16s} status={status:9s} n={n}")
    returned = sum(1 for ep in episodes if ep is not None)
    print(f"wall {wall:.1f} s; worker starts {stats['worker_starts']}, deaths {stats['worker_deaths']}, "
          f"retries {stats['retries']}")
    print(f"submitted={len(tasks)} returned={returned} lost={len(tasks) - returned} orphans={len(orphans)} "
          f"mismatched={mismatched}")


if __name__ == "__main__":
    main()
