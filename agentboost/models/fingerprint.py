"""Fingerprints of a policy's weights: what the trainer means to serve, and what an engine loaded.

A fingerprint is a digest per tensor, by the tensor's Hugging Face name, of the tensor as the engine
holds it (cast to the dtype it serves): a 1-D tensor whole, a matrix by ``COLUMNS`` of its columns
(every row of them), the columns drawn from the fingerprint's ``seed`` and the tensor's name. The
trainer draws a new seed for every weight version, so successive versions look at different columns
and a corruption that one draw misses is found by the next ones; a tensor zeroed, a module missing,
weights one update old all change every column.

Two kinds:

- ``full``: every parameter of the model (full fine-tuning, a LoRA adapter merged into the weights,
  the base model a LoRA run starts from);
- ``lora``: the adapter's factors, ``<module>.lora_A`` (rank x in) and ``<module>.lora_B`` (out x
  rank) with the adapter's scale folded into B (as vLLM keeps it), per target module.

The digests are exact (the bytes of the sampled values), so two sides agree only on the very same
numbers. Engines that keep weights in a form that cannot be read (vLLM's CPU build packs linear
weights for oneDNN) give the columns through their own matrix product with one-hot inputs, which
reproduces each weight exactly.

This file is standalone (torch and the standard library, nothing of agentboost's): vLLM's worker
extension (``sampling/vllm_worker/agentboost_vllm_worker.py``) loads it by path inside vLLM's own
environment, so both sides compute a digest with the same code.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator

import torch

COLUMNS = 8  # columns of each matrix looked at per version
LORA = "lora"
FULL = "full"
_PEFT_PREFIX = "base_model.model."
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(dtype: torch.dtype | str) -> str:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        return dtype
    for name, d in DTYPES.items():
        if d == dtype:
            return name
    raise ValueError(f"no fingerprint for weights of dtype {dtype}")


def columns(seed: int, name: str, n: int, k: int = COLUMNS) -> list[int]:
    """``k`` column indices (distinct, sorted) of a matrix of ``n`` columns, from the seed and the name."""
    if n <= k:
        return list(range(n))
    out: list[int] = []
    counter = 0
    while len(out) < k:
        h = hashlib.blake2b(f"{seed}:{name}:{counter}".encode(), digest_size=8).digest()
        c = int.from_bytes(h, "big") % n
        if c not in out:
            out.append(c)
        counter += 1
    return sorted(out)


def digest(values: torch.Tensor) -> str:
    """The digest of a tensor's values: its shape, dtype and bytes."""
    t = values.detach().to("cpu").contiguous()
    h = hashlib.blake2b(f"{tuple(t.shape)}:{t.dtype}".encode(), digest_size=8)
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def sampled(name: str, tensor: torch.Tensor, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """What a fingerprint looks at of a tensor: a 1-D tensor whole, a matrix's sampled columns."""
    t = tensor.detach()
    if t.dim() >= 2:
        t = t.reshape(t.shape[0], -1)
        t = t[:, columns(seed, name, t.shape[1])]
    return t.to(dtype)


def combined(tensors: dict[str, str]) -> str:
    """One digest for a whole fingerprint (what a record or an answer shows)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(tensors):
        h.update(f"{name}={tensors[name]};".encode())
    return h.hexdigest()


def make(kind: str, dtype: str, seed: int, tensors: dict[str, str], zero: Iterable[str] = ()) -> dict:
    """A fingerprint: ``{"kind", "dtype", "seed", "digest", "tensors": {name: digest}, "zero": [...]}``
    (``zero``: tensors an engine holds only as zeros, e.g. LoRA slots of modules the adapter does not
    train)."""
    return {"kind": kind, "dtype": dtype, "seed": int(seed), "digest": combined(tensors),
            "tensors": dict(sorted(tensors.items())), "zero": sorted(zero)}


def of_tensors(named: Iterable[tuple[str, torch.Tensor]], dtype: str, seed: int) -> dict:
    """A ``full`` fingerprint of named tensors (a state dict; tied tensors counted once, under their
    first name, as engines keep one copy)."""
    d = DTYPES[dtype_name(dtype)]
    seen: set[tuple[int, tuple[int, ...]]] = set()
    tensors = {}
    for name, t in named:
        if not t.is_floating_point():
            continue
        key = (t.data_ptr(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        name = name[len(_PEFT_PREFIX):] if name.startswith(_PEFT_PREFIX) else name
        tensors[name] = digest(sampled(name, t, seed, d))
    return make(FULL, dtype_name(dtype), seed, tensors)


def lora_factors(model) -> Iterator[tuple[str, torch.Tensor, torch.Tensor, float]]:
    """(module name, A, B, scale) of a peft model's active adapter, per target module; the name as
    the base model calls the module (``model.layers.0.self_attn.q_proj``)."""
    for name, module in model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if not isinstance(lora_a, torch.nn.ModuleDict):
            continue
        for adapter in getattr(module, "active_adapters", ()):
            if adapter in lora_a:
                short = name[len(_PEFT_PREFIX):] if name.startswith(_PEFT_PREFIX) else name
                yield short, lora_a[adapter].weight, module.lora_B[adapter].weight, float(module.scaling[adapter])


def lora_entries(name: str, a: torch.Tensor, b_scaled: torch.Tensor, seed: int) -> dict[str, str]:
    """The two entries of one module: A and B (the scale already folded into B, in the served dtype)."""
    return {f"{name}.lora_A": digest(sampled(f"{name}.lora_A", a, seed, a.dtype)),
            f"{name}.lora_B": digest(sampled(f"{name}.lora_B", b_scaled, seed, b_scaled.dtype))}


def fold_scale(b: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """B as an engine keeps it: cast to the served dtype, then multiplied by the scale in that dtype
    (vLLM's ``LoRALayerWeights.optimize``), so that both sides hold the same numbers."""
    b = b.detach().to(dtype)
    return b if scale == 1 else b * scale


def of_lora(model, dtype: str, seed: int) -> dict:
    """A ``lora`` fingerprint of a peft model's active adapter, as served in ``dtype``."""
    d = DTYPES[dtype_name(dtype)]
    tensors: dict[str, str] = {}
    for name, a, b, scale in lora_factors(model):
        tensors.update(lora_entries(name, a.detach().to(d), fold_scale(b, scale, d), seed))
    if not tensors:
        raise ValueError("the model has no active LoRA adapter to fingerprint")
    return make(LORA, dtype_name(dtype), seed, tensors)


def differences(expected: dict, got: dict) -> list[str]:
    """What differs between two fingerprints of the same draw (kind, dtype, seed), one phrase each;
    [] when they agree."""
    for key in ("kind", "dtype", "seed"):
        if expected.get(key) != got.get(key):
            return [f"{key} {got.get(key)!r} instead of {expected.get(key)!r}"]
    exp, have, zero = expected["tensors"], got["tensors"], set(got.get("zero", ()))
    out = []
    missing = [n for n in exp if n not in have]
    changed = [n for n in exp if n in have and have[n] != exp[n]]
    zeroed = [n for n in changed if n in zero]
    changed = [n for n in changed if n not in zero]
    extra = [n for n in have if n not in exp and n not in zero]
    for what, names in (("missing", missing), ("zero", zeroed), ("different", changed), ("unexpected", extra)):
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            out.append(f"{len(names)} of {len(exp)} tensors {what} ({', '.join(names[:3])}{more})")
    return out
