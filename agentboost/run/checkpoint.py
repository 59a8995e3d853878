"""Checkpoints that prove themselves.

A checkpoint directory is written under a temporary name; its last file is ``manifest.json``
(every file's size and SHA-256), then it is renamed into place and ``latest`` is replaced
atomically. Resuming verifies the manifest before loading anything: a damaged or incomplete
latest checkpoint is reported by name and the newest intact one is used. State files load with
``torch.load(weights_only=True)``: nothing in a checkpoint can run code.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..files import atomic_directory, atomic_write_text, check_manifest, file_manifest

COMPLETE = "COMPLETE"  # checkpoints written before manifests existed carry only this marker
MANIFEST = "manifest.json"


class CheckpointError(InputError):
    """No checkpoint can be resumed from; the message names each one tried and what is wrong."""


def _rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    # plain types and tensors only, so that it loads with weights_only=True
    return {"python": random.getstate(), "torch": torch.get_rng_state(),
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]}


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_tuples(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


def _tuples(x):
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


def write_manifest(root: Path) -> None:
    files = file_manifest(root, exclude=(MANIFEST,))
    atomic_write_text(root / MANIFEST, json.dumps({"format": 1, "files": files}, indent=1))


def verify_checkpoint(path: Path) -> str | None:
    """None when every file the manifest lists is present with its size and hash, else what is wrong."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        return None if (path / COMPLETE).is_file() else "incomplete (no manifest)"
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError, TypeError) as e:
        return f"unreadable manifest ({e})"
    if not files:
        return "the manifest lists no files"
    return check_manifest(path, files)




