"""``agentboost export-model RUN_DIR[:CHECKPOINT] --out DIR``: a checkpoint as a plain Hugging Face
model directory (the LoRA adapter merged into the base weights, the tokenizer and its chat template
beside them) that ``transformers`` and ``vllm serve`` load as is, with no agentboost and no peft.

The merge is ``models.lora_merge.merged_state_dict`` (W + scale * B @ A, out of place), the one the
vLLM engine's merged weight sync uses, so an exported model samples what the served checkpoint does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..files import atomic_directory
from ..run.assembly import load_policy_spec

EXPORT_INFO = "agentboost_export.json"


def export_model(spec: str, out: str | Path, overwrite: bool = False) -> dict[str, Any]:
    """Write ``spec`` (a run's checkpoint, or any model agentboost loads) to ``out``; returns what
    was written: the source, its description, whether a LoRA adapter was merged."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise InputError(f"--out {out} exists and is not empty; choose another or pass --overwrite")
    model, tok, desc, _ = load_policy_spec(spec)
    merged = hasattr(model, "peft_config")
    with atomic_directory(out) as tmp:
        if merged:
            from ..models.lora_merge import save_merged

            save_merged(model, tmp)
        else:
            model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        info = {"source": spec, "description": desc, "merged_lora": merged}
        (tmp / EXPORT_INFO).write_text(json.dumps(info, indent=1))
    return {**info, "out": str(out)}
