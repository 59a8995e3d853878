"""Log-probabilities of given tokens from a causal LM's final hidden states, without materialising
the full-vocabulary log-softmax.

``log p(t) = logit_t / T - logsumexp(logits / T)``, computed over chunks of positions, with the
gradient written out (``_HeadLogprobs``): a chunk's (positions x vocabulary) logits exist only
while that chunk is computed, in the forward pass and again in the backward pass, instead of the
whole (rows x tokens x vocabulary) tensor and its log-softmax staying alive until ``backward``. With
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


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float) -> torch.Tensor:
    """One chunk's float32 logits, divided by the temperature (in place: the tensor is the chunk's own)."""
    logits = torch.nn.functional.linear(hidden, weight, bias).float()
    return logits.div_(temperature) if temperature > 0 else logits


class _HeadLogprobs(torch.autograd.Function):
    """``log softmax(h W^T / T)[t]`` chunk by chunk, with its gradient written out: the backward
    pass recomputes a chunk's logits once and turns them into ``g (onehot(t) - softmax) / T`` in
    place, where autograd through a checkpointed chunk ran the projection and the log-softmax a
    second time and kept each step's vocabulary-wide tensor for its own backward."""

    @staticmethod
    def forward(ctx, hidden, targets, weight, bias, temperature, chunk):
        out = hidden.new_empty(targets.shape, dtype=torch.float32)
        lse = hidden.new_empty(targets.shape, dtype=torch.float32)
        for s in range(0, targets.shape[0], chunk):
            logits = _logits(hidden[s:s + chunk], weight, bias, temperature)
            lse[s:s + chunk] = torch.logsumexp(logits, dim=-1)
            out[s:s + chunk] = logits.gather(-1, targets[s:s + chunk, None]).squeeze(-1) - lse[s:s + chunk]
        ctx.save_for_backward(hidden, targets, weight, bias, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        return out

    @staticmethod
    def backward(ctx, grad):
        hidden, targets, weight, bias, lse = ctx.saved_tensors
        temperature, chunk = ctx.temperature, ctx.chunk
        scale = 1.0 / temperature if temperature > 0 else 1.0
        need_h, _, need_w, need_b = ctx.needs_input_grad[:4]
        grad_h = torch.zeros_like(hidden) if need_h else None
        grad_w = torch.zeros_like(weight, dtype=torch.float32) if need_w else None
        grad_b = torch.zeros_like(bias, dtype=torch.float32) if need_b else None
        for s in range(0, targets.shape[0], chunk):
            g = grad[s:s + chunk].float()
            # d logp / d logits = onehot(t) - softmax, times the incoming gradient
            dlogits = _logits(hidden[s:s + chunk], weight, bias, temperature)
            dlogits.sub_(lse[s:s + chunk, None]).exp_().mul_(-g[:, None])
            dlogits.scatter_add_(-1, targets[s:s + chunk, None], g[:, None])
            dlogits.mul_(scale)  # through the division by the temperature
            if need_h:
                grad_h[s:s + chunk] = (dlogits.to(weight.dtype) @ weight).to(hidden.dtype)
            if need_w:
                grad_w += dlogits.t() @ hidden[s:s + chunk].float()
            if need_b:
                grad_b += dlogits.sum(0)
        return (grad_h, None, grad_w.to(weight.dtype) if need_w else None,
                grad_b.to(bias.dtype) if need_b else None, None, None)


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
    """``hidden`` (..., H) predicts ``targets`` (...); returns float32 log-probs shaped as ``targets``
    (any leading shape: rows x positions, or the positions picked out of them)."""
    flat_h = hidden.reshape(-1, hidden.shape[-1])
    flat_t = targets.reshape(-1)
    if flat_t.shape[0] == 0:
        return hidden.new_zeros(targets.shape, dtype=torch.float32)
    out = _HeadLogprobs.apply(flat_h, flat_t, head.weight, head.bias, temperature, chunk_positions)
    return out.reshape(targets.shape)


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