def save_checkpoint(run_dir: Path, step: int, model, optimizer, scheduler, trainer_state: dict[str, Any],
                    lora: bool, keep: int = 2, protect: tuple[str, ...] = ()) -> Path:
    """``keep`` newest checkpoints stay; the ones named in ``protect`` (the best) stay too."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    with atomic_directory(final) as tmp:
        if lora:
            model.save_pretrained(tmp / "adapter")
        else:
            model.save_pretrained(tmp / "model", safe_serialization=True)
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(_rng_state(), tmp / "rng.pt")
        (tmp / "trainer_state.json").write_text(json.dumps({**trainer_state, "step": step}))
        write_manifest(tmp)  # last: a checkpoint without it is incomplete
    atomic_write_text(root / "latest", final.name)
    old = sorted(p for p in root.glob("step_*") if p.is_dir() and p != final and p.name not in protect)
    for p in old[: max(0, len(old) - (keep - 1))]:
        shutil.rmtree(p, ignore_errors=True)
    return final


def latest_name(run_dir: str | Path) -> str | None:
    """The checkpoint ``checkpoints/latest`` names (``step_000012``), or None before the first."""
    pointer = Path(run_dir) / "checkpoints" / "latest"
    return pointer.read_text().strip() if pointer.is_file() else None


BEST = "best.json"  # in checkpoints/: the checkpoint validation picked, its step and its figure


def best_checkpoint(run_dir: str | Path) -> dict[str, Any] | None:
    """``{"checkpoint", "step", "metric", "value"}`` of the run's best checkpoint (the highest
    validation success rate, ties to the later step), or None before a validation picked one."""
    path = Path(run_dir) / "checkpoints" / BEST
    return json.loads(path.read_text()) if path.is_file() else None


def write_best(run_dir: str | Path, record: dict[str, Any]) -> None:
    atomic_write_text(Path(run_dir) / "checkpoints" / BEST, json.dumps(record))


def split_run_spec(spec: str) -> tuple[str, str | None]:
    """``RUN_DIR[:CHECKPOINT]`` -> (RUN_DIR, CHECKPOINT or None); anything that is not a run
    directory with a suffix (a model name, a hub id) comes back whole."""
    if ":" in spec and not (Path(spec) / "config.yaml").is_file():
        head, tail = spec.rsplit(":", 1)
        if (Path(head) / "config.yaml").is_file():
            return head, tail or None
    return spec, None


def resolve_checkpoint(run_dir: str | Path, name: str | None = None) -> Path:
    """A run's checkpoint by name: None or ``latest`` (the newest intact one), ``best`` (the one
    validation picked), ``step_000012`` or ``12``. The checkpoint must verify."""
    run_dir = Path(run_dir)
    if name in (None, "", "latest"):
        return newest_intact(run_dir)
    if name == "best":
        best = best_checkpoint(run_dir)
        if best is None:
            raise CheckpointError(f"{run_dir} has no best checkpoint: no validation picked one (the run needs "
                                  f"data.val_file and a validation after a checkpoint)")
        name = best["checkpoint"]
    elif name.isdigit():
        name = f"step_{int(name):06d}"
    path = run_dir / "checkpoints" / name
    if not name.startswith("step_") or not path.is_dir():
        have = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*") if p.is_dir())
        raise CheckpointError(f"{run_dir} has no checkpoint {name!r} (it has: {', '.join(have) or 'none'}; "
                              f"or give best or latest)")
    problem = verify_checkpoint(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} is damaged: {problem}")
    return path


def _candidates(run_dir: Path) -> list[Path]:
    """Checkpoints, newest first, the one ``latest`` names leading."""
    root = run_dir / "checkpoints"
    found = sorted((p for p in root.glob("step_*") if p.is_dir()), reverse=True)
    pointer = root / "latest"
    if pointer.is_file():
        named = root / pointer.read_text().strip()
        found = [named] + [p for p in found if p != named]
    return found


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
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    _set_rng_state(torch.load(path / "rng.pt", weights_only=True))
    return json.loads((path / "trainer_state.json").read_text())


def load_latest_intact(run_dir: Path, model, optimizer, scheduler, lora: bool) -> tuple[Path, dict[str, Any], list[str]]:
    """Load the newest checkpoint whose manifest verifies: (its path, its trainer state, one line
    for each newer checkpoint that was skipped and why)."""
    skipped: list[str] = []
    candidates = _candidates(run_dir)
    for path in candidates:
        problem = verify_checkpoint(path) if path.is_dir() else "does not exist"
        if problem is None:
            try:
                return path, load_checkpoint(path, model, optimizer, scheduler, lora), skipped
            except Exception as e:  # a verified file that still does not load: say so, try older
                problem = f"does not load: {type(e).__name__}: {e}"
        skipped.append(f"checkpoint {path.name} is damaged ({problem}); trying an older one")
    if not candidates:
        raise CheckpointError(f"{run_dir} has no checkpoint to resume from")
    raise CheckpointError(f"{run_dir} has no intact checkpoint: " + "; ".join(skipped))


def has_checkpoint(run_dir: Path) -> bool:
    """Whether the run wrote any checkpoint (intact or not): without one, a resume starts the run over."""
    return bool(_candidates(run_dir))


def newest_intact(run_dir: Path) -> Path:
    """The newest checkpoint of ``run_dir`` whose manifest verifies."""
    problems = []
    for path in _candidates(run_dir):
        problem = verify_checkpoint(path) if path.is_dir() else "does not exist"
        if problem is None:
            return path
        problems.append(f"{path.name}: {problem}")
    raise CheckpointError(f"{run_dir} has no intact checkpoint" + (f" ({'; '.join(problems)})" if problems else ""))


def load_policy_from_run(run_dir: Path, checkpoint: str | None = None):
    """(model, tokenizer, description, base model path) of a run's checkpoint (``checkpoint``: as
    ``resolve_checkpoint`` takes it; None: the newest intact one): the LoRA adapter on the run's
    base model, or the fully fine-tuned weights."""
    import yaml

    from ..models.loading import load_policy, resolve_model_path

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
    base = (cfg.get("model") or {}).get("path", "smollm2-135m-instruct")
    lora = (cfg.get("model") or {}).get("lora", True)
    ckpt = resolve_checkpoint(run_dir, checkpoint)
    base_path = str(resolve_model_path(base))
    if lora:
        from peft import PeftModel

        model, tok = load_policy(base_path)
        model = PeftModel.from_pretrained(model, str(ckpt / "adapter")).eval()
    else:
        model, tok = load_policy(str(ckpt / "model"), tokenizer=base_path)
    return model, tok, f"{run_dir} ({ckpt.name} on {base})", base_path
