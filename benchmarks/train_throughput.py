"""The update against this machine's GEMM limit: milliseconds per trained token, and the ratio to what
the measured dense matrix-multiply rate allows; also the trainer's step shares, and the batched local
sampler against one-request-at-a-time generation of the same prompts, in the same run.

    .venv/bin/python benchmarks/train_throughput.py [--steps 2] [--reps 3] [--requests 16] [--no-sampler]
        [--save-rows ROWS.jsonl | --rows ROWS.jsonl]

1. The GEMM rate: float32 n x n x n products (n = 2048), measured first, on the same threads the
   update gets (`gpu_check.matmul_rate`).
2. The quickstart (`examples/quickstart/config.yaml`: 8 tasks x 4 episodes per step, LoRA r=16, the
   hf engine) trains for --steps steps; every update's rows (real episodes: the shared system turn,
   the question, sampled turns, tool results) are kept, and each update is timed as the loop ran it.
3. `Trainer.update` runs again --reps times on the kept rows of the step that trained the most
   tokens; the median is the figure: ms per trained token (a sampled token under loss mask 1).
4. The limit: a trained token needs at least a forward pass and, LoRA's frozen weights taking no
   weight gradient, the backward pass's activation gradients through every dense weight: 2 x 2 x
   the dense weights (the decoder's linear layers and the output head) of FLOPs. Issue 46 counted a
   third pass (the recomputed forward of gradient checkpointing): 3 x 2 x the dense weights, about
   0.8 GFLOP for SmolLM2-135M. Both are printed at the measured GEMM rate; the ratio is against the
   issue's (target <= 1.3). The context tokens a trained token needs (the question, tool results,
   the template's text) are the update's own cost, counted in the time and not in that limit.
5. The limit for the work this update must do: every row's tokens through the decoder's dense
   weights (a micro-batch's shared head once, padding not counted), the output head for trained
   tokens only, the same three passes (forward, activation gradients, the checkpointed layers'
   recomputation). Its ratio says how close the code runs to the GEMM rate on the tokens it has
   to process, whatever share of them is trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from agentboost.run.config import load_config
from agentboost.sampling.hf_engine import HFEngine
from agentboost.sampling.protocol import SamplingParams
from agentboost.trainer.batch import TrainRow
from agentboost.trainer.loop import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import _matmul_flops_per_token, matmul_rate  # noqa: E402 (the one GEMM measurement)

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


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


def processed_tokens(rows: list[TrainRow], micro_batch_tokens: int, pad: int) -> int:
    """Tokens the update runs through the decoder: per micro-batch (as ``Trainer.update`` makes
    them), its shared head once and every row's own tokens after it, padding left out."""
    from agentboost.trainer import batch as batching

    total = 0
    for mb in batching.micro_batches(rows, micro_batch_tokens):
        shared = int(batching.pad_batch(mb, pad)["shared_prefix"])
        total += shared + sum(len(r.input_ids) - shared for r in mb)
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--no-sampler", action="store_true", help="leave out the sampler comparison")
    ap.add_argument("--save-rows", help="write the timed update's rows here (JSONL)")
    ap.add_argument("--rows", help="time the update on these rows (from --save-rows) instead of training first")
    args = ap.parse_args()
    gemm = matmul_rate("cpu", "float32", 2048, 5)
    print(f"measured float32 GEMM: {gemm / 1e9:.0f} GFLOP/s on {torch.get_num_threads()} threads")

    with tempfile.TemporaryDirectory() as d:
        cfg = load_config(str(QUICKSTART / "config.yaml"),
                          [f"run.steps={args.steps}", "validation.at_start=false", "validation.every=0", "data.val_file=",
                           "run.checkpoint_every=0", "run.max_wall_s=0", "rollout.engine=hf"])
        trainer = Trainer(cfg, Path(d) / "run", log=lambda m: None)
        kept: list[list[TrainRow]] = []
        rows: list[dict] = []
        if args.rows:  # the rows of an earlier run: the same update, timed on other code or settings
            kept.append([TrainRow(**json.loads(line)) for line in Path(args.rows).read_text().splitlines()])
            trainer.close()
        else:
            update = trainer.update

            def keep(rows):
                kept.append(list(rows))
                return update(rows)

            trainer.update = keep
            trainer.run()  # closes its pool and engine at the end; the model stays
            del trainer.update
            rows = [json.loads(line) for line in (Path(d) / "run" / "metrics.jsonl").read_text().splitlines()]
    fwd = _matmul_flops_per_token(trainer.model)  # 2 x the dense weights
    head = trainer.model.get_output_embeddings().weight.numel()
    best = max(kept, key=lambda rs: sum(sum(r.loss_mask) for r in rs)) if kept else []
    if args.save_rows and best:
        Path(args.save_rows).write_text("".join(json.dumps(dataclasses.asdict(r)) + "\n" for r in best))
    times, trained = [], 0
    for _ in range(args.reps if best else 0):
        t0 = time.perf_counter()
        trained = trainer.update(best)["trained_tokens"]
        times.append(time.perf_counter() - t0)

    if rows:
        step_s = sum(r["time_step_s"] for r in rows)
        print(f"{len(rows)} steps of {cfg.data.tasks_per_step} tasks x {cfg.data.group_size} episodes, LoRA r={cfg.model.lora_r}")
        print(f"sampled tokens/s (over rollout time): "
              f"{sum(r['sampled_tokens'] for r in rows) / sum(r['time_rollout_s'] for r in rows):.1f}")
        loop_ms = [r["time_update_s"] / r["trained_tokens"] * 1000 for r in rows if r["trained_tokens"]]
        print(f"in the loop: trained tokens {[r['trained_tokens'] for r in rows]}, update "
              f"{[round(r['time_update_s'], 1) for r in rows]} s, ms per trained token {[round(x, 2) for x in loop_ms]}")
        for name in ("rollout", "reward", "update"):
            share = sum(r[f"time_{name}_s"] for r in rows) / step_s
            print(f"share of step time in {name}: {share:.1%}"
                  + (" (inside rollout: rewards run in the workers)" if name == "reward" else ""))
    if times:
        tokens = sum(len(r.input_ids) for r in best)
        ms = statistics.median(times) / trained * 1000
        limit_issue = 3 * fwd / gemm * 1000  # forward, activation gradients, recomputed forward
        limit_min = 2 * fwd / gemm * 1000  # forward and activation gradients
        print(f"update of {len(best)} rows ({tokens} tokens, {trained} trained), {args.reps} runs: "
              f"{', '.join(f'{t:.2f}' for t in times)} s")
        print(f"limit per trained token at the measured GEMM rate: {limit_issue:.2f} ms (3 x 2 x {fwd / 2e6:.0f} M dense "
              f"weights, issue 46's count), {limit_min:.2f} ms (2 x 2 x, forward and activation gradients only)")
        processed = processed_tokens(best, trainer.cfg.optim.micro_batch_tokens, trainer.tokenizer.pad_token_id)
        work_s = 3 * 2 * ((fwd / 2 - head) * processed + head * trained) / gemm
        print(f"the update's own work: {processed} of the {tokens} tokens through the decoder (shared heads once), "
              f"{trained} through the {head / 1e6:.0f} M-weight output head: limit {work_s:.2f} s "
              f"(3 passes at the measured rate), measured median {statistics.median(times):.2f} s")
        print(f"ms_per_trained_token={ms:.2f} ratio_to_gemm_limit={ms / limit_issue:.2f} "
              f"ratio_to_two_pass_limit={ms / limit_min:.2f} ratio_to_work_limit={statistics.median(times) / work_s:.2f}")
    else:
        print("no update ran (every group all-equal): rerun with more --steps")
    if not args.no_sampler:
        one, batched = sampler_comparison(args.requests, args.max_new_tokens)
        print(f"local sampler, {args.requests} requests one at a time: {one:.1f} tok/s; all at once (batched): {batched:.1f} tok/s")
        print(f"ratio_batched_vs_sequential={batched / one:.2f}")


if __name__ == "__main__":
    main()
