"""Loading a policy: an embedded model by name (prepared into the cache on first use) or any
Hugging Face model directory by path, with the attention implementation suited to the device."""

from __future__ import annotations

import os
from pathlib import Path

from .embedded import EMBEDDED_MODELS, ModelNotFoundError, prepare_embedded


def resolve_model_path(name_or_path: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """An embedded model name (prepared on first use) or a Hugging Face model directory."""
    if name_or_path in EMBEDDED_MODELS:
        return prepare_embedded(name_or_path, cache_dir)
    return check_model_path(name_or_path)


def check_model_path(name_or_path: str) -> Path | None:
    """Whether a model can be found, without preparing or loading it: None for an embedded name,
    else the directory (``ModelNotFoundError`` naming what is wrong)."""
    if name_or_path in EMBEDDED_MODELS:
        return None
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise ModelNotFoundError(
            f"model {name_or_path!r} is neither an embedded model "
            f"({', '.join(sorted(EMBEDDED_MODELS))}) nor an existing directory"
        )
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"model directory {path} has no config.json (expected a Hugging Face model directory)")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelNotFoundError(f"model directory {path} has no weights (*.safetensors or *.bin)")
    return path


def load_policy(name_or_path: str, cache_dir=None, dtype=None, tokenizer: str | None = None):
    """Load (model, tokenizer) for generation or training; ``tokenizer`` for weights saved without
    one (a full fine-tuning checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name_or_path, cache_dir)
    tok = AutoTokenizer.from_pretrained(tokenizer or str(path))
    kwargs = {}
    if not torch.cuda.is_available():
        from .cpu_attention import register

        kwargs["attn_implementation"] = register()
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype or torch.float32, **kwargs)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.eval()
    return model, tok
