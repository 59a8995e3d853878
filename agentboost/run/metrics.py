"""Run outputs: ``metrics.jsonl`` (one line per step), ``validation.jsonl``, TensorBoard, W&B when
configured, and PNG plots (``agentboost plot RUN_DIR`` redraws them)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..episodes.passk import pass_at_k
from ..episodes.summary import ci95_text
from ..files import atomic_write_text, iter_jsonl, open_append


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


def validation_sample(cfg, tasks: int, episodes: int, aborted: int = 0) -> dict[str, Any]:
    """What a validation's figures are estimated from, logged beside them (``validation.jsonl``), so
    that every report names its figure the same way (``validation_figure``)."""
    return {"val_tasks": tasks, "val_samples_per_task": cfg.validation.k, "val_episodes": episodes,
            "val_aborted": aborted, "val_temperature": cfg.validation.temperature,
            "val_tasks_file": cfg.data.val_file}


def validation_metrics(cfg, step: int, episodes: list) -> dict[str, Any]:
    """A validation's figures from its episodes, the same for both trainers: pass@1 and pass@k per
    task (``validation.k`` samples each), the mean reward, tool use, reasoning and splits, and what
    they were estimated from. An aborted episode (the serving side was down) is no outcome: it is
    counted in ``val_aborted`` and left out of every figure, never scored as a failure; a task it
    leaves with fewer than k outcomes is left out of pass@k (pass@k of k trials needs k)."""
    import numpy as np

    from ..episodes.summary import reasoning_metrics, split_metrics, success_ci95, tool_use_metrics

    k = cfg.validation.k
    aborted = sum(ep.aborted for ep in episodes)
    episodes = [ep for ep in episodes if not ep.aborted]
    by_task: dict[str, list] = {}
    for ep in episodes:
        by_task.setdefault(ep.task_id, []).append(ep)
    p1 = [pass_at_k(len(eps), sum(e.succeeded for e in eps), 1) for eps in by_task.values()]
    # pass@k needs k outcomes of a task: one that an outage left with fewer is out of pass@k only
    pk = [pass_at_k(len(eps), sum(e.succeeded for e in eps), k) for eps in by_task.values() if len(eps) >= k]
    rewards = [ep.reward for ep in episodes if ep.reward is not None]
    return {"step": step, "val_reward_mean": float(np.mean(rewards)) if rewards else None,
            "val_pass@1": float(np.mean(p1)) if p1 else None, f"val_pass@{k}": float(np.mean(pk)) if pk else None,
            **validation_sample(cfg, len(by_task), len(episodes), aborted),
            **{f"val_{name}": v for name, v in tool_use_metrics(episodes).items()},
            "val_success_ci95": success_ci95(episodes),
            **{f"val_{name}": v for name, v in reasoning_metrics(episodes).items()},
            **{f"val_{name}": v for name, v in split_metrics(episodes).items()}}


def validation_summary(m: dict[str, Any]) -> dict[str, Any]:
    """The line of a validation a run's result keeps (first and last): step, pass@1, tool-call rate,
    episodes, and the figure named for what it is."""
    return {"step": m["step"], "pass@1": m["val_pass@1"], "tool_call_rate": m["val_tool_call_rate"],
            "episodes": m["val_episodes"], "figure": figure_text(validation_figure(m))}


def validation_figure(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """One validation's success figure, named for what it is: pass@1 estimated from
    ``samples_per_task`` samples on each of ``tasks`` held-out tasks, greedy or sampled at
    ``temperature``. ``Run.status()``, the job service's status and the train summary give it so;
    ``agentboost eval`` names its own figure the same way (``tasks x samples, temperature``), and
    the two agree only on the same tasks, samples and temperature."""
    if not row:
        return None
    t = row.get("val_temperature")
    return {"name": "validation pass@1", "value": row.get("val_pass@1"), "step": row.get("step"),
            "tasks": row.get("val_tasks"), "samples_per_task": row.get("val_samples_per_task"),
            "episodes": row.get("val_episodes"), "aborted": row.get("val_aborted", 0),
            "temperature": t, "sampling": None if t is None else ("greedy" if t == 0 else "sampled"),
            "tasks_file": row.get("val_tasks_file"), "ci95": row.get("val_success_ci95")}


def rate_text(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.3f}"


def figure_text(fig: dict[str, Any] | None) -> str:
    """``pass@1 0.375 ± 0.171 (8 tasks x 4 samples at temperature 0.7, 32 episodes)``."""
    if fig is None:
        return "no validation yet"
    how = "greedy" if fig["sampling"] == "greedy" else (f"at temperature {fig['temperature']:g}"
                                                        if fig["temperature"] is not None else "")
    src = f"{fig['tasks']} tasks x {fig['samples_per_task']} samples {how}".strip() if fig["tasks"] is not None \
        else "tasks not recorded"
    aborted = f", {fig['aborted']} aborted left out" if fig.get("aborted") else ""
    ci = ci95_text(fig["ci95"], fig["episodes"] or 0)
    return f"pass@1 {rate_text(fig['value'])} {ci} ({src}, {fig['episodes']} episodes{aborted})"


class MetricsLogger:
    def __init__(self, run_dir: Path, cfg, truncate_after_step: int = 0):
        self.run_dir = run_dir
        for name in ("metrics.jsonl", "validation.jsonl"):
            # a resumed run repeats the steps after its last checkpoint: drop their old lines
            path = run_dir / name
            kept = [r for r in _read_jsonl(path) if r["step"] <= truncate_after_step]
            atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))  # a kill here keeps the old file
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
        with open_append(self.run_dir / name) as f:
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
        with open_append(self.run_dir / "events.jsonl") as f:
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
