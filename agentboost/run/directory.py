"""A run directory's life, shared by the weights trainer (``trainer/loop.py``) and the prompt trainer
(``trainer/prompt/loop.py``): the saved configuration a resume reads, and the directory made ready
(only after every check has passed, so a refused run leaves nothing behind)."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from ..files import clean_temporaries, drop_torn_tail
from .checkpoint import CheckpointError
from .config import TrainConfig, config_from_dict, save_config


def saved_config(run_dir: Path) -> TrainConfig:
    """The configuration a run was started with (``--resume`` continues with exactly that)."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        raise CheckpointError(f"{run_dir} is not a run directory (it has no config.yaml); "
                              "--resume takes the --run-dir of an earlier `agentboost train`")
    import yaml

    return config_from_dict(yaml.safe_load(saved.read_text()))


def prepare_run_dir(cfg: TrainConfig, run_dir: Path, resume: bool, log=print) -> None:
    """Create the run directory and its ``episodes/``, remove what a killed run's atomic writes and
    appends left (temporaries, a torn last line), and save the configuration of a new run; an unwritable directory is one ``InputError``."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "episodes").mkdir(exist_ok=True)
        # every folder of the run: a kill also lands in the vLLM engine's merged-weights and adapter writes
        # (run_dir/vllm), each hundreds of MB that nothing else would ever remove
        for d in [run_dir, *sorted(p for p in run_dir.rglob("*") if p.is_dir() and not p.is_symlink())]:
            for name in clean_temporaries(d):
                log(f"removed {d / name}, left by an interrupted write")
        # a kill in the middle of an append left a line without its end (a resume, or the same command
        # again in the directory of a run stopped before its first checkpoint): it goes
        for path in sorted([*run_dir.glob("*.jsonl"), *(run_dir / "episodes").glob("*.jsonl")]):
            if (cut := drop_torn_tail(path)):
                log(f"removed the torn last line of {path} ({cut} bytes, left by an interrupted write)")
        if not resume:
            save_config(cfg, run_dir / "config.yaml")
    except OSError as e:
        raise InputError(f"run directory {run_dir} cannot be written: {e.strerror}"
                         + (f" ({e.filename})" if e.filename else "")) from None


_EPISODE_FILE = re.compile(r"(?:val_)?step_(\d+)")


def set_aside_after(run_dir: Path, step: int) -> tuple[Path, list[str]]:
    """Move the episode files of steps after ``step`` (what a stopped attempt sampled past the
    checkpoint a resume starts from: no kept weights were trained on it) to
    ``abandoned/resume_at_step_N/`` (``..._N-2``, ... when a run is resumed at that step again), so
    that the steps run again are recorded once, not appended to the attempt's; nothing is deleted.
    (the folder, the names moved)."""
    base = run_dir / "abandoned" / f"resume_at_step_{max(step, 0):06d}"
    target, n = base, 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    moved = []
    for path in sorted((run_dir / "episodes").glob("*.jsonl")):
        m = _EPISODE_FILE.fullmatch(path.stem)
        if m and int(m.group(1)) > step:
            target.mkdir(parents=True, exist_ok=True)
            path.replace(target / path.name)
            moved.append(path.name)
    return target, moved
