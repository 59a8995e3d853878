"""The job service's continual loops (``agentboost continual run``, ``continual/loop.py``), one
process each, owned by the service as its deployments are:

    <root>/loops/<loop_id>/loop.json        the process, its port (kept for the loop's life: the base URL stays)
    <root>/loops/<loop_id>/config.yaml      the configuration; data/gate.jsonl its held-out tasks (gate_data)
    <root>/loops/<loop_id>/loop/            the loop's directory (its state, versions, served sessions)
    <root>/loops/<loop_id>/log.txt          the loop's console

The request names what it serves first as a deployment does (a job's ``best_checkpoint_id``,
``JOB_ID[:CHECKPOINT]`` or an embedded model) and brings its held-out tasks as rows, never a path on
this machine. A loop serves on loopback with the service's token; it stops with the service (or
``stop``), and started again under the same id it resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..files import atomic_write_text
from ..sampling.vllm_server import free_port
from .deployments import Deployments
from .store import JobError, UnknownJob, _proc_fields, _proc_start, check_name

# keys that name files or what is served: the service writes the first, the request's production names the last
OWNED = ("data.train_file", "data.val_file", "loop.gate_file", "loop.production", "warm_start.tasks_file",
         "prompt.gate_file", "agent.prompt_policy", "run.code_paths", "loop.judge")


class UnknownLoop(UnknownJob):
    pass


class Loops:
    def __init__(self, deployments: Deployments, host: str = "127.0.0.1"):
        self.deployments = deployments
        self.store = deployments.store
        self.root = self.store.root / "loops"
        self.host = host
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.RLock()

    def _dir(self, loop_id: Any) -> Path:
        return self.root / check_name(loop_id, "loop_id")

    def _record(self, d: Path) -> dict[str, Any] | None:
        f = d / "loop.json"
        return json.loads(f.read_text()) if f.is_file() else None

    def _alive(self, rec: dict[str, Any] | None) -> bool:
        for p in self._procs.values():
            p.poll()
        if not rec or not rec.get("pid"):
            return False
        fields = _proc_fields(rec["pid"])
        return fields is not None and fields[0] != "Z" and fields[19] == rec.get("proc_start")

    def start(self, loop_id: Any, config: Any = None, gate_data: Any = None, production: Any = None) -> dict[str, Any]:
        """A new loop (``config``: dotted keys of the configuration, e.g. ``{"loop.split": 0.3}``;
        ``gate_data``: the offline gate's held-out task rows; ``production``: what it serves
        first), or, for an id that has one, the same loop resumed."""
        from ..api import task_rows
        from ..run.config import load_config, save_config

        d = self._dir(loop_id)
        with self._lock:
            rec = self._record(d)
            if rec is not None and self._alive(rec):
                raise JobError(f"loop {loop_id!r} is running: stop it first, or get its status")
            if rec is None:
                if config is not None and (not isinstance(config, dict) or not all(isinstance(k, str) for k in config)):
                    raise JobError("config must be an object of dotted configuration keys, e.g. {\"loop.split\": 0.3}")
                owned = sorted(k for k in (config or {}) if k in OWNED)
                if owned:
                    raise JobError(f"config may not set {', '.join(owned)}: the service writes the task files from "
                                   "gate_data, and production names what is served first")
                if not gate_data:
                    raise JobError("gate_data: the held-out task rows the offline gate measures candidates on")
                rows = task_rows(gate_data, "gate_data")
                spec, _ = self.deployments.resolve(production or "smollm2-135m-instruct", "production")
                (d / "data").mkdir(parents=True, exist_ok=True)
                try:
                    atomic_write_text(d / "data" / "gate.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
                    overrides = [f"{k}={json.dumps(v)}" for k, v in (config or {}).items()] + [
                        f"loop.gate_file={json.dumps(str(d / 'data' / 'gate.jsonl'))}",
                        f"loop.production={json.dumps(spec)}"]
                    save_config(load_config(None, overrides, for_training=False), d / "config.yaml")
                except BaseException:
                    import shutil

                    shutil.rmtree(d, ignore_errors=True)  # a refused loop leaves nothing behind
                    raise
                rec = {"loop_id": loop_id, "port": free_port(self.host), "created_at": time.time()}
            elif config is not None or gate_data is not None:
                raise JobError(f"loop {loop_id!r} exists: started again it resumes with its own configuration "
                               "(give no config or gate_data)")
            resume = (d / "loop" / "loop.json").is_file()
            cmd = [sys.executable, "-m", "agentboost.cli", "continual", "run"]
            cmd += ["--resume", str(d / "loop")] if resume else [str(d / "config.yaml"), "--out", str(d / "loop")]
            cmd += ["--host", self.host, "--port", str(rec["port"])]
            with open(d / "log.txt", "ab") as log:  # the token in the environment, never on a command line
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=str(d), env={**os.environ, "AGENTBOOST_SERVE_TOKEN": self.store.token()},
                                        start_new_session=True)
            self._procs[loop_id] = proc
            rec.update(pid=proc.pid, proc_start=_proc_start(proc.pid), started_at=time.time(), resumed=resume,
                       base_url=f"http://{self.host}:{rec['port']}/v1")
            atomic_write_text(d / "loop.json", json.dumps(rec, indent=1))
            return self.status(loop_id)

    def status(self, loop_id: Any) -> dict[str, Any]:
        from ..continual.loop import loop_report

        d = self._dir(loop_id)
        rec = self._record(d)
        if rec is None:
            raise UnknownLoop(f"no loop {loop_id!r}")
        alive = self._alive(rec)
        out = {"loop_id": loop_id, "state": "running" if alive else "stopped", "base_url": rec["base_url"],
               "pid": rec.get("pid") if alive else None}
        if (d / "loop" / "loop.json").is_file():
            out.update(loop_report(d / "loop"))
        if not alive and not out.get("stopped"):  # it ended without the loop saying why: the log does
            out["state"] = "failed"
            log = d / "log.txt"
            out["error"] = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
        return out

    def list(self) -> list[dict[str, Any]]:
        return [self.status(d.name) for d in sorted(self.root.glob("*")) if (d / "loop.json").is_file()]

    def propose(self, loop_id: Any, checkpoint_id: Any = None, noise: Any = None, skip_gate: Any = False) -> dict[str, Any]:
        from ..continual.loop import propose

        d = self._dir(loop_id)
        if self._record(d) is None:
            raise UnknownLoop(f"no loop {loop_id!r}")
        spec = self.deployments.resolve(checkpoint_id, "checkpoint_id")[0] if checkpoint_id is not None else None
        if noise is not None and (isinstance(noise, bool) or not isinstance(noise, (int, float))):
            raise JobError(f"noise must be a number (the noise's standard deviation), got {noise!r}")
        path = propose(d / "loop", spec, float(noise) if noise is not None else None, bool(skip_gate),
                       by="job service: propose")
        return {"loop_id": loop_id, "proposal": path.name, "spec": spec, "noise": noise}

    def stop(self, loop_id: Any, by: str = "stop") -> dict[str, Any]:
        """SIGTERM: the loop stops at its next poll with everything saved (a candidate's training
        cut short is made again when it resumes)."""
        d = self._dir(loop_id)
        with self._lock:
            rec = self._record(d)
            if rec is None:
                raise UnknownLoop(f"no loop {loop_id!r}")
            if self._alive(rec):
                self.deployments._terminate(rec["pid"])
            self._procs.pop(loop_id, None)
            rec.update(pid=None, proc_start=None, stopped_by=by)
            atomic_write_text(d / "loop.json", json.dumps(rec, indent=1))
        return self.status(loop_id)

    def stop_all(self, by: str = "the job service stopped") -> None:
        for d in sorted(self.root.glob("*")) if self.root.is_dir() else []:
            rec = self._record(d)
            if rec is not None and rec.get("pid"):
                self.stop(d.name, by)
