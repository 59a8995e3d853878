"""A training configuration's policy server: ``rollout.engine`` and ``rollout.vllm_*`` as arguments
of ``sampling.policy_server.start_policy_server``, the one way every command starts it. The trainer
and ``agentboost eval`` both take them from here, so a trained policy's validation episodes and its
baseline's are sampled the same way (the same engine, the same seed handling)."""

from __future__ import annotations

from typing import Any

from ..sampling.policy_server import VLLMOptions
from .config import TrainConfig

# hf engine: a step's first turns arrive within ~0.1 s of each other; gathering them into one batch
# lets them share the prompt head's prefill
BATCH_WAIT_S = 0.1


def server_options(cfg: TrainConfig) -> dict[str, Any]:
    """``engine``, ``batch_wait_s`` and ``vllm`` for ``start_policy_server``."""
    r = cfg.rollout
    return {"engine": r.engine, "batch_wait_s": BATCH_WAIT_S,
            "vllm": VLLMOptions(python=r.vllm_python or None, lora_sync=r.vllm_lora_sync,
                                kv_cache_gib=r.vllm_kv_cache_gib, max_model_len=r.vllm_max_model_len or None,
                                startup_timeout_s=r.vllm_startup_timeout_s)}
