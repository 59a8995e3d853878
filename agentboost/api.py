"""The Python API: the GRPO training workflow of the guide our users follow (configure, train,
monitor, evaluate, export), on the local backend.

    from agentboost import GRPOConfig, train
    run = train(GRPOConfig(n_iterations=20, batch_size=8, n_trajectories_per_query=4, learning_rate=1e-4),
                training_data=[{"query": "What is 17 + 25?", "expected_outcome": "42"}, ...],
                evaluation_data=[...], agent=StrandsAgentSpec(...), reward="exact_answer")
    run.status(); run.evaluate(); run.export_trajectories("succ.jsonl", success_only=True)

The guide's names map onto the training configuration (``GRPO_KEYS``); every other training key
can be given with its dotted name in ``overrides``. The rollout pieces (``StrandsAgentSpec``,
``StrandsProcessPool``, ``StrandsEnv``, the reward registry) stay usable on their own from a custom
trainer.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from .agents.strands_agent import StrandsAgentSpec
from .errors import InputError
from .files import atomic_write_text, iter_jsonl

# the guide's GRPOConfig names -> agentboost's training configuration keys
GRPO_KEYS = {
    "n_iterations": "run.steps",
    "batch_size": "data.tasks_per_step",
    "n_trajectories_per_query": "data.group_size",
    "learning_rate": "optim.lr",
    "max_budget_usd": "run.max_cost",
    "cost_per_hour_usd": "run.cost_per_hour",
    "checkpoint_interval": "run.checkpoint_every",
    "max_steps_per_trajectory": "agent.max_model_calls",
    "gamma": "algorithm.gamma",
}


class APIError(InputError):
    pass


def _default(name: str) -> Any:
    """The training configuration's default for the guide's ``name``: one set of defaults."""
    from .run.config import TrainConfig
    from .schema import default_of, hints

    section, key = GRPO_KEYS[name].split(".")
    return default_of(hints(TrainConfig)[section], key)


@dataclasses.dataclass
class GRPOConfig:
    """The guide's names for training keys (``GRPO_KEYS``); each default is the key's own."""
    n_iterations: int = _default("n_iterations")
    batch_size: int = _default("batch_size")
    n_trajectories_per_query: int = _default("n_trajectories_per_query")
    learning_rate: float = _default("learning_rate")
    max_budget_usd: float = _default("max_budget_usd")  # 0: no budget; with cost_per_hour_usd the run stops there
    cost_per_hour_usd: float = _default("cost_per_hour_usd")
    checkpoint_interval: int = _default("checkpoint_interval")
    max_steps_per_trajectory: int | None = None  # None: the agent's max_model_calls
    gamma: float = _default("gamma")
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)  # any training key, dotted

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GRPOConfig":
        """From the guide's JSON shape; an unknown name is an error naming the closest valid one."""
        if not isinstance(d, dict):
            raise APIError(f"config must be an object of GRPOConfig fields, got {type(d).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in d:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
                raise APIError(f"unknown GRPOConfig field {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                               + f" (fields: {', '.join(names)})")
        overrides = d.get("overrides", {})
        if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
            raise APIError("config.overrides must be an object of dotted keys, e.g. {\"optim.lr\": 1e-5}")
        return cls(**d)

    def training_overrides(self) -> list[str]:
        """The guide's names as dotted training overrides, then ``overrides``."""
        out = [f"{key}={json.dumps(getattr(self, name))}" for name, key in GRPO_KEYS.items()
               if getattr(self, name) is not None]
        return out + [f"{k}={json.dumps(v)}" for k, v in self.overrides.items()]

    def agent_overrides(self, agent: dict[str, Any]) -> list[str]:
        """An agent's configuration keys (``agentboost config``'s ``agent.*``) as dotted overrides,
        for the Python API and the job service alike: a key that is not an agent key, or a call
        limit other than ``max_steps_per_trajectory``, is refused naming both."""
        from .agents.config import AgentConfig

        if not isinstance(agent, dict):
            raise APIError(f"agent must be an object of agent keys, got {type(agent).__name__}")
        names = [f.name for f in dataclasses.fields(AgentConfig)]
        unknown = [k for k in agent if k not in names]
        if unknown:
            raise APIError(f"agent: unknown keys {unknown}; agent keys: {', '.join(names)}")
        calls = self.max_steps_per_trajectory
        if calls is not None and agent.get("max_model_calls", calls) != calls:
            raise APIError(f"two call limits: GRPOConfig.max_steps_per_trajectory={calls} and the agent's "
                           f"max_model_calls={agent['max_model_calls']}; set one of them")
        return [f"agent.{k}={json.dumps(v)}" for k, v in agent.items()]


def task_rows(data: Iterable[dict[str, Any]] | str | Path, where: str) -> list[dict[str, Any]]:
    """The guide's rows (``query``, ``expected_outcome``) or agentboost task rows (``question``,
    optional ``answer`` and any other field), from a list or a task file."""
    if isinstance(data, (str, Path)):
        from .tasks import load_tasks

        return load_tasks(data)
    rows = []
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise APIError(f"{where}[{i}]: expected a dict, got {type(row).__name__}")
        row = dict(row)
        if "question" not in row:
            if "query" not in row:
                raise APIError(f"{where}[{i}]: needs 'query' (the guide's shape) or 'question'; fields: {sorted(row)}")
            row["question"] = row.pop("query")
            if "expected_outcome" in row:
                row["answer"] = row.pop("expected_outcome")
        if not isinstance(row["question"], str) or not row["question"].strip():
            raise APIError(f"{where}[{i}]: the query/question must be non-empty text")
        row.setdefault("task_id", f"{where}-{i}")
        rows.append(row)
    if not rows:
        raise APIError(f"{where} is empty")
    return rows


def _import_path(reward: str | Callable) -> str:
    """A name the worker processes can resolve: a reward registered here by user code, or a
    function, becomes its import path (``rewards.registry.portable_reward``)."""
    from .rewards.registry import portable_reward

    return portable_reward(reward)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


class Run:
    """A training run, read from its directory (so a handle can be made for any run)."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)

    def _rows(self, name: str) -> list[dict[str, Any]]:
        path = self.run_dir / name
        return [r for _, r in iter_jsonl(path)] if path.is_file() else []

    def status(self) -> dict[str, Any]:
        """Progress, loss, validation accuracy, the best checkpoint and budget used, from the run's files."""
        import yaml

        from .run.checkpoint import best_checkpoint
        from .run.metrics import validation_figure

        cfg = yaml.safe_load((self.run_dir / "config.yaml").read_text()) if (self.run_dir / "config.yaml").is_file() else {}
        run = (cfg or {}).get("run", {})
        steps = self._rows("metrics.jsonl")
        val = self._rows("validation.jsonl")
        last = steps[-1] if steps else {}
        elapsed = last.get("elapsed_s", 0.0)
        cost = elapsed / 3600 * run.get("cost_per_hour", 0.0)
        done = (self.run_dir / "result.json").is_file()
        best = best_checkpoint(self.run_dir)
        return {"run_dir": str(self.run_dir), "state": "completed" if done else ("running" if steps else "starting"),
                "step": last.get("step", 0), "total_steps": run.get("steps"), "loss": last.get("loss"),
                "reward_mean": last.get("reward_mean"), "validation_accuracy": val[-1].get("val_pass@1") if val else None,
                # what validation_accuracy is: pass@1 from how many tasks x samples, at which temperature
                "validation": validation_figure(val[-1] if val else None),
                "budget_used_usd": cost, "budget_limit_usd": run.get("max_cost") or None, "elapsed_s": elapsed,
                # the checkpoint validation picked (``RUN_DIR:best`` in eval, export-model, serve)
                "best_checkpoint": best["checkpoint"] if best else None,
                "best_validation_accuracy": best["value"] if best else None}

    def evaluate(self, baseline: str | None = None, tasks: str | Path | None = None, samples: int | None = None,
                 alpha: float = 0.05, seed: int = 0, out_dir: str | Path | None = None,
                 checkpoint: str | None = None) -> dict[str, Any]:
        """The run's best checkpoint (the newest intact one if validation picked none; or
        ``checkpoint``: ``best``, ``latest``, ``step_000012``) against ``baseline`` (default: its
        base model) on its validation tasks (or ``tasks``), with the paired significance test of
        ``agentboost eval``."""
        from .evaluation.evaluate import evaluate
        from .run.assembly import config_for
        from .run.checkpoint import best_checkpoint
        from .tasks import load_tasks

        cfg = config_for(str(self.run_dir), None)
        task_file = tasks or cfg.data.val_file
        if not task_file:
            raise APIError("the run has no validation tasks: give tasks=")
        if checkpoint is None and best_checkpoint(self.run_dir) is not None:
            checkpoint = "best"
        model = f"{self.run_dir}:{checkpoint}" if checkpoint else str(self.run_dir)
        return evaluate(model, baseline or cfg.model.path, load_tasks(task_file), cfg,
                        samples=samples or cfg.validation.k, seed=seed, alpha=alpha,
                        out_dir=out_dir or self.run_dir / "eval", log=lambda m: None)

    def export_trajectories(self, out: str | Path, success_only: bool = False, min_reward: float | None = None,
                            limit: int | None = None, include_validation: bool = False) -> int:
        from .trainer.export import export_run

        return export_run(self.run_dir, out, min_reward=min_reward, success_only=success_only, limit=limit,
                          include_validation=include_validation)


def train(config: GRPOConfig | dict[str, Any], training_data, evaluation_data=None,
          agent: StrandsAgentSpec | None = None, reward: str | Callable = "exact_answer",
          run_dir: str | Path | None = None, log=print) -> Run:
    """Train on the local backend (blocking) and return the run's handle. ``training_data`` /
    ``evaluation_data``: the guide's rows, agentboost task rows, or a task file."""
    from .rollout.pool import ensure_not_spawning

    ensure_not_spawning("agentboost.train")
    cfg_in = GRPOConfig.from_dict(config) if isinstance(config, dict) else config
    run_dir = Path(run_dir or f"runs/api-{time.strftime('%Y%m%d-%H%M%S')}")
    if (run_dir / "config.yaml").exists():
        raise APIError(f"{run_dir} already holds a run; give another run_dir (or resume it with Trainer)")
    created = not run_dir.exists()
    try:
        trainer = _prepared_trainer(cfg_in, run_dir, training_data, evaluation_data, reward, agent, log)
    except BaseException:
        if created:  # a refused run leaves nothing behind
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    trainer.run()  # writes result.json when the run ends cleanly
    return Run(run_dir)


def _prepared_trainer(cfg_in: "GRPOConfig", run_dir: Path, training_data, evaluation_data, reward, agent, log):
    from .trainer.dispatch import trainer_for

    cfg = training_config(cfg_in, run_dir, training_data, evaluation_data, reward, agent)
    return trainer_for(cfg, run_dir, log=log)  # algorithm.policy: weights or prompt


def training_config(cfg_in: "GRPOConfig", run_dir: Path, training_data, evaluation_data=None,
                    reward: str | Callable = "exact_answer", agent=None):
    """The run's configuration from the API's arguments: the task files written under
    ``run_dir/data``, the agent spec's keys as the configuration's agent section (every field of
    the spec reaches the run: what it says is what trains), the guide's names, ``overrides``."""
    from .run.config import load_config

    data_dir = Path(run_dir) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    _write_jsonl(data_dir / "train.jsonl", task_rows(training_data, "training_data"))
    overrides = [f"data.train_file={json.dumps(str((data_dir / 'train.jsonl').resolve()))}",
                 f"reward.name={json.dumps(_import_path(reward))}"]
    if evaluation_data is not None:
        _write_jsonl(data_dir / "val.jsonl", task_rows(evaluation_data, "evaluation_data"))
        overrides.append(f"data.val_file={json.dumps(str((data_dir / 'val.jsonl').resolve()))}")
    if agent is not None:
        from .agents.config import AgentConfig
        from .schema import default_of

        agent.validate()
        keys = agent.as_config()
        if cfg_in.max_steps_per_trajectory is not None and keys["max_model_calls"] == default_of(AgentConfig,
                                                                                                 "max_model_calls"):
            # the guide sets the limit in GRPOConfig and leaves the agent's at its default: no
            # conflict, GRPOConfig's is meant; two different limits set on purpose are one
            del keys["max_model_calls"]
        overrides += cfg_in.agent_overrides(keys)
    cfg = load_config(None, overrides + cfg_in.training_overrides())
    if evaluation_data is None:
        cfg.validation.at_start = False
    return cfg


def evaluate(run: Run | str | Path, **kwargs) -> dict[str, Any]:
    return (run if isinstance(run, Run) else Run(run)).evaluate(**kwargs)


def export_trajectories(run: Run | str | Path, out: str | Path, **kwargs) -> int:
    return (run if isinstance(run, Run) else Run(run)).export_trajectories(out, **kwargs)
