"""Trainer throughput on CPU: trained and sampled tokens per second, the share of each step spent in
rollout, scoring and update; and the batched local sampler against one-request-at-a-time
generation of the same prompts, in the same run.

    .venv/bin/python benchmarks/train_throughput.py [--steps 3] [--requests 16]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentboost.run.config import load_config
from agentboost.sampling.hf_engine import HFEngine
from agentboost.sampling.protocol import SamplingParams
from agentboost.trainer.loop import Trainer

CONFIG = str(Path(__file__).resolve().parents[1] / "examples/quickstart/smoke.yaml")


def sampler_comparison(n: int, max_new_tokens: int) -> tuple[float, float]:
    engine = HFEngine.from_pretrained("smollm2-135m-instruct", max_batch_size=16)
    tok = engine.tokenizer
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": f"Count from {i} to {i + 20}."}],
                                            add_generation_prompt=True, return_dict=True)["input_ids"]) for i in range(n)]
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    try:
        t0 = time.perf_counter()
        seq = sum(len(engine.generate(p, params).response_ids) for p in prompts)
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        with ThreadPoolExecutor(n) as ex:
            batched = sum(len(r.response_ids) for r in ex.map(lambda p: engine.generate(p, params), prompts))
        t_bat = time.perf_counter() - t0
    finally:
        engine.close()
    return seq / t_seq, batched / t_bat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg = load_config(CONFIG, [f"run.steps={args.steps}", "data.tasks_per_step=4", "data.group_size=4",
                                   "validation.max_tasks=1", "run.checkpoint_every=0"])
        Trainer(cfg, Path(d) / "run", log=lambda m: None).run()
        rows = [json.loads(line) for line in (Path(d) / "run" / "metrics.jsonl").read_text().splitlines()]
    step_s = sum(r["time_step_s"] for r in rows)
    print(f"{len(rows)} steps of {cfg.data.tasks_per_step} tasks x {cfg.data.group_size} episodes, LoRA r={cfg.model.lora_r}")
    print(f"sampled tokens/s (over rollout time): {sum(r['sampled_tokens'] for r in rows) / sum(r['time_rollout_s'] for r in rows):.1f}")
    print(f"trained tokens/s (over update time): {sum(r['trained_tokens'] for r in rows) / max(1e-9, sum(r['time_update_s'] for r in rows)):.1f}")
    for name in ("rollout", "reward", "update"):
        share = sum(r[f"time_{name}_s"] for r in rows) / step_s
        print(f"share of step time in {name}: {share:.1%}" + (" (inside rollout: rewards run in the workers)" if name == "reward" else ""))
    one, batched = sampler_comparison(args.requests, args.max_new_tokens)
    print(f"local sampler, {args.requests} requests one at a time: {one:.1f} tok/s; all at once (batched): {batched:.1f} tok/s")
    print(f"ratio_batched_vs_sequential={batched / one:.2f}")


if __name__ == "__main__":
    main()
