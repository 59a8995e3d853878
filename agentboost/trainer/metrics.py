"""Run outputs: ``metrics.jsonl`` (one line per step), ``validation.jsonl``, TensorBoard, W&B when
configured, and PNG plots (``agentboost plot RUN_DIR`` redraws them)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..files import iter_jsonl


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path)] if path.is_file() else []


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
            out[prefix + k] = float(v)
    return out


class MetricsLogger:
    def __init__(self, run_dir: Path, cfg, truncate_after_step: int = 0):
        self.run_dir = run_dir
        for name in ("metrics.jsonl", "validation.jsonl"):
            # a resumed run repeats the steps after its last checkpoint: drop their old lines
            path = run_dir / name
            kept = [r for r in _read_jsonl(path) if r["step"] <= truncate_after_step]
            path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.tb = None
        if cfg.run.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=truncate_after_step + 1)
        self.wandb = None
        if cfg.run.wandb_project:
            import wandb

            self.wandb = wandb.init(project=cfg.run.wandb_project, dir=str(run_dir), config=cfg.to_dict(),
                                    resume="allow", id=run_dir.name)

    def _write(self, name: str, row: dict[str, Any], prefix: str) -> None:
        with open(self.run_dir / name, "a") as f:
            f.write(json.dumps(row) + "\n")
        flat = _flat({k: v for k, v in row.items() if k != "step"}, prefix)
        if self.tb is not None:
            for k, v in flat.items():
                self.tb.add_scalar(k, v, row["step"])
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(flat, step=row["step"])

    def log_step(self, row: dict[str, Any]) -> None:
        self._write("metrics.jsonl", row, "train/")

    def log_validation(self, row: dict[str, Any]) -> None:
        self._write("validation.jsonl", row, "val/")

    def log_event(self, row: dict[str, Any]) -> None:
        """The run's events in ``events.jsonl``, the durable record that webhooks and the events
        stream are fed from, never truncated: progress (each step), checkpoint, budget_warning
        (75%, 90%), resume, and how the run ended (completed, cancelled, failed)."""
        with open(self.run_dir / "events.jsonl", "a") as f:
            f.write(json.dumps({"time": time.time(), **row}) + "\n")

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def draw_plots(run_dir: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    train = _read_jsonl(run_dir / "metrics.jsonl")
    val = _read_jsonl(run_dir / "validation.jsonl")
    if not train and not val:
        raise FileNotFoundError(f"{run_dir} has no metrics.jsonl or validation.jsonl to plot")
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        ax.plot([r["step"] for r in train], [r["reward_mean"] for r in train], label="training reward (mean)")
        ax.plot([r["step"] for r in train], [r["success_rate"] for r in train], label="training success rate", alpha=0.6)
    if val:
        ax.plot([r["step"] for r in val], [r["val_pass@1"] for r in val], "o-", label="validation pass@1")
    ax.set_xlabel("step")
    ax.set_ylabel("score")
    ax.set_title(run_dir.name)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out_dir / "reward.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths = [path]
    if any("tool_call_rate" in r for r in train) or any("val_tool_call_rate" in r for r in val):
        fig, ax = plt.subplots(figsize=(7, 4))
        rows = [r for r in train if "tool_call_rate" in r]
        if rows:
            ax.plot([r["step"] for r in rows], [r["tool_call_rate"] for r in rows], label="training tool-call rate")
            if all("tool_success_rate" in r for r in rows):
                ax.plot([r["step"] for r in rows], [r["tool_success_rate"] for r in rows], alpha=0.6,
                        label="training tool-success rate")
        rows = [r for r in val if "val_tool_call_rate" in r]
        if rows:
            ax.plot([r["step"] for r in rows], [r["val_tool_call_rate"] for r in rows], "o-", label="validation tool-call rate")
        ax.set_xlabel("step")
        ax.set_ylabel("rate")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{run_dir.name}: tool use")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        paths.append(out_dir / "tool_use.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths
