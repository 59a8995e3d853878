"""vLLM's side of the weight fingerprints: a worker extension (``--worker-extension-cls
agentboost_vllm_worker.WeightsExtension``) that reports the fingerprint of the weights the engine
actually holds, read from its own tensors, through ``/collective_rpc`` (vLLM's development route).

It runs inside vLLM's environment, not agentboost's: the server is started with this folder on
``PYTHONPATH`` (and nothing else of agentboost's), and the digests come from
``models/fingerprint.py``, loaded by its path, the same code the trainer uses.

- ``agentboost_track_adapters()``: from now on the worker remembers which adapter name and path each
  LoRA id was loaded from (vLLM's worker knows adapters by number only; the names live in the API
  server's process). Called once, right after the server starts, before any adapter is loaded.
- ``agentboost_fingerprint(request)``: ``request`` is JSON ``{"kind": "full"|"lora", "seed": int,
  "adapter": name or null}``. ``full``: every parameter of the base model as the engine computes with
  it (linear weights that the CPU build packed for oneDNN are read through the layer's own matrix
  product with one-hot inputs, which reproduces each weight exactly); fused layers (``qkv_proj``,
  ``gate_up_proj``) are split into the Hugging Face modules they hold. ``lora``: the named adapter's
  factors in its slot of the LoRA layers (the tensors the kernels read), scale folded into B.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

_FINGERPRINT = Path(__file__).resolve().parents[2] / "models" / "fingerprint.py"


def _fingerprint_module():
    spec = importlib.util.spec_from_file_location("agentboost_fingerprint", _FINGERPRINT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fp = _fingerprint_module()


def _split_names(model, name: str, parts: int) -> list[str]:
    """The Hugging Face modules a fused vLLM module holds (``...qkv_proj`` -> q, k, v)."""
    head, _, leaf = name.rpartition(".")
    mapping = getattr(model, "packed_modules_mapping", None) or {}
    subs = mapping.get(leaf)
    if parts == 1 and not subs:
        return [name]
    if not subs or len(subs) != parts:
        raise ValueError(f"cannot tell which modules {name} holds ({parts} parts, mapping {subs})")
    return [f"{head}.{s}" if head else s for s in subs]


def _readable(layer, param: str = "weight") -> torch.Tensor | None:
    w = getattr(layer, param, None)
    return w if isinstance(w, torch.Tensor) and w.numel() else None


def _weight_columns(layer, name: str, seed: int) -> torch.Tensor:
    """The sampled columns of a linear layer's weight (out x k), as it computes with them."""
    cols = fp.columns(seed, name, layer.input_size_per_partition)
    w = _readable(layer)
    if w is not None:
        return w.detach()[:, cols]
    # the CPU build keeps only a packed copy: x_k = e_{cols[k]} gives row k = W[:, cols[k]], exactly
    dtype = getattr(layer, "params_dtype", None) or torch.get_default_dtype()
    x = torch.zeros(len(cols), layer.input_size_per_partition, dtype=dtype)
    x[torch.arange(len(cols)), torch.tensor(cols)] = 1
    with torch.no_grad():
        y = layer.quant_method.apply(layer, x)
    return y.t().contiguous()


def _full(model, seed: int) -> tuple[dict, str]:
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    tensors: dict[str, str] = {}
    dtype = None
    seen: set[tuple[int, tuple[int, ...]]] = set()  # tied weights (lm_head = embed_tokens) count once
    for mod_name, module in model.named_modules():
        if hasattr(module, "lora_a_stacked"):  # a LoRA wrapper: its base_layer comes on its own
            continue
        name = mod_name.replace(".base_layer", "")
        if isinstance(module, LinearBase):
            sizes = list(getattr(module, "output_sizes", None) or [module.output_size_per_partition])
            subs = _split_names(model, name, len(sizes))
            offsets = [0]
            for s in sizes:
                offsets.append(offsets[-1] + s)
            for i, sub in enumerate(subs):
                # the columns are drawn per Hugging Face tensor, as the trainer draws them
                piece = _weight_columns(module, f"{sub}.weight", seed)[offsets[i]:offsets[i + 1]]
                dtype = dtype or piece.dtype
                tensors[f"{sub}.weight"] = fp.digest(piece)
            bias = getattr(module, "bias", None)
            if isinstance(bias, torch.Tensor) and bias.numel():
                for i, sub in enumerate(subs):
                    tensors[f"{sub}.bias"] = fp.digest(bias.detach()[offsets[i]:offsets[i + 1]])
            continue
        for pname, p in module.named_parameters(recurse=False):
            full = f"{name}.{pname}" if name else pname
            t = p.detach()
            key = (t.data_ptr(), tuple(t.shape))
            if key in seen:
                continue
            seen.add(key)
            if isinstance(module, VocabParallelEmbedding) and pname == "weight":
                t = t[: module.org_vocab_size]  # rows past the vocabulary are padding
            if not t.is_floating_point() or not t.numel():
                continue
            tensors[full] = fp.digest(fp.sampled(full, t, seed, t.dtype))
    return tensors, fp.dtype_name(dtype or torch.get_default_dtype())


