"""Log-prob parity on CPU, per engine and served dtype: the figures the default bounds of the parity
gate (``agentboost/run/verify.py`` DEFAULT_PARITY_BOUNDS, docs/verification.md) are based on.

For each variant the quickstart's agent (calculator tool, its system prompt; SmolLM2-135M-Instruct)
runs --tasks training tasks x --samples samples at the quickstart's sampling temperature (0.8) on the
engine; the trainer then recomputes the sampled tokens' log-probs with its own ``token_logprobs``
(``trainer/verify.py recompute``, what the gate calls) and the |Δ| per token is taken. Reported per
variant: tokens, mean, median, p99, p99.9 and max |Δ| over all tokens, and, because the gate judges
one step's sample (whole rows up to ``verify.parity_tokens`` tokens), the largest mean and p99 over
--draws such samples drawn as the gate draws them.

Variants (``--variants``): ``hf-float32`` (the trainer's own model, float32), ``hf-bfloat16`` (the
model in bfloat16 on both sides), ``vllm-float32`` (the vLLM CPU server serving the float32
checkpoint, as the trainer's merged sync does), ``vllm-adapter-float32`` (a runtime LoRA adapter,
random factors), ``vllm-bfloat16`` (the server in bfloat16 against a float32 trainer, what vLLM's
``auto`` dtype gives a float32 checkpoint on CPU) and ``vllm-bfloat16-trainer-bf16`` (both bfloat16).

    .venv/bin/python benchmarks/logprob_parity.py [--variants ...] [--tasks 24] [--samples 2]

About 15 minutes on 2 CPU cores with every variant (the vLLM ones need `bash setup.sh --vllm`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

import torch

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
VARIANTS = ("hf-float32", "hf-bfloat16", "vllm-float32", "vllm-adapter-float32", "vllm-bfloat16",
            "vllm-bfloat16-trainer-bf16")


def episodes_on(sampler, tok, tasks, samples, cfg, seed):
    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.run.assembly import agent_spec
    from agentboost.sampling.protocol import SamplingParams

    spec, renderer = agent_spec(cfg), ChatRenderer(tok)
    params = SamplingParams(temperature=cfg.sampling.temperature, top_p=1.0,
                            max_new_tokens=cfg.sampling.max_new_tokens, seed=seed)

    async def go():
        return await asyncio.gather(*(run_episode(spec, t, sampler, renderer, params, sample=k, score=False)
                                      for t in tasks for k in range(samples)))

    eps = asyncio.run(go())
    failed = [ep for ep in eps if not ep.calls]
    if len(failed) == len(eps):  # nothing sampled: a figure of nothing would read as parity
        raise SystemExit(f"no episode sampled a call: {failed[0].status}: {failed[0].error}")
    for ep in eps:
        ep.reward = 0.0  # rows need a reward; the parity does not look at it
    return [ep for ep in eps if ep.calls]


def random_adapter(model, r: int = 16):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    return get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, task_type="CAUSAL_LM", init_lora_weights=False,
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])).eval()


def measure(variant: str, tasks, samples: int, cfg, seed: int):
    from agentboost.models.loading import load_policy, resolve_model_path
    from agentboost.sampling.hf_engine import EngineSampler, HFEngine
    from agentboost.sampling.http_sampler import HttpSampler
    from agentboost.trainer.batch import rows_from_episodes
    from agentboost.trainer.verify import recompute

    path = str(resolve_model_path(cfg.model.path))
    engine, dtype = variant.split("-")[0], "bfloat16" if "bfloat16" in variant else "float32"
    trainer_dtype = "bfloat16" if variant.startswith("hf-bfloat16") or variant.endswith("trainer-bf16") else "float32"
    model, tok = load_policy(path, dtype=trainer_dtype)
    t0 = time.perf_counter()
    if engine == "hf":
        hf = HFEngine(model, tok, max_batch_size=16)
        try:
            eps = episodes_on(EngineSampler(hf), tok, tasks, samples, cfg, seed)
        finally:
            hf.close()
    else:
        from agentboost.sampling.vllm_server import VLLMPolicyServer

        adapter = "adapter" in variant
        if adapter:
            model = random_adapter(model)
        with VLLMPolicyServer(path, lora_rank=16 if adapter else 0, dtype=dtype, kv_cache_gib=1, max_model_len=2048,
                              seed=seed) as server:
            server.start(version=1 if adapter else 0, model=model if adapter else None)
            eps = episodes_on(HttpSampler(server.url, policy_file=str(server.policy_file)), tok, tasks, samples, cfg,
                              seed)
    sample_s = time.perf_counter() - t0
    rows = rows_from_episodes(eps)
    trainer, sampler = recompute(model, rows, tok.pad_token_id, cfg.sampling.temperature)
    d = (trainer.double() - sampler.double()).abs()
    return rows, d, sample_s


def gate_draws(rows, d_by_row, budget: int, draws: int):
    """The gate's statistics (mean, p99) over ``draws`` samples of rows drawn as the gate draws them."""
    from agentboost.trainer.verify import parity_sample

    means, p99s = [], []
    for k in range(draws):
        chosen = parity_sample(rows, budget, seed=k)
        d = torch.cat([d_by_row[id(r)] for r in chosen])
        if d.numel():
            means.append(float(d.mean()))
            p99s.append(float(torch.quantile(d, 0.99)))
    return max(means), max(p99s), sorted(means)[int(0.99 * (len(means) - 1))], sorted(p99s)[int(0.99 * (len(p99s) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--budget", type=int, default=0, help="the gate's tokens per step (default: verify.parity_tokens)")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="write the figures as JSON here")
    a = ap.parse_args()

    from agentboost.run.config import load_config
    from agentboost.tasks import load_tasks

    cfg = load_config(str(QUICKSTART / "first_run.yaml"), [])
    budget = a.budget or cfg.verify.parity_tokens
    tasks = load_tasks(str(QUICKSTART / "data" / "train.jsonl"))
    tasks = random.Random(a.seed).sample(tasks, a.tasks)
    print(f"{a.tasks} tasks x {a.samples} samples at temperature {cfg.sampling.temperature}, "
          f"{cfg.sampling.max_new_tokens} tokens per call; gate samples of {budget} tokens, {a.draws} draws")
    print(f"{'variant':>28} {'tokens':>7} {'mean':>9} {'median':>9} {'p99':>9} {'p99.9':>9} {'max':>9} "
          f"{'gate mean (max)':>16} {'gate p99 (max)':>15} {'sample s':>9}")
    results = {}
    for variant in a.variants.split(","):
        rows, d, sample_s = measure(variant, tasks, a.samples, cfg, a.seed)
        # the per-row slices of d, in the order recompute flattened them (row by row, position by position)
        d_by_row, at = {}, 0
        for r in rows:
            n = sum(r.loss_mask[1:])
            d_by_row[id(r)] = d[at:at + n]
            at += n
        assert at == d.numel()
        gmean, gp99, gmean99, gp9999 = gate_draws(rows, d_by_row, budget, a.draws)
        q = torch.quantile(d, torch.tensor([0.5, 0.99, 0.999], dtype=d.dtype)).tolist()
        results[variant] = {"tokens": d.numel(), "mean": float(d.mean()), "median": q[0], "p99": q[1], "p999": q[2],
                            "max": float(d.max()), "gate_mean_max": gmean, "gate_p99_max": gp99,
                            "gate_mean_p99": gmean99, "gate_p99_p99": gp9999, "sample_s": sample_s}
        r = results[variant]
        print(f"{variant:>28} {r['tokens']:>7} {r['mean']:>9.2e} {r['median']:>9.2e} {r['p99']:>9.2e} "
              f"{r['p999']:>9.2e} {r['max']:>9.2e} {gmean:>16.2e} {gp99:>15.2e} {sample_s:>9.0f}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
