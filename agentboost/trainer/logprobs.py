"""Log-probabilities of given tokens from a causal LM's final hidden states, without materialising
the full-vocabulary log-softmax.

``log p(t) = logit_t / T - logsumexp(logits / T)``, computed over chunks of positions. Each chunk
runs under activation checkpointing: its (positions x vocabulary) logits exist only while that
chunk is computed, in the forward pass and again in the backward pass, instead of the whole
(rows x tokens x vocabulary) tensor and its log-softmax staying alive until ``backward``. With
SmolLM2's 49,152-token vocabulary that tensor is ~200 KB per position in float32; with Qwen3's
151,936 it is ~600 KB.


The decoder's own activations are the rest of an update's memory (per layer: attention, the MLP's
intermediate projections, LoRA's inputs). ``checkpointed_layers`` keeps only each decoder layer's
input and recomputes the layer in the backward pass (about one more forward pass of time).
HF's own gradient checkpointing drops the KV cache, which the update's shared-prefix path passes
to the rows' pass; here the layers are checkpointed with the cache kept, and that pass reads the
prefix through ``read_only_prefix`` so that recomputing a layer does not append its keys and
values to the cache a second time.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_POSITIONS = 512

# config attributes of models whose logits are post-processed after the output projection
# (soft-capping, scaling); their logits are taken from the model's own forward instead
_LOGIT_POSTPROCESSING = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def _chunk(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           temperature: float) -> torch.Tensor:
    logits = torch.nn.functional.linear(hidden, weight, bias).float()
    if temperature > 0:
        logits = logits / temperature
    return logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def head_supports_chunking(model) -> bool:
    cfg = getattr(model, "config", None)
    for name in _LOGIT_POSTPROCESSING:
        value = getattr(cfg, name, None)
        if value not in (None, 0, 1, 1.0):
            return False
    head = model.get_output_embeddings()
    return isinstance(head, torch.nn.Linear)


def hidden_logprobs(hidden: torch.Tensor, targets: torch.Tensor, head: torch.nn.Linear, temperature: float,
                    chunk_positions: int = DEFAULT_CHUNK_POSITIONS) -> torch.Tensor:
    """``hidden`` (rows, n, H) predicts ``targets`` (rows, n); returns (rows, n) float32 log-probs."""
    rows, n = targets.shape
    flat_h = hidden.reshape(rows * n, hidden.shape[-1])
    flat_t = targets.reshape(rows * n)
    out = []
    grad = torch.is_grad_enabled() and (flat_h.requires_grad or head.weight.requires_grad)
    for s in range(0, rows * n, chunk_positions):
        h, t = flat_h[s:s + chunk_positions], flat_t[s:s + chunk_positions]
        if grad:
            out.append(checkpoint(_chunk, h, t, head.weight, head.bias, temperature, use_reentrant=False))
        else:
            out.append(_chunk(h, t, head.weight, head.bias, temperature))
    if not out:
        return hidden.new_zeros((rows, n), dtype=torch.float32)
    return torch.cat(out).reshape(rows, n)


def logits_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """The same from full logits (models with post-processed logits): logsumexp + gather, no
    log-softmax tensor."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    return logits.gather(-1, targets[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def _checkpointed_forward(forward, *args, **kwargs):
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


@contextmanager
def checkpointed_layers(model, enabled: bool = True):
    """While inside, each of the model's decoder layers runs under activation checkpointing when
    gradients are being recorded (a no-op otherwise, or for a model without ``decoder.layers``)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if not enabled or layers is None or not torch.is_grad_enabled():
        yield
        return
    saved = []
    try:
        for layer in layers:
            # an instance attribute shadows the class's forward for nn.Module.__call__
            saved.append((layer, layer.__dict__.get("forward")))
            layer.forward = functools.partial(_checkpointed_forward, layer.forward)
        yield
    finally:
        for layer, own in saved:
            if own is None:
                del layer.forward
            else:
                layer.forward = own


def _read_only_update(self, key_states, value_states, layer_idx, *args, **kwargs):
    layer = self.layers[layer_idx]
    return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)


def read_only_prefix(cache):
    """``cache`` (a prefix's DynamicCache) turned into one that attention reads the prefix from
    without storing the new keys and values: running a layer twice (checkpointing) sees the same
    prefix both times, and the cache's length stays the prefix's (which the masks are built from
    before the layers run)."""
    cls = type(cache)
    cache.__class__ = type(f"ReadOnly{cls.__name__}", (cls,), {"update": _read_only_update})
    return cache
