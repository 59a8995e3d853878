"""Training jobs on disk: one directory per job, the job's state read from its files and its
process, so a job service can restart (or crash) without losing track of a job.

    <root>/token                  the bearer token (owner-only), made at first start
    <root>/<job_id>/job.json      name, creation time, process id and start time, cancel request
    <root>/<job_id>/config.yaml   the training configuration; data/ holds its task files
    <root>/<job_id>/run/          the run directory (metrics, checkpoints, episodes, result.json)
    <root>/<job_id>/log.txt       the job's console output
    <root>/<job_id>/exports/      trajectories exported on request

A job's status, evaluation and export answer with agentboost's keys and, beside them, the GRPO
guide's (``guide_status``, ``guide_evaluation``; docs/from-the-guide.md says how each is computed).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from ..api import GRPOConfig, Run, task_rows
from ..errors import InputError
from ..files import atomic_write_text, iter_jsonl
from ..run.metrics import validation_figure

# what a console prints that says nothing of why a job failed: progress bars (tqdm's "45%|####  | 9/20
# [00:01<00:02, 4.1it/s]", rich's bar characters), as the log holds them with their carriage returns,
# and terminal colour codes
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROGRESS = re.compile(r"\d+%\||\|\s*\d+/\d+\s*\[|\d+(?:\.\d+)?\s*(?:it|s)/(?:s|it)\b|[\u2580-\u259f\u2500-\u257f]{3,}")
REASON_BYTES = 2000


def failure_reason(job_dir: Path) -> str:
    """Why a job failed, in at most ``REASON_BYTES``: the run's own ``failed`` event (its one-line
    reason), else the end of the job's console output without its progress bars (a job that failed
    before its run began: a configuration error's one line, an internal error's traceback)."""
    failed = [e for _, e in iter_jsonl(job_dir / "run" / "events.jsonl", growing=True)
              if isinstance(e, dict) and e.get("event") == "failed"] if (job_dir / "run" / "events.jsonl").is_file() else []
    if failed and failed[-1].get("error"):
        return str(failed[-1]["error"])[:REASON_BYTES]
    log = job_dir / "log.txt"
    if not log.is_file():
        return ""
    text = _ANSI.sub("", log.read_text(errors="replace")[-200_000:])
    lines = [line.rstrip() for line in re.split(r"[\r\n]", text)]
    lines = [line for line in lines if line.strip() and not _PROGRESS.search(line)]
    out: list[str] = []
    for line in reversed(lines):  # the last lines, whole, up to the budget
        if sum(len(x) + 1 for x in out) + len(line) > REASON_BYTES:
            break
        out.append(line)
    return "\n".join(reversed(out))


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # always fullmatch: "$" would accept a final newline
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}-[0-9a-f]{8}")


class JobError(InputError):
    pass


class UnknownJob(JobError):
    pass


def check_name(value: Any, what: str) -> str:
    """Names that become file names: letters, digits, ``_ . -``; never a path."""
    if not isinstance(value, str) or not NAME.fullmatch(value) or ".." in value:
        raise JobError(f"{what} must be 1-64 characters of letters, digits, '_', '.', '-' (no path), got {value!r}")
    return value


def _proc_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ...]; field 19 is the start time."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_start(pid: int) -> str | None:
    fields = _proc_fields(pid)
    return fields[19] if fields else None


MAX_RESTARTS = 3  # resumes of one job after interruptions (``JobStore.recover``): a job that keeps dying stays failed


class JobStore:
    def __init__(self, root: str | Path, max_running: int = 2):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_running = max_running
        self._children: list[subprocess.Popen] = []  # jobs this store started, reaped when polled
        self._lock = threading.Lock()  # submissions and the queue's starter, from the service's threads

    def token(self) -> str:
        """The bearer token, made at first use and readable by its owner only."""
        path = self.root / "token"
        if not path.is_file():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
        os.chmod(path, 0o600)
        return path.read_text().strip()

    def _dir(self, job_id: Any) -> Path:
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            raise UnknownJob(f"no job {job_id!r}")
        d = self.root / job_id
        if not (d / "job.json").is_file():
            raise UnknownJob(f"no job {job_id!r}")
        return d

    def _meta(self, d: Path) -> dict[str, Any]:
        return json.loads((d / "job.json").read_text())

    def _save(self, d: Path, meta: dict[str, Any]) -> None:
        atomic_write_text(d / "job.json", json.dumps(meta, indent=1))

    def start(self, name: str, config: dict[str, Any], training_data: list, evaluation_data: list | None = None,
              reward: str | None = None, agent: dict[str, Any] | None = None,
              metadata: dict[str, Any] | None = None) -> str:
        """``agent``: the agent's keys (``agentboost config``'s ``agent.*``: tools, factory, system
        prompt, call limits, tool parser, agent type, ...), as in a training config. ``reward``: None
        takes the default reward of the agent's type (``set_default_reward`` / the guide's
        ``set_agent_strategy``), else ``exact_answer``. ``metadata``: any JSON object, kept with the
        job and shown in its status (the guide's run tags)."""
        check_name(name, "job name")
        grpo = GRPOConfig.from_dict(config or {})
        agent_overrides = grpo.agent_overrides(agent) if agent is not None else []
        if metadata is not None and not isinstance(metadata, dict):
            raise JobError(f"metadata must be a JSON object, got {type(metadata).__name__}")
        if reward is None:
            from ..agents.config import AgentConfig
            from ..rewards.registry import default_reward
            from ..schema import default_of

            agent_type = (agent or {}).get("agent_type") or default_of(AgentConfig, "agent_type")
            reward = default_reward(agent_type) or "exact_answer"
        if not isinstance(reward, str) or not reward:
            raise JobError("reward must be a registered reward name or module:function")
        owned = [k for k in grpo.overrides if k in ("data.train_file", "data.val_file", "run.run_dir")]
        if owned:
            raise JobError(f"config.overrides may not set {', '.join(owned)}: the service writes the job's "
                           "task files from training_data and evaluation_data")
        train_rows = task_rows(training_data, "training_data")  # all input checked before anything is made
        val_rows = task_rows(evaluation_data, "evaluation_data") if evaluation_data else None
        job_id = f"{name}-{uuid.uuid4().hex[:8]}"
        d = self.root / job_id
        (d / "data").mkdir(parents=True)
        try:
            atomic_write_text(d / "data" / "train.jsonl", "".join(json.dumps(r) + "\n" for r in train_rows))
            overrides = [f"data.train_file={json.dumps(str(d / 'data' / 'train.jsonl'))}",
                         f"reward.name={json.dumps(reward)}"]
            if val_rows:
                atomic_write_text(d / "data" / "val.jsonl", "".join(json.dumps(r) + "\n" for r in val_rows))
                overrides.append(f"data.val_file={json.dumps(str(d / 'data' / 'val.jsonl'))}")
            else:
                overrides.append("validation.at_start=false")
            from ..run.config import load_config, save_config

            cfg = load_config(None, overrides + agent_overrides + grpo.training_overrides())  # validated first
            from ..run.preflight import preflight

            preflight(cfg, "job")  # rewards, tools, model, ports, sandbox: the same check as `train`
            save_config(cfg, d / "config.yaml")
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)  # a refused job leaves nothing behind
            raise
        meta = {"job_id": job_id, "name": name, "created_at": time.time(), "pid": None, "proc_start": None,
                "cancel_requested": False, "reward": reward, "metadata": metadata or {}}
        self._save(d, meta)
        self.start_queued()
        return job_id

    def _launch(self, d: Path, meta: dict[str, Any]) -> None:
        # a job that wrote its run directory goes on from it (``recover``); else it starts
        args = (["--resume", str(d / "run")] if (d / "run" / "config.yaml").is_file()
                else [str(d / "config.yaml"), "--run-dir", str(d / "run")])
        with open(d / "log.txt", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "train", *args], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=str(d))
        meta.update(pid=proc.pid, proc_start=_proc_start(proc.pid), started_at=time.time())
        self._save(d, meta)
        self._children.append(proc)

    def interrupted(self, d: Path, meta: dict[str, Any]) -> bool:
        """A job whose process is gone without saying how it ended: started, not cancelled, no
        ``result.json`` and no ``completed`` / ``cancelled`` / ``failed`` event of its own (a named
        failure says so; a SIGKILL, the machine going down or the OOM killer say nothing), and not
        seen failed by a service that lived on (``status``: its ``failed`` event is out)."""
        if not meta.get("pid") or meta["cancel_requested"] or meta.get("failed_at") or self._alive(meta):
            return False
        run = d / "run"
        if (run / "result.json").is_file():
            return False
        events = run / "events.jsonl"
        ended = events.is_file() and any(isinstance(e, dict) and e.get("event") in ("completed", "cancelled", "failed")
                                         for _, e in iter_jsonl(events, growing=True))
        return not ended

    def recover(self) -> list[str]:
        """At the service's start: each job that was interrupted (``interrupted``: the service's
        machine went down, everything was killed) resumes from its last checkpoint, or starts over
        when it had none, at most ``MAX_RESTARTS`` times (then it stays failed, with its reason);
        the ones resumed. Its run says so in its events (``resume`` / ``restart``)."""
        with self._lock:
            resumed = []
            for d in sorted(self.root.iterdir()):
                if not (d / "job.json").is_file():
                    continue
                meta = self._meta(d)
                if not self.interrupted(d, meta) or meta.get("restarts", 0) >= MAX_RESTARTS:
                    continue
                meta["restarts"] = meta.get("restarts", 0) + 1
                self._launch(d, meta)
                resumed.append(meta["job_id"])
            return resumed

    def start_queued(self) -> list[str]:
        """Start queued jobs, oldest first, while fewer than ``max_running`` run; the ones started."""
        with self._lock:
            metas = [(d, self._meta(d)) for d in sorted(self.root.iterdir()) if (d / "job.json").is_file()]
            running = sum(1 for _, m in metas if m.get("pid") and self._alive(m))
            started = []
            for d, meta in sorted(((d, m) for d, m in metas if not m.get("pid") and not m["cancel_requested"]),
                                  key=lambda dm: dm[1]["created_at"]):
                if running >= self.max_running:
                    break
                self._launch(d, meta)
                running += 1
                started.append(meta["job_id"])
            return started

    def _alive(self, meta: dict[str, Any]) -> bool:
        """The job's process runs (the same process: its start time matches, so a reused pid is not
        mistaken for it). Works after a service restart, when the job is no child of ours."""
        for p in self._children:
            p.poll()  # reap finished children
        fields = _proc_fields(meta.get("pid") or 0)
        return fields is not None and fields[0] != "Z" and fields[19] == meta.get("proc_start")

    def status(self, job_id: str) -> dict[str, Any]:
        d = self._dir(job_id)
        meta = self._meta(d)
        if (d / "run" / "config.yaml").is_file():
            run = Run(d / "run").status()
        else:  # not started: the job's own configuration says how long and how costly it may be
            planned = (yaml.safe_load((d / "config.yaml").read_text()) or {}).get("run", {})
            run = {"step": 0, "state": "starting", "total_steps": planned.get("steps"),
                   "budget_used_usd": 0.0, "budget_limit_usd": planned.get("max_cost") or None}
        result_file = d / "run" / "result.json"
        if result_file.is_file():
            result = json.loads(result_file.read_text())
            state = "cancelled" if meta["cancel_requested"] and result.get("stop_requested") else "completed"
        elif not meta.get("pid"):
            state = "cancelled" if meta["cancel_requested"] else "queued"
        elif self._alive(meta):
            state = "cancelling" if meta["cancel_requested"] else ("running" if run.get("step") else "starting")
        else:
            state = "cancelled" if meta["cancel_requested"] else "failed"
        out = {**run, "job_id": job_id, "name": meta["name"], "state": state, "created_at": meta["created_at"],
               "reward": meta.get("reward"), "metadata": meta.get("metadata", {})}
        out.pop("run_dir", None)
        if state == "failed":
            out["error"] = failure_reason(d)
            if not meta.get("failed_at") and meta.get("pid"):
                # seen dead by a service that lives: final (its event is delivered as the job's last);
                # only a job whose service went down with it is resumed (``recover``)
                meta["failed_at"] = time.time()
                self._save(d, meta)
        from ..run.checkpoint import latest_name  # (it imports torch: not at the service's start)

        out["checkpoint"] = latest_name(d / "run")
        out.setdefault("best_checkpoint", None)
        out.update(guide_status(out, d / "run"))
        return out

    def list(self) -> list[dict[str, Any]]:
        return [self.status(d.name) for d in sorted(self.root.iterdir()) if (d / "job.json").is_file()]

    def cancel(self, job_id: str) -> dict[str, Any]:
        """A clean stop: the trainer finishes its step, checkpoints and exits (SIGTERM)."""
        d = self._dir(job_id)
        with self._lock:  # two cancels at once, or a cancel while the queue starts this job
            meta = self._meta(d)
            if not meta.get("pid"):  # queued: it never starts
                meta["cancel_requested"] = True
                self._save(d, meta)
            elif self._alive(meta):
                if not meta["cancel_requested"]:
                    meta["cancel_requested"] = True
                    self._save(d, meta)
                try:
                    os.kill(meta["pid"], signal.SIGTERM)
                except ProcessLookupError:
                    pass  # it ended meanwhile
        return self.status(job_id)

    def export(self, job_id: str, name: str | None = None, success_only: bool = False,
               min_reward: float | None = None, limit: int | None = None) -> dict[str, Any]:
        """Into ``exports/<name>.jsonl`` (``name`` None: a timestamped one); the answer also holds
        the exported records (``trajectories``, the guide's key)."""
        d = self._dir(job_id)
        if name is None:
            name = f"export-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        check_name(name, "export name")
        (d / "exports").mkdir(exist_ok=True)
        out = d / "exports" / f"{name}.jsonl"
        n = Run(d / "run").export_trajectories(out, success_only=bool(success_only), min_reward=min_reward, limit=limit)
        return {"job_id": job_id, "path": str(out), "episodes": n, "trajectories": [r for _, r in iter_jsonl(out)]}

    def evaluate(self, job_id: str, samples: int | None = None, baseline: str | None = None) -> dict[str, Any]:
        d = self._dir(job_id)
        if baseline is not None and not isinstance(baseline, str):
            raise JobError("baseline must be a model name")
        return guide_evaluation(Run(d / "run").evaluate(baseline=baseline, samples=samples, out_dir=d / "eval"))

    def config(self, job_id: str) -> dict[str, Any]:
        return yaml.safe_load((self._dir(job_id) / "config.yaml").read_text())


