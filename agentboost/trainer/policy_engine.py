"""The server that samples a policy, for the configured engine (``rollout.engine``). The trainer and
``agentboost eval`` both start it here, so a trained policy's validation episodes and its baseline's
are sampled the same way (the same engine, the same seed handling)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import TrainConfig


def start_policy_server(cfg: TrainConfig, model: Any, tokenizer: Any, model_path: str, *, seed: int, slots: int,
                        max_batch: int, lora_rank: int = 0, full_weight_sync: bool = False,
                        workdir: str | Path | None = None, weights_version: int = 0) -> tuple[str, Any]:
    """(engine name, started server). ``model_path`` is the weights the server loads; ``model`` is the
    loaded policy. hf: ``model`` is served from a thread of this process. vllm: a server subprocess
    loads ``model_path``; with ``weights_version`` > 0, ``model``'s weights (a LoRA adapter when
    ``lora_rank``, else the full weights) are put on it at once, as a checkpoint's. A LoRA policy
    reaches vLLM as ``rollout.vllm_lora_sync`` says (a runtime adapter, or merged weights)."""
    from ..sampling.policy_server import PolicyServer, resolve_engine

    r = cfg.rollout
    engine = resolve_engine(r.engine, r.vllm_python or None)
    if engine == "vllm":
        from ..sampling.vllm_server import VLLMPolicyServer, is_cpu_build, require_vllm_python

        python = require_vllm_python(r.vllm_python or None)
        merge = r.vllm_lora_sync == "merged" or (r.vllm_lora_sync == "auto" and is_cpu_build(python))
        server = VLLMPolicyServer(
            model_path, workdir=workdir, lora_rank=lora_rank, full_weight_sync=full_weight_sync, merge_lora=merge,
            python=python, kv_cache_gib=r.vllm_kv_cache_gib, max_model_len=r.vllm_max_model_len or None,
            startup_timeout_s=r.vllm_startup_timeout_s, seed=seed, max_num_seqs=max(slots, 16))
        return engine, server.start(version=weights_version, model=model if weights_version else None)
    # batch_wait_s: a step's first turns arrive within ~0.1 s of each other; gathering them into one
    # batch lets them share the prompt head's prefill
    return engine, PolicyServer.start(model, tokenizer, max_batch_size=max_batch, batch_wait_s=0.1)
