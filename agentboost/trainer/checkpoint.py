"""Atomic checkpoints: a checkpoint directory is written under a temporary name and renamed into
place when complete; ``latest`` is replaced atomically afterwards. A run killed at any moment
leaves the previous checkpoint intact and ``latest`` pointing at a complete one."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

COMPLETE = "COMPLETE"


def _rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run_dir: Path, step: int, model, optimizer, scheduler, trainer_state: dict[str, Any],
                    lora: bool, keep: int = 2) -> Path:
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".step_{step:06d}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    if lora:
        model.save_pretrained(tmp / "adapter")
    else:
        model.save_pretrained(tmp / "model", safe_serialization=True)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(_rng_state(), tmp / "rng.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({**trainer_state, "step": step}))
    (tmp / COMPLETE).write_text("")
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    pointer = root / ".latest.tmp"
    pointer.write_text(final.name)
    os.replace(pointer, root / "latest")
    old = sorted(p for p in root.glob("step_*") if p.is_dir() and p != final)
    for p in old[: max(0, len(old) - (keep - 1))]:
        shutil.rmtree(p, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = run_dir / "checkpoints"
    pointer = root / "latest"
    if not pointer.is_file():
        return None
    path = root / pointer.read_text().strip()
    if not (path / COMPLETE).is_file():
        raise RuntimeError(f"checkpoint {path} named by {pointer} is incomplete")
    return path


def load_checkpoint(path: Path, model, optimizer, scheduler, lora: bool) -> dict[str, Any]:
    if lora:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(model, load_file(str(path / "adapter" / "adapter_model.safetensors")))
    else:
        from safetensors.torch import load_file

        state = {}
        for f in sorted((path / "model").glob("*.safetensors")):
            state.update(load_file(str(f)))
        model.load_state_dict(state, strict=False)
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    _set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return json.loads((path / "trainer_state.json").read_text())
