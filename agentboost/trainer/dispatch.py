"""Which trainer a run uses: ``algorithm.policy`` names it (``weights``: ``loop.Trainer``; ``prompt``:
``prompt.loop.PromptTrainer``); a resumed run reads it from its saved configuration."""

from __future__ import annotations

from pathlib import Path

from ..run.config import TrainConfig


def trainer_for(cfg: TrainConfig | None, run_dir: str | Path, resume: bool = False, log=print):
    """The trainer ``algorithm.policy`` names: ``Trainer`` (weights) or ``PromptTrainer`` (a resumed
    run: its saved config's)."""
    from .loop import Trainer
    from .prompt.loop import PromptTrainer

    policy = cfg.algorithm.policy if cfg is not None else None
    if resume:
        import yaml

        saved = Path(run_dir) / "config.yaml"
        data = yaml.safe_load(saved.read_text()) if saved.is_file() else {}
        policy = ((data or {}).get("algorithm") or {}).get("policy", "weights")
    cls = PromptTrainer if policy == "prompt" else Trainer
    return cls(cfg, run_dir, resume=resume, log=log)

