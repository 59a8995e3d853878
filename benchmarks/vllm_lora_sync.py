"""How a LoRA policy reaches vLLM, measured: a runtime adapter (``rollout.vllm_lora_sync: adapter``)
against the adapter merged into the weights and reloaded (``merged``), on this machine's vLLM build.

Per mode: the server's start-up, sampled tokens/s with the base weights and after the first
publish of a random (nonzero) LoRA adapter of rank 16 on q/k/v/o, and the publish's own time. The
workload: 32 requests in flight, temperature 0.8, 48 new tokens (a quickstart step's first turns),
one warm-up round, then --rounds rounds. (How the CPU build's threads are set up is
benchmarks/vllm_cpu_runtime.py's subject.)

    .venv/bin/python benchmarks/vllm_lora_sync.py [--rounds 2]

Needs the vllm engine (`bash setup.sh --vllm`); run it alone on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import time


def quickstart_prompts(tok, n: int = 32) -> list[list[int]]:
    """``n`` short arithmetic questions, chat-rendered: the first turns of a quickstart step."""
    return [tok.apply_chat_template([{"role": "user", "content": f"Ben has {i + 3} books and gives away {i}. "
                                      "How many are left?"}], add_generation_prompt=True) for i in range(n)]


def sampled_tokens_per_s(server, prompts: list[list[int]], rounds: int) -> float:
    """Mean sampled tokens/s of ``server`` (a started ``VLLMPolicyServer``) over ``rounds`` rounds of
    all ``prompts`` in flight at once (temperature 0.8, 48 new tokens), after one warm-up round."""
    from agentboost.sampling.http_sampler import HttpSampler
    from agentboost.sampling.protocol import SamplingParams

    async def go():
        sampler = HttpSampler(server.url, policy_file=str(server.policy_file))
        try:
            t = time.perf_counter()
            rs = await asyncio.gather(*(sampler.sample(p, SamplingParams(temperature=0.8, max_new_tokens=48, seed=i))
                                        for i, p in enumerate(prompts)))
            return sum(len(r.response_ids) for r in rs) / (time.perf_counter() - t)
        finally:
            await sampler.close()

    asyncio.run(go())  # warm-up
    return sum(asyncio.run(go()) for _ in range(rounds)) / rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy, resolve_model_path
    from agentboost.sampling.vllm_server import VLLMPolicyServer

    model_dir = str(resolve_model_path("smollm2-135m-instruct"))
    model, tok = load_policy(model_dir)
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM", init_lora_weights=False,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])).eval()
    prompts = quickstart_prompts(tok)

    rows = []
    for mode in ("adapter", "merged"):
        server = VLLMPolicyServer(model_dir, lora_rank=16, merge_lora=mode == "merged", kv_cache_gib=1,
                                  max_model_len=2048, max_num_seqs=32)
        t = time.perf_counter()
        with server:
            server.start()
            start = time.perf_counter() - t
            base = sampled_tokens_per_s(server, prompts, a.rounds)
            server.publish(model, 1)
            sync = server.last_sync_s
            trained = sampled_tokens_per_s(server, prompts, a.rounds)
        rows.append((mode, start, base, sync, trained))
        print(f"{mode:>7}: start {start:.0f} s, base weights {base:.0f} tok/s, publish {sync:.2f} s, "
              f"with the adapter {trained:.0f} tok/s", flush=True)
    print(f"\n{'sync':>7} {'start s':>8} {'base tok/s':>11} {'publish s':>10} {'adapted tok/s':>14}")
    for mode, start, base, sync, trained in rows:
        print(f"{mode:>7} {start:>8.0f} {base:>11.0f} {sync:>10.2f} {trained:>14.0f}")
    got = {r[0]: r[4] for r in rows}
    print(f"merged / adapter, with the adapter: {got['merged'] / got['adapter']:.2f}x")

if __name__ == "__main__":
    main()