def _lora(model, manager, lora_id: int, seed: int) -> tuple[dict, list[str], str]:
    am = manager._adapter_manager
    if lora_id not in am.lora_index_to_id:
        am.activate_adapter(lora_id)  # what the next request naming it does anyway
    slot = am.lora_index_to_id.index(lora_id)
    rank = am._registered_adapters[lora_id].rank
    tensors, zero = {}, []
    dtype = None
    for mod_name, module in model.named_modules():
        if not isinstance(getattr(module, "lora_a_stacked", None), (tuple, list)):
            # not a LoRA layer, or the embedding's (one tensor, not one per part), which vLLM wraps
            # whatever the adapter targets: adapters on embeddings are fingerprinted on neither side
            # (fingerprint.lora_factors reads peft's lora_A modules, which embeddings do not have)
            continue
        subs = _split_names(model, mod_name, len(module.lora_a_stacked))
        for i, sub in enumerate(subs):
            a = module.lora_a_stacked[i][slot, 0, :rank, :]
            b = module.lora_b_stacked[i][slot, 0, :, :rank]
            dtype = dtype or a.dtype
            entries = fp.lora_entries(sub, a, b, seed)
            tensors.update(entries)
            if not bool(a.any()) and not bool(b.any()):
                zero.extend(entries)
    return tensors, zero, fp.dtype_name(dtype or torch.get_default_dtype())


class WeightsExtension:
    """Mixed into vLLM's worker class (``--worker-extension-cls``); methods called by name."""

    def agentboost_track_adapters(self) -> dict:
        if getattr(self, "_agentboost_adapters", None) is None:
            self._agentboost_adapters = {}
            add = self.add_lora

            def add_lora(lora_request, *args, **kwargs):
                self._agentboost_adapters[lora_request.lora_name] = (lora_request.lora_int_id,
                                                                     str(lora_request.lora_path))
                return add(lora_request, *args, **kwargs)

            self.add_lora = add_lora  # the instance's: collective_rpc finds it before the class's
        return {"tracking": True}

    def agentboost_fingerprint(self, request: str) -> dict:
        req = json.loads(request)
        seed, kind = int(req["seed"]), req["kind"]
        model = self.model_runner.get_model()
        with torch.no_grad():
            if kind == fp.FULL:
                tensors, dtype = _full(model, seed)
                return fp.make(fp.FULL, dtype, seed, tensors)
            if kind != fp.LORA:
                raise ValueError(f"unknown fingerprint kind {kind!r}")
            known = getattr(self, "_agentboost_adapters", None)
            if known is None:
                raise RuntimeError("adapters are not tracked: agentboost_track_adapters was not called at start")
            name = req["adapter"]
            manager = getattr(self.model_runner, "lora_manager", None)
            loaded = set(manager.list_adapters()) if manager is not None else set()
            if name not in known or known[name][0] not in loaded:
                names = sorted(n for n, (i, _) in known.items() if i in loaded)
                return {"missing": name, "loaded": names}
            tensors, zero, dtype = _lora(model, manager, known[name][0], seed)
            return {**fp.make(fp.LORA, dtype, seed, tensors, zero), "adapter": name, "path": known[name][1]}
