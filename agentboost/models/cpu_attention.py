"""Scaled-dot-product attention for CPU that keeps grouped-query attention grouped.

With a padding mask, transformers' "sdpa" path copies each key/value head up to the query heads
before calling the kernel (CUDA's fused kernels need that). On CPU PyTorch's kernel takes the mask
and ``enable_gqa`` together, and the copy is what costs: for SmolLM2 (3 KV heads, 9 query heads) a
padded decode step at batch 32 spends more time copying than in the rest of the model. The result
is the same attention (tests compare it with "sdpa").
"""

from __future__ import annotations

NAME = "agentboost_cpu_sdpa"


def cpu_sdpa_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                     is_causal=None, **kwargs):
    import torch

    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(query.shape[2] > 1 and attention_mask is None and is_causal)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=is_causal,
        enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Make the implementation selectable by name (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, cpu_sdpa_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
