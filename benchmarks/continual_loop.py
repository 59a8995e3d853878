"""The continual loop learning from served traffic alone, at sizes a CI test cannot afford.

    .venv/bin/python benchmarks/continual_loop.py --out /tmp/loop [--production smollm2-135m-instruct]
        [--sessions-per-round 96] [--rounds 3] [--window 600] [--minutes 60] [--max-tasks 24] [--eval-tasks 64]

``examples/continual/loop.yaml``'s loop, serving ``--production`` (the base model by default) to
simulated users (``agentboost.testing.users``: stock Strands agents with the calculator, the first
``--max-tasks`` training tasks again and again, so that sessions of a task form GRPO groups; every
6th session left without an outcome), with no proposal: every candidate is trained from the
rewarded sessions alone, gated on held-out tasks and A/B tested live. Stops after ``--rounds``
candidates, or at ``--minutes``. Prints the loop's lineage (each version's method, sessions, gate,
live difference, always-valid p-value, decision, cost), the sessions per second served, and an
offline ``eval`` of the final production against the starting one on ``--eval-tasks`` held-out
tasks (the baseline measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path

from agentboost.continual.lineage import LoopState
from agentboost.continual.loop import ContinualLoop, report_text
from agentboost.run.config import load_config
from agentboost.tasks import load_tasks
from agentboost.testing.users import drive_users

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--production", default="smollm2-135m-instruct")
    ap.add_argument("--sessions-per-round", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=int, default=600)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--max-tasks", type=int, default=24)
    ap.add_argument("--eval-tasks", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("overrides", nargs="*", help="more configuration overrides")
    args = ap.parse_args()
    out = Path(args.out)
    cfg = load_config(str(REPO / "examples/continual/loop.yaml"),
                      [f"loop.production={args.production}", f"loop.sessions_per_round={args.sessions_per_round}",
                       f"loop.max_rounds={args.rounds}", f"loop.window={args.window}",
                       f"run.max_wall_s={args.minutes * 60}", f"validation.max_new_tokens={args.max_new_tokens}",
                       *args.overrides], for_training=False)
    loop = ContinualLoop(cfg, out, token="bench", max_batch_size=args.concurrency, log=print)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (loop.run(), done.set()), daemon=True)
    t0 = time.perf_counter()
    thread.start()
    while loop.url is None and thread.is_alive():
        time.sleep(0.2)
    tasks = load_tasks(REPO / "examples/quickstart/data/train.jsonl")[: args.max_tasks]
    drive = asyncio.run(drive_users(loop.url + "/v1", "bench", tasks, concurrency=args.concurrency, feedback_every=6,
                                    system_prompt=cfg.agent.system_prompt, stop=done.is_set))
    thread.join()
    wall = time.perf_counter() - t0
    st = LoopState.load(out)
    print()
    print(report_text(loop.report()))
    print(f"\n{drive.sessions} sessions in {wall:.0f} s ({drive.sessions / wall:.2f}/s), {len(drive.failures)} failed "
          f"requests{': ' + drive.failures[0] if drive.failures else ''}")
    from agentboost.evaluation.evaluate import evaluate

    final, start = st.production["spec"], st.versions[0]["spec"]
    if final == start:
        print("no version was promoted: production is the starting version")
        return
    held_out = load_tasks(REPO / "examples/quickstart/data/test.jsonl")[: args.eval_tasks]
    res = evaluate(final, start, held_out, cfg, samples=2, seed=1, slots=16, out_dir=out / "final_eval", log=print)
    d = res["difference"]
    print(f"offline, {len(held_out)} held-out tasks x 2: final production {res['model']['success_rate']:.3f} against "
          f"the start's {res['baseline']['success_rate']:.3f}: {d['mean_difference']:+.3f} "
          f"(95% CI {d['ci95'][0]:+.3f}..{d['ci95'][1]:+.3f}), p = {d['p_value']:.4f}")


if __name__ == "__main__":
    main()
