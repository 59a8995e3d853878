"""What the checks that the policy served is the policy trained add to a step: the README's first run
(examples/quickstart/first_run.yaml: warm start, then GRPO) trained with ``verify.weights`` and
``verify.logprob_parity`` on and off, on the hf and the vllm engine, in one run of this script.

Each (engine, checks) pair trains from the same seed, so both sides sample the same episodes (the
checks draw no random numbers of the run's) and the step times differ by the checks' work and the
machine's noise. Reported per engine: the mean seconds per GRPO step with and without the checks and
the ratio; and, measured inside the runs with the checks, the checks' own seconds per step (the
weights' fingerprints after each publish, the parity recomputation after each step's rollouts) as
a share of the step, which is what they add without the noise of two runs.

    .venv/bin/python benchmarks/verify_overhead.py [--engines hf,vllm] [--steps 4] [--repeats 1]

About 12 minutes on 2 CPU cores with the defaults (the vllm engine needs `bash setup.sh --vllm`).
Run it alone on the machine (``/work/bin/heavy --all``) for figures worth reporting.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

FIRST_RUN = Path(__file__).resolve().parents[1] / "examples" / "quickstart" / "first_run.yaml"


def train(engine: str, checks: bool, steps: int, seed: int, out: Path) -> dict:
    from agentboost.run.config import load_config
    from agentboost.trainer.loop import Trainer

    flag = str(checks).lower()
    run_dir = out / f"{engine}_{'checks' if checks else 'nochecks'}_{seed}"
    cfg = load_config(str(FIRST_RUN), [f"rollout.engine={engine}", f"run.steps={steps}", f"run.seed={seed}",
                                       "validation.at_start=false", "data.val_file=", "run.checkpoint_every=0",
                                       f"verify.weights={flag}", f"verify.logprob_parity={flag}"])
    t0 = time.perf_counter()
    Trainer(cfg, run_dir, log=lambda line: print(f"[{engine}, checks {flag}] {line}", flush=True)).run()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"engine": engine, "checks": checks, "wall_s": time.perf_counter() - t0,
            "step_s": [r["time_step_s"] for r in rows],
            "verify_s": [r.get("time_verify_weights_s", 0.0) + r.get("time_verify_parity_s", 0.0) for r in rows],
            "parity_mean": [r.get("parity_mean_abs_diff") for r in rows],
            "reward_mean": [r["reward_mean"] for r in rows], "sampled_tokens": [r["sampled_tokens"] for r in rows],
            "parity_tokens": [r.get("parity_tokens") for r in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="hf,vllm")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1, help="pairs of runs per engine (seeds 0, 1, ...)")
    ap.add_argument("--out", default="", help="run directories here (default: a temporary directory)")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="verify_overhead_"))
    records = []
    for engine in a.engines.split(","):
        for seed in range(a.repeats):
            for checks in (True, False):  # the pair back to back: the machine's state is shared
                records.append(train(engine, checks, a.steps, seed, out))
    print(f"\n{a.steps} GRPO steps per run, {a.repeats} pair(s) per engine; seconds per step (mean over steps and runs)")
    print(f"{'engine':>6} {'with checks':>12} {'without':>9} {'ratio':>7} {'checks s/step':>14} {'checks share':>13} "
          f"{'parity tokens':>14}")
    for engine in a.engines.split(","):
        on = [r for r in records if r["engine"] == engine and r["checks"]]
        off = [r for r in records if r["engine"] == engine and not r["checks"]]
        s_on = statistics.mean(s for r in on for s in r["step_s"])
        s_off = statistics.mean(s for r in off for s in r["step_s"])
        own = statistics.mean(v for r in on for v in r["verify_s"])
        tokens = statistics.mean(t for r in on for t in r["parity_tokens"] if t is not None)
        # the checks draw none of the run's random numbers: the same seed samples the same episodes
        same = all(a["reward_mean"] == b["reward_mean"] and a["sampled_tokens"] == b["sampled_tokens"]
                   for a, b in zip(on, off))
        print(f"{engine:>6} {s_on:>12.2f} {s_off:>9.2f} {s_on / s_off:>7.3f} {own:>14.3f} {own / s_on:>12.1%} "
              f"{tokens:>14.0f}   same rewards and tokens with and without: {'yes' if same else 'no'}")
    (out / "verify_overhead.json").write_text(json.dumps(records, indent=1))
    print(f"records: {out / 'verify_overhead.json'}")


if __name__ == "__main__":
    main()