def _rows(path: Path) -> list[dict[str, Any]]:
    return [r for _, r in iter_jsonl(path, growing=True)] if path.is_file() else []


def guide_status(status: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The guide's status keys, from agentboost's status and the run's files. A figure not measured
    yet is None (JSON null): ``train_loss`` before the first step, the validation figures before the
    first validation, ``estimated_completion`` before the first step and once the job has ended."""
    steps, val = _rows(run_dir / "metrics.jsonl"), _rows(run_dir / "validation.jsonl")
    last_val = val[-1] if val else {}
    step, total = int(status.get("step") or 0), int(status.get("total_steps") or 0)
    cost = float(status.get("budget_used_usd") or 0.0)
    budget = float(status.get("budget_limit_usd") or 0.0)
    eta = None
    if status["state"] in ("running", "cancelling") and step and total > step:
        per_step = float(status.get("elapsed_s") or 0.0) / step  # the run's wall time so far, per step done
        eta = datetime.fromtimestamp(time.time() + per_step * (total - step), tz=timezone.utc).isoformat()
    return {
        "status": status["state"],
        "agent_id": status["name"],
        "current_iteration": step,
        "total_iterations": total,
        "progress_percent": 100.0 * min(step, total) / total if total else 0.0,
        "metrics": {
            "train_loss": status.get("loss"),
            "train_reward": status.get("reward_mean"),
            # the newest validation on evaluation_data: pass@1 estimated from validation.k samples per task
            # at validation.temperature (0: greedy)
            "validation_accuracy": last_val.get("val_pass@1"),
            "success_rate": last_val.get("val_pass@1"),
            "avg_reward": last_val.get("val_reward_mean"),
            "avg_steps": last_val.get("val_mean_turns"),
            "tool_accuracy": last_val.get("val_tool_success_rate"),
        },
        "cost_usd": round(cost, 4),
        "budget_usd": budget,
        "budget_remaining_percent": max(0.0, 100.0 * (1 - cost / budget)) if budget else None,
        "trajectories_generated": sum(sum((r.get("statuses") or {}).values()) for r in steps),
        "estimated_completion": eta,
        # the guide's Phase 5 reads it: RUN_DIR:CHECKPOINT, which `serve`, `eval` and `export-model` take as is
        "best_checkpoint_id": f"{run_dir}:{status['best_checkpoint']}" if status.get("best_checkpoint") else None,
        # what validation_accuracy / success_rate are (tasks x samples, temperature): as Run.status() says
        "validation": validation_figure(last_val or None),
    }


def guide_evaluation(result: dict[str, Any]) -> dict[str, Any]:
    """``agentboost eval``'s result with the guide's keys beside its own: ``metrics`` (the trained
    policy's) and ``baseline_comparison`` (the paired test against the baseline)."""
    model, base, diff = result["model"], result["baseline"], result["difference"]
    return {**result,
            "metrics": {"success_rate": model["success_rate"], "avg_reward": model["mean_reward"],
                        "avg_steps": model["mean_turns"], "tool_accuracy": model["tool_success_rate"],
                        "episodes": model["episodes"]},
            "baseline_comparison": {"baseline": base["policy"], "baseline_success_rate": base["success_rate"],
                                    "success_rate_improvement": diff["mean_difference"], "p_value": diff["p_value"],
                                    "statistically_significant": diff["significant"], "alpha": diff["alpha"],
                                    "ci95": diff["ci95"], "tasks": diff["tasks"]}}
