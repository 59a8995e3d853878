"""A peft LoRA model's weights with the adapter merged in, computed out of place.

For samplers that serve plain weights (vLLM's full-weight reload): the trainer's own model is not
touched (merging in place and unmerging again would add rounding to the frozen base weights at
every step)."""

from __future__ import annotations

from pathlib import Path

import torch


def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """The base model's state dict under its own (Hugging Face) names, every LoRA-wrapped weight
    replaced by W + scale * B @ A of the active adapter."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        d = module.get_delta_weight(adapter)
                        deltas[name] = d if name not in deltas else deltas[name] + d
        out = {}
        for key, value in base.state_dict().items():
            if "lora_" in key:
                continue
            module, _, leaf = key.rpartition(".")
            if module.endswith(".base_layer"):
                owner = module[: -len(".base_layer")]
                key = f"{owner}.{leaf}"
                if leaf == "weight" and owner in deltas:
                    value = value + deltas[owner].to(value.dtype)
            out[key] = value
    return out


def save_merged(model, directory: str | Path) -> None:
    """A loadable model directory (config and safetensors) of ``model`` with its adapter merged."""
    model.get_base_model().save_pretrained(str(directory), state_dict=merged_state_dict(model),
                                           safe_serialization=True)
