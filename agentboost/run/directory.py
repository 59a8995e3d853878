"""A run directory's life, shared by the weights trainer (``trainer/loop.py``) and the prompt trainer
(``trainer/prompt/loop.py``): the saved configuration a resume reads, and the directory made ready
(only after every check has passed, so a refused run leaves nothing behind)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..files import clean_temporaries
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
    """Create the run directory and its ``episodes/``, remove what a killed run's atomic writes left,
    and save the configuration of a new run; an unwritable directory is one ``InputError``."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "episodes").mkdir(exist_ok=True)
        for d in (run_dir, run_dir / "checkpoints"):
            for name in clean_temporaries(d):
                log(f"removed {d / name}, left by an interrupted write")
        if not resume:
            save_config(cfg, run_dir / "config.yaml")
    except OSError as e:
        raise InputError(f"run directory {run_dir} cannot be written: {e.strerror}"
                         + (f" ({e.filename})" if e.filename else "")) from None
