"""Peak memory and time of one quickstart-sized update (forward + backward of the policy loss, LoRA
on the embedded model), four ways, each in a fresh process:

- ``before``: the baseline, a full-vocabulary log-softmax over rows x tokens x 49,152 in float32
  (what the update computed before ``trainer.logprobs``);
- ``chunked``: ``token_logprobs`` with the log-probs in chunks (logsumexp + gather under
  checkpointing) but the decoder's activations all kept, no shared prefix;
- ``checkpointed``: the same with every decoder layer checkpointed (recomputed in backward);
- ``after``: what the trainer runs by default: checkpointed layers and the micro-batch's shared
  prompt head run once (``pad_batch``'s default ``min_shared_prefix``).

Per variant: peak RSS (and its growth over the loaded model), seconds for the update's forward and
backward passes; every variant's log-probs and gradients are compared with the baseline's.

The batch: the quickstart's step, 8 tasks x 4 samples = 32 rows, each its real chat prompt
(system prompt, calculator tool, a task) followed by three model turns of 48 sampled tokens and
two tool results (random token ids, the shapes are what matter), in micro-batches of at most
8192 tokens (the quickstart's optim.micro_batch_tokens), gradients accumulated over them.

    .venv/bin/python benchmarks/update_memory.py [--rows 32] [--variants before,chunked,checkpointed,after]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import torch


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rows_for(tok, n: int, seed: int = 0):
    from agentboost.trainer.batch import TrainRow

    g = torch.Generator().manual_seed(seed)
    system = ("You are a helpful assistant with a calculator tool. Solve the problem and end with the final answer "
              "as a number.")
    rows = []
    for i in range(n):
        prompt = tok.apply_chat_template([{"role": "system", "content": system},
                                          {"role": "user", "content": f"Task {i}: a shop sells {i + 3} apples ..."}],
                                         add_generation_prompt=True, return_dict=True)["input_ids"]
        ids, mask = list(prompt), [0] * len(prompt)
        for turn in range(3):
            sampled = torch.randint(0, tok.vocab_size, (48,), generator=g).tolist()
            ids += sampled
            mask += [1] * 48
            if turn < 2:
                tool = torch.randint(0, tok.vocab_size, (40,), generator=g).tolist()
                ids += tool
                mask += [0] * 40
        rows.append(TrainRow(str(i), f"g{i // 4}", ids, mask, [-2.0 if m else 0.0 for m in mask],
                             advantage=1.0 if i % 2 else -1.0))
    return rows


def full_softmax_logprobs(model, batch, temperature):
    """The baseline: what the update computed before (no shared prefix here)."""
    ids, attn = batch["input_ids"], batch["attention_mask"]
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


VARIANTS = ("before", "chunked", "checkpointed", "after")


def child(variant: str, n_rows: int, micro_batch_tokens: int, grads_path: str) -> None:
    import functools
    import time

    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy, resolve_model_path
    from agentboost.trainer import loss as losses
    from agentboost.trainer.batch import micro_batches, pad_batch

    torch.manual_seed(0)
    model, tok = load_policy(str(resolve_model_path("smollm2-135m-instruct")))
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM",
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    model.train()
    rows = rows_for(tok, n_rows)
    actor = losses.actor_config(0.2, 0.28, 3.0, "seq-mean-token-mean", "vanilla")
    if variant == "before":
        fn = full_softmax_logprobs
    else:
        fn = functools.partial(losses.token_logprobs, checkpoint_layers=variant in ("checkpointed", "after"))
    pad = {} if variant == "after" else {"min_shared_prefix": 0}  # after: pad_batch's default, as the trainer
    batches = micro_batches(rows, micro_batch_tokens)
    loaded = peak_rss_mib()
    logps, shared = [], []
    t0 = time.perf_counter()
    for mb in batches:  # as the trainer's update: gradients accumulate over the micro-batches
        batch = pad_batch(mb, tok.pad_token_id, **pad)
        shared.append(batch["shared_prefix"])
        logp = fn(model, batch, 0.8)
        loss, _ = losses.policy_loss(logp, batch, actor)
        (loss * len(mb) / len(rows)).backward()
        logps += logp[batch["response_mask"].bool()].detach().tolist()
    update_s = time.perf_counter() - t0
    peak = peak_rss_mib()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    torch.save({"logp": torch.tensor(logps), "grad": grads}, grads_path)
    print(json.dumps({"variant": variant, "rows": n_rows, "width": max(len(r.input_ids) for r in rows),
                      "micro_batches": len(batches), "peak_rss_mib": peak, "loaded_rss_mib": loaded,
                      "update_s": update_s, "shared_prefix": shared}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--micro-batch-tokens", type=int, default=8192, help="the quickstart's optim.micro_batch_tokens")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {','.join(VARIANTS)} (before always runs)")
    ap.add_argument("--child", choices=VARIANTS)
    ap.add_argument("--grads", help="(child) where to save its log-probs and gradients")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rows, args.micro_batch_tokens, args.grads)
        return
    variants = ["before"] + [v for v in args.variants.split(",") if v in VARIANTS and v != "before"]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    res, saved = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            path = f"{tmp}/{variant}.pt"
            out = subprocess.run([sys.executable, __file__, "--child", variant, "--rows", str(args.rows),
                                  "--micro-batch-tokens", str(args.micro_batch_tokens), "--grads", path],
                                 capture_output=True, text=True, check=True).stdout
            res[variant] = json.loads(out.strip().splitlines()[-1])
            saved[variant] = torch.load(path)
    b = res["before"]
    print(f"one quickstart update: {b['rows']} rows of up to {b['width']} tokens in {b['micro_batches']} micro-batches "
          f"of <= {args.micro_batch_tokens} tokens, LoRA r=16, vocabulary 49,152")
    gscale = saved["before"]["grad"].abs().max().item()
    for v in variants:
        r = res[v]
        dlogp = (saved["before"]["logp"] - saved[v]["logp"]).abs().max().item()
        dgrad = (saved["before"]["grad"] - saved[v]["grad"]).abs().max().item()
        print(f"  {v:12s}: peak RSS {r['peak_rss_mib']:7.0f} MiB (x{r['peak_rss_mib'] / b['peak_rss_mib']:.2f}; "
              f"+{r['peak_rss_mib'] - r['loaded_rss_mib']:.0f} MiB over the loaded model and batch)  "
              f"update {r['update_s']:6.1f} s  shared prefix {r['shared_prefix']}  "
              f"vs before: max |d log-prob| {dlogp:.1e}, max |d grad| {dgrad:.1e}", flush=True)
    print(f"largest gradient {gscale:.2e}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
