"""Loading a policy: an embedded model by name (prepared into the cache on first use) or any
Hugging Face model directory by path, with the attention implementation suited to the device."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .embedded import EMBEDDED_MODELS, ModelNotFoundError, prepare_embedded


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _hub_id(name: str) -> bool:
    return bool(_HUB_ID.fullmatch(name)) and not Path(name).expanduser().exists()


def _hub_cached(repo_id: str) -> Path | None:
    """The hub model's snapshot in the local Hugging Face cache, or None."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached (the hub's own exception types vary by version)
        return None


def _hub_unreachable(repo_id: str) -> str | None:
    """Why ``repo_id`` cannot be downloaded here, or None."""
    from huggingface_hub import constants, model_info

    if constants.HF_HUB_OFFLINE:
        return "downloads are off (HF_HUB_OFFLINE=1)"
    try:
        model_info(repo_id, timeout=10)
    except Exception as e:
        return f"the hub cannot be reached or has no such model ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    return None


def _hub_snapshot(repo_id: str, download: bool) -> Path | None:
    """The hub model's directory in the local Hugging Face cache; not cached: downloaded first
    (``download``, with progress bars) or None when it could be, ``ModelNotFoundError`` saying how
    to fetch it when it cannot be downloaded here."""
    cached = _hub_cached(repo_id)
    if cached is not None:
        return cached
    why = _hub_unreachable(repo_id)
    if why:
        from huggingface_hub import constants

        raise ModelNotFoundError(
            f"model {repo_id!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and cannot be "
            f"downloaded here: {why}; fetch it where the network allows (`huggingface-cli download {repo_id}`) "
            "and copy that cache here (or set HF_HUB_CACHE), or give model.path a model directory")
    if not download:
        return None
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id))  # resumable


def resolve_model_path(name_or_path: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """An embedded model name (prepared on first use), a Hugging Face model directory, or a hub id
    (``org/name``: from the local Hugging Face cache, downloaded first, with progress, where the
    network allows)."""
    if name_or_path in EMBEDDED_MODELS:
        return prepare_embedded(name_or_path, cache_dir)
    if _hub_id(name_or_path):
        _hub_snapshot(name_or_path, download=True)
    return check_model_path(name_or_path)


def check_model_path(name_or_path: str) -> Path | None:
    """Whether a model can be found, without preparing, downloading or loading it: None for an
    embedded name or a hub id that is not cached yet but can be downloaded, else the directory
    (``ModelNotFoundError`` naming what is wrong)."""
    if name_or_path in EMBEDDED_MODELS:
        return None
    if _hub_id(name_or_path):
        cached = _hub_snapshot(name_or_path, download=False)
        if cached is None:
            return None
        name_or_path = str(cached)
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


def torch_device(device: str = "auto") -> str:
    """``model.device`` as a torch device: auto is the first CUDA GPU when there is one, else cpu."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def torch_dtype(dtype: Any = "float32", device: str = "cpu"):
    """``model.dtype`` as a torch dtype: auto is bfloat16 on a GPU that has it, else float32."""
    import torch

    if not isinstance(dtype, str):
        return dtype or torch.float32
    if dtype == "auto":
        cuda = str(device).startswith("cuda") and torch.cuda.is_available()
        return torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def check_device(device: str) -> None:
    """Refuse, in one line (``InputError``), a device this machine does not have."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"model.device {device}: no CUDA GPU here (torch {torch.__version__}, "
                             f"CUDA build: {torch.version.cuda is not None}); use auto or cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise InputError(f"model.device {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")


def load_policy(name_or_path: str, cache_dir=None, dtype=None, tokenizer: str | None = None, device: str = "auto"):
    """Load (model, tokenizer) for generation or training, on ``device`` (``model.device``) in
    ``dtype`` (``model.dtype``: a name or a torch dtype; float32 by default); ``tokenizer`` for
    weights saved without one (a full fine-tuning checkpoint)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name_or_path, cache_dir)
    tok = AutoTokenizer.from_pretrained(tokenizer or str(path))
    where = torch_device(device)
    kwargs = {}
    if not where.startswith("cuda"):
        from .cpu_attention import register

        kwargs["attn_implementation"] = register()
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype(dtype, where), **kwargs)
    model.to(where)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.eval()
    return model, tok
