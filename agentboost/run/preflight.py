"""The one check before a run: everything a run needs that the configuration's own validation
(types, choices, bounds: ``config.validate``) cannot see, because it lies outside the file: task
files readable and well-formed, the model findable, rewards, tools, agent factories and
conversations importable, the Prometheus port free, W&B credentials present, the code sandbox
able to isolate. ``train`` (and ``train --check``, which stops here), the Python API's trainer and
the job service's submission all call ``preflight``, before any model loads or run file is made,
so a bad run is refused with the same one line everywhere (``InputError``)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from ..errors import InputError
from .assembly import agent_spec, check_config_sandbox, environment
from .config import ConfigError, TrainConfig


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wandb_ready() -> str | None:
    """Why W&B logging cannot work here, or None."""
    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        return None
    if os.environ.get("WANDB_API_KEY"):
        return None
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    if netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace"):
        return None
    return ("run.wandb_project is set but no W&B credentials are here: set WANDB_API_KEY, run `wandb login`, "
            "or WANDB_MODE=offline")


def preflight(cfg: TrainConfig, where: str = "config", load_data: bool = True) -> list[str]:
    """Refuse (``InputError``, one line) what would fail later; the warnings to give at start
    (a weak sandbox allowed by the config)."""
    if load_data:
        from ..tasks import load_tasks

        for key in ("train_file", "val_file"):
            path = getattr(cfg.data, key)
            if path:
                if not os.path.exists(path):
                    raise ConfigError(f"{where}: data.{key} {path} does not exist")
                if not os.access(path, os.R_OK):
                    raise ConfigError(f"{where}: data.{key} {path} cannot be read")
                load_tasks(path, question_field=cfg.data.question_field)  # refuses bad or empty files by line
    from ..models.loading import check_device, check_model_path

    check_model_path(cfg.model.path)
    check_device(cfg.model.device)
    warm_start_tasks(cfg, where)  # every demonstrated task has a solution
    agent_spec(cfg).validate()
    environment(cfg).validate()
    if cfg.run.prometheus_port and not _port_free(cfg.run.prometheus_port):
        raise ConfigError(f"{where}: run.prometheus_port {cfg.run.prometheus_port} is in use; choose another "
                          "(or 0 for none)")
    if cfg.run.wandb_project:
        why = _wandb_ready()
        if why:
            raise ConfigError(f"{where}: {why}")
    warning = check_config_sandbox(cfg)
    return [warning] if warning else []


def warm_start_tasks(cfg: TrainConfig, where: str = "config") -> list[dict[str, Any]]:
    """The tasks to demonstrate, each with a valid ``solution``; [] without a warm start. Called by
    the preflight, so a task without a solution is refused before the model loads."""
    ws = cfg.warm_start
    if not ws.demonstrations:
        return []
    from ..agents.demonstrations import check_solution
    from ..tasks import load_tasks, not_a_file

    path = ws.tasks_file or cfg.data.train_file
    key = "warm_start.tasks_file" if ws.tasks_file else "data.train_file"
    problem = not_a_file(Path(path))
    if problem:
        raise ConfigError(f"{where}: {key} {path} {problem}")
    tasks = load_tasks(path, question_field=cfg.data.question_field)
    if len(tasks) < ws.demonstrations:
        raise ConfigError(f"{where}: warm_start.demonstrations is {ws.demonstrations} but {key} ({path}) "
                          f"holds {len(tasks)} tasks")
    chosen = tasks[: ws.demonstrations]
    for task in chosen:
        try:
            check_solution(task)
        except InputError as e:
            raise ConfigError(f"{where}: warm_start needs a 'solution' in each of the first "
                              f"{ws.demonstrations} tasks of {key} ({path}): {e}") from None
    return chosen
