"""The shared-prefix KV cache and the grouped-query CPU attention, against the plain computation,
on the quickstart's real prompts (system prompt + calculator tool block + a question), in one run.

Sampler: one batch of N requests (N episodes' first turns) decoded together, three ways:
  baseline  transformers' "sdpa" attention, every row prefilled in full (what the engine did before)
  gqa       the grouped-query CPU attention, every row prefilled in full
  gqa+prefix the grouped-query CPU attention and the batch's common prefix prefilled once
Update: forward + backward of the clipped loss over N rows (prompt + sampled answer), LoRA r=16,
with and without the shared prefix.

    .venv/bin/python benchmarks/prefix_sharing.py [--requests 32] [--max-new-tokens 48]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import shared_prefix_len
from agentboost.models.loading import load_policy, resolve_model_path
from agentboost.run.config import load_config
from agentboost.sampling.hf_engine import HFEngine
from agentboost.sampling.protocol import SamplingParams
from agentboost.tools.calculator import calculator
from agentboost.trainer import batch as batching
from agentboost.trainer import loss as losses

ROOT = Path(__file__).resolve().parents[1]


def quickstart_prompts(tok, n: int) -> list[list[int]]:
    cfg = load_config(ROOT / "examples/quickstart/config.yaml")
    questions = [json.loads(line)["question"] for line in Path(cfg.data.val_file).read_text().splitlines()[:n]]
    renderer = ChatRenderer(tok)
    prompts = []
    for q in questions:
        hf, tools = renderer.to_hf_messages([{"role": "user", "content": [{"text": q}]}], cfg.agent.system_prompt,
                                            [calculator.tool_spec])
        prompts.append(renderer.encode(renderer.render(hf, tools, add_generation_prompt=True)))
    return prompts


def sample_batch(model, tok, prompts, params, min_shared_prefix: int):
    engine = HFEngine(model, tok, max_batch_size=len(prompts), batch_wait_s=1.0, min_shared_prefix=min_shared_prefix)
    try:
        t0 = time.perf_counter()
        futures = [engine.submit(p, params) for p in prompts]
        results = [f.result() for f in futures]
        elapsed = time.perf_counter() - t0
        assert engine.stats.batches == 1, "the requests did not form one batch"
    finally:
        engine.close()
    return results, elapsed


def update_time(model, rows, min_shared_prefix: int, pad_id: int) -> tuple[float, int]:
    cfg = losses.actor_config(0.2, 0.28, 3.0, "seq-mean-token-mean")
    batch = batching.pad_batch(rows, pad_id, min_shared_prefix=min_shared_prefix)
    model.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    loss, _ = losses.policy_loss(losses.token_logprobs(model, batch, 0.8), batch, cfg)
    loss.backward()
    return time.perf_counter() - t0, batch["shared_prefix"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    torch.manual_seed(0)
    from transformers import AutoModelForCausalLM

    model, tok = load_policy("smollm2-135m-instruct")
    baseline_model = AutoModelForCausalLM.from_pretrained(str(resolve_model_path("smollm2-135m-instruct")),
                                                          dtype=torch.float32, attn_implementation="sdpa").eval()
    prompts = quickstart_prompts(tok, args.requests)
    shared = shared_prefix_len(prompts)
    print(f"{len(prompts)} quickstart prompts, {min(map(len, prompts))}-{max(map(len, prompts))} tokens, "
          f"common prefix {shared} tokens")
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)  # greedy: same tokens every way
    runs = {}
    for name, m, minimum in (("baseline", baseline_model, 0), ("gqa", model, 0), ("gqa+prefix", model, 32)):
        results, elapsed = sample_batch(m, tok, prompts, params, minimum)
        tokens = sum(len(r.response_ids) for r in results)
        runs[name] = (results, elapsed)
        print(f"sampler {name:>10}: {elapsed:6.1f} s, {tokens / elapsed:6.1f} tok/s ({tokens} tokens)")
    same = all(a.response_ids == b.response_ids for a, b in zip(runs["baseline"][0], runs["gqa+prefix"][0]))
    print(f"same greedy tokens in all three: {same}")
    base_s = runs["baseline"][1]
    print(f"ratio_sampler_gqa_vs_baseline={base_s / runs['gqa'][1]:.2f}")
    print(f"ratio_sampler_gqa_prefix_vs_baseline={base_s / runs['gqa+prefix'][1]:.2f}")

    from peft import LoraConfig, get_peft_model

    policy = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM",
                                              target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    policy.train()
    rows = []
    for i, (p, r) in enumerate(zip(prompts, runs["gqa+prefix"][0])):
        ids = p + r.response_ids
        rows.append(batching.TrainRow(str(i), "g", ids, [0] * len(p) + [1] * len(r.response_ids),
                                       [0.0] * len(p) + list(r.logprobs), advantage=1.0 if i % 2 else -1.0))
    update_time(policy, rows[:2], 0, tok.pad_token_id)  # warm-up
    plain, _ = update_time(policy, rows, 0, tok.pad_token_id)
    prefixed, used = update_time(policy, rows, 32, tok.pad_token_id)
    print(f"update, {len(rows)} rows: full rows {plain:.1f} s; shared prefix of {used} tokens {prefixed:.1f} s")
    print(f"ratio_update_prefix_vs_full={plain / prefixed:.2f}")


if __name__ == "__main__":
    main()
