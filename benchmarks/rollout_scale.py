"""Thousands of episodes in flight at once against a policy with injected latency: wall time against
the ideal, the framework's CPU per episode, peak memory per worker, episodes lost; and, in the same
run, what Strands itself costs per episode, apart from the rest of the framework.

    .venv/bin/python benchmarks/rollout_scale.py [--episodes 8192] [--workers 4] [--latency 2.0]

Every episode is a real Strands agent with real tools (`agentboost.testing.faults`): a model call
that calls the `add` tool, the tool, a second model call that answers, the reward. The policy is
the scripted sampler (SmolLM2's real tokenizer), which waits ``--latency`` seconds per turn, as a
policy server under load would; with every episode in flight at once, the ideal wall time is two
turns' latency. Targets (issue 46): wall time at most 2x the ideal, at most 1 ms of framework CPU
per episode, at most 1 GiB per worker, no episode lost.

- framework CPU: the workers' CPU time (user + system, from /proc) and the pool manager's, over
  the timed run, per episode. It holds everything but the policy's wait: Strands, agentboost's
  trainable model and record, the tools, the reward, the pool's messages (the scripted policy's own
  encoding of its answers is in it too).
- Strands alone: the same agent (same tools, system prompt and limits) on a canned Strands model
  that hands back the same two turns as stream events with no tokens and no record, the same number
  of episodes in flight as one worker holds, with the same latency, in one process: Strands' own
  cost per episode (its agent, event loop, tool executor, telemetry), which agentboost's cannot
  go below.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from pathlib import Path

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.models.embedded import prepare_embedded
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.spec import SamplerSpec
from agentboost.testing.faults import FAULT_TOOLS, fault_tasks

TICK = os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (its threads included)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def strands_alone(episodes: int, latency: float, system_prompt: str | None) -> float:
    """CPU seconds per episode of Strands itself: the agent with the benchmark's tools on a canned
    model (two turns as stream events, no tokens, no record), ``episodes`` in flight at once."""
    from strands import Agent
    from strands.agent.conversation_manager import NullConversationManager
    from strands.models import Model

    from agentboost.agents.strands_agent import resolve_tools

    class CannedModel(Model):
        def __init__(self):
            self.turn = 0

        def update_config(self, **config):
            pass

        def get_config(self):
            return {}

        async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
            raise NotImplementedError
            yield

        async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
            await asyncio.sleep(latency)
            self.turn += 1
            yield {"messageStart": {"role": "assistant"}}
            if self.turn == 1:
                yield {"contentBlockStart": {"start": {"toolUse": {"name": "add", "toolUseId": "call_0"}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"a": 17, "b": 25}'}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": "The answer is 42."}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
            yield {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                                "metrics": {"latencyMs": 0}}}

    tools = resolve_tools(FAULT_TOOLS)

    async def one(i: int) -> str:
        agent = Agent(model=CannedModel(), tools=tools, system_prompt=system_prompt, callback_handler=None,
                      conversation_manager=NullConversationManager())
        result = await agent.invoke_async(f"What is 17 + 25? (task {i})")
        return str(result)

    async def run(n: int) -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(n)))

    asyncio.run(run(16))  # imports and first calls out of the measurement
    c0 = time.process_time()
    answers = asyncio.run(run(episodes))
    cpu = time.process_time() - c0
    assert all("42" in a for a in answers), answers[:3]
    return cpu / episodes


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
    watcher_cpu = [0.0]
    with StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=slots) as pool:
        pool.run(fault_tasks(args.workers, rate=0.0))  # workers up and warm
        pids = pool.worker_pids()
        idle = {pid: rss_kib(pid) for pid in pids}
        stop = threading.Event()

        def watch() -> None:
            nonlocal max_in_flight
            polls = 0
            while not stop.is_set():
                for pid in pids:
                    peak[pid] = max(peak.get(pid, 0), rss_kib(pid))
                if polls % 3 == 0:
                    max_in_flight = max(max_in_flight, pool.stats()["busy_slots"])
                polls += 1
                time.sleep(0.2)
            watcher_cpu[0] = time.thread_time()  # the benchmark's own cost, not the framework's

        watcher = threading.Thread(target=watch, daemon=True)
        cpu0 = {pid: cpu_s(pid) for pid in pids}
        own0 = time.process_time()
        watcher.start()
        t0 = time.perf_counter()
        eps = pool.run(fault_tasks(args.episodes, rate=0.0))
        wall = time.perf_counter() - t0
        stop.set()
        watcher.join()
        own = time.process_time() - own0 - watcher_cpu[0]
        workers_cpu = sum(cpu_s(pid) - cpu0[pid] for pid in pids)
        stats = pool.stats()
        restarted = stats["worker_starts"] - args.workers
    ok = sum(ep.status == "ok" for ep in eps)
    lost = args.episodes - len(eps)
    ideal = 2 * args.latency  # two policy turns per episode, all in flight at once
    framework_ms = (workers_cpu + own) / len(eps) * 1000
    strands_ms = strands_alone(slots, args.latency, spec.system_prompt) * 1000
    print(f"{len(eps)} episodes ({ok} ok, {lost} lost), max in flight {max_in_flight}, {args.workers} workers x "
          f"{slots} slots, {args.latency:g} s policy latency per turn, {restarted} worker restarts")
    print(f"wall {wall:.1f} s (ideal with infinite concurrency {ideal:.1f} s); "
          f"latency p50 {stats['latency_s']['p50']:.2f} s, p99 {stats['latency_s']['p99']:.2f} s")
    print(f"framework CPU: workers {workers_cpu:.1f} s + pool {own:.1f} s = {framework_ms:.2f} ms per episode; "
          f"Strands alone (canned model, {slots} in flight): {strands_ms:.2f} ms per episode; "
          f"the rest of the framework: {framework_ms - strands_ms:.2f} ms")
    print(f"worker RSS idle: {', '.join(f'{v / 1024:.0f}' for v in idle.values())} MiB; "
          f"peak: {', '.join(f'{v / 1024:.0f}' for v in peak.values())} MiB")
    print(f"ratio_wall_vs_ideal={wall / ideal:.2f} framework_cpu_ms_per_episode={framework_ms:.2f} "
          f"strands_cpu_ms_per_episode={strands_ms:.2f} peak_rss_per_worker_mib={max(peak.values()) / 1024:.0f} "
          f"episodes_lost={lost} episodes_per_minute={len(eps) / wall * 60:.0f}")


if __name__ == "__main__":
    main()
