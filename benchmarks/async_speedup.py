"""Asynchronous training's speed-up (``rollout.max_staleness``): the quickstart agent whose calculator
sleeps on every call (the latency of a sandbox or an API), trained for the same number of steps
synchronously (K = 0), with K = 1 and with K = 2, in one run; then the same with a calculator that
does not sleep (where overlap buys little: sampling and the update share the same CPU cores).

    .venv/bin/python benchmarks/async_speedup.py [--steps 3] [--sleep 1.0] [--no-baseline-tool]

The quickstart's first-run config: a warm start on demonstrations first (SmolLM2-135M calls no
tool before it: the sleep would cost nothing), then GRPO. Prints each run's wall time over its
training steps (from after the warm start to the end), the ratio against K = 0 in the same run, the
tool calls made (the sleep costs only where the agent calls it), the mean staleness and the mean
importance ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from strands import tool

from agentboost.tools.calculator import calculator as _calculator

HERE = Path(__file__).resolve().parent
CONFIG = str(HERE.parent / "examples/quickstart/first_run.yaml")
SLEEP_ENV = "AGENTBOOST_BENCH_TOOL_SLEEP_S"  # read in the workers, which inherit it


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "17 + 25" or "(3 * 4) / 2" and return the result.

    Args:
        expression: the arithmetic expression to evaluate.
    """
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))  # the tool's latency; the agent's loop awaits it
    return _calculator(expression=expression)


def one_run(k: int, sleep_s: float, steps: int, demonstrations: int, run_dir: Path) -> dict:
    from agentboost.run.config import load_config
    from agentboost.trainer.loop import Trainer

    class Timed(Trainer):
        def before_steps(self) -> None:  # the warm start is the same at every K: timed apart
            os.environ[SLEEP_ENV] = "0"
            super().before_steps()
            os.environ[SLEEP_ENV] = str(sleep_s)
            self.steps_from = time.perf_counter()

    os.environ[SLEEP_ENV] = str(sleep_s)  # the workers read it at each call: they inherit it at spawn
    cfg = load_config(CONFIG, [f"run.steps={steps}", "data.val_file=", "run.checkpoint_every=0",
                               f"warm_start.demonstrations={demonstrations}", f"rollout.max_staleness={k}",
                               f"run.code_paths=[{HERE}]", "agent.tools=[async_speedup:calculator]", "run.seed=0"])
    trainer = Timed(cfg, run_dir, log=lambda m: None)
    trainer.run()
    wall = time.perf_counter() - trainer.steps_from
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    eps = [json.loads(line) for p in sorted((run_dir / "episodes").glob("step_*.jsonl"))
           for line in p.read_text().splitlines()]
    return {"wall_s": wall, "steps": len(rows), "episodes": len(eps),
            "tool_calls": sum(len(e.get("tool_calls", [])) for e in eps),
            "staleness": sum(r.get("staleness_mean", 0.0) for r in rows) / len(rows),
            "is_ratio": [r["importance_ratio_mean"] for r in rows if "importance_ratio_mean" in r],
            "reward": sum(r["reward_mean"] or 0.0 for r in rows) / len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--demonstrations", type=int, default=16, help="warm-start demonstrations (0: none)")
    ap.add_argument("--sleep", type=float, default=1.0, help="seconds each calculator call sleeps")
    ap.add_argument("--staleness", default="0,1,2", help="the K values to run; the first is the baseline")
    ap.add_argument("--no-baseline-tool", action="store_true", help="skip the runs whose tool does not sleep")
    args = ap.parse_args()
    ks = [int(k) for k in args.staleness.split(",")]
    sleeps = [args.sleep] + ([] if args.no_baseline_tool else [0.0])
    print(f"quickstart first-run config ({args.demonstrations} warm-start demonstrations), {args.steps} steps of "
          f"2 tasks x 4 episodes, 1 worker x 8 slots, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as d:
        for sleep_s in sleeps:
            results = {}
            for k in ks:
                results[k] = r = one_run(k, sleep_s, args.steps, args.demonstrations, Path(d) / f"s{sleep_s}-k{k}")
                is_text = (f"  importance ratio {sum(r['is_ratio']) / len(r['is_ratio']):.3f}" if r["is_ratio"] else "")
                print(f"tool sleep {sleep_s:g} s  K={k}: {r['wall_s']:.1f} s for {r['steps']} steps "
                      f"({r['episodes']} episodes, {r['tool_calls']} tool calls, reward {r['reward']:.3f}), "
                      f"staleness {r['staleness']:.2f}{is_text}", flush=True)
            base = results[ks[0]]["wall_s"]
            print(f"tool sleep {sleep_s:g} s: " + ", ".join(
                f"K={k} {base / results[k]['wall_s']:.2f}x" for k in ks[1:]) + f" faster than K={ks[0]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
