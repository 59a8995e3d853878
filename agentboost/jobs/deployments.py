"""The job service's deployments (the GRPO guide's Phase 5: ``deploy_checkpoint``,
``configure_ab_test``): a job's checkpoint served to agents, or an A/B test of two, per agent id
and environment, by ``agentboost serve`` (``serving/router.py``, the same router, policies, event
log and report as on the command line) in a process the service owns.

    <root>/deployments/<agent_id>/<environment>/deployment.json   arms, split, port, process
    <root>/deployments/<agent_id>/<environment>/ab.jsonl          the router's events (``ab report`` reads it)
    <root>/deployments/<agent_id>/<environment>/history.jsonl     each deploy, A/B change and stop, with its time
    <root>/deployments/<agent_id>/<environment>/log.txt           the serving process's console

A deployment listens on loopback at a port kept for its life, so its base URL does not change;
clients send the service's bearer token as their API key. Its process is started with
``--reconfigurable``: a new checkpoint or new arms are loaded beside the serving ones and then
replace them (``POST /v1/admin/arms``), and a new split of the same arms is a live split change,
logged in ``ab.jsonl`` as ``agentboost ab split``'s is. The processes stop with the service; one
left by a service that died is stopped when the service starts again (deploy again to serve).

What a deployment serves is named as the job status gives it (``best_checkpoint_id``:
``RUN_DIR:step_NNNNNN``), as ``JOB_ID[:CHECKPOINT]`` (``best``, ``latest``, ``step_000012``), or as
an embedded model's name (a base model as the baseline): never another path on this machine. It is
resolved to one step when deployed, so a later best checkpoint does not change what is served.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..files import atomic_write_text, open_append
from ..sampling.vllm_server import free_port
from .store import JobError, JobStore, UnknownJob, _proc_fields, _proc_start, check_name

READY_TIMEOUT_S = 900.0  # a vLLM arm starts a server and loads a model
STOP_TIMEOUT_S = 30.0


class UnknownDeployment(UnknownJob):
    pass


class Deployments:
    def __init__(self, store: JobStore, host: str = "127.0.0.1"):
        self.store = store
        self.host = host
        self.root = store.root / "deployments"
        self._procs: dict[tuple[str, str], subprocess.Popen] = {}
        # one change at a time (each may start a process or load a model), read and made under one hold
        self._lock = threading.RLock()

    # -- records --------------------------------------------------------------------------------
    def _dir(self, agent_id: Any, environment: Any) -> Path:
        return self.root / check_name(agent_id, "agent_id") / check_name(environment, "environment")

    def _record(self, d: Path) -> dict[str, Any] | None:
        f = d / "deployment.json"
        return json.loads(f.read_text()) if f.is_file() else None

    def _save(self, d: Path, rec: dict[str, Any], event: dict[str, Any]) -> None:
        rec["updated_at"] = time.time()
        atomic_write_text(d / "deployment.json", json.dumps(rec, indent=1))
        with open_append(d / "history.jsonl") as f:
            f.write(json.dumps({"t": rec["updated_at"], **event}) + "\n")

    def _alive(self, rec: dict[str, Any] | None) -> bool:
        for p in self._procs.values():
            p.poll()  # reap a process that ended
        if not rec or not rec.get("pid"):
            return False
        fields = _proc_fields(rec["pid"])
        return fields is not None and fields[0] != "Z" and fields[19] == rec.get("proc_start")

    # -- what is served -------------------------------------------------------------------------
    def resolve(self, checkpoint_id: Any, what: str) -> tuple[str, str | None]:
        """``(spec, job_id)``: a job's checkpoint as ``ABS_RUN_DIR:step_NNNNNN``, or an embedded
        model's name (job None)."""
        from ..models.embedded import EMBEDDED_MODELS
        from ..run.checkpoint import resolve_checkpoint  # (it imports torch: not at the service's start)

        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise JobError(f"{what} must be a checkpoint id (a job status's best_checkpoint_id, or "
                           f"JOB_ID[:CHECKPOINT]) or an embedded model name, got {checkpoint_id!r}")
        if checkpoint_id in EMBEDDED_MODELS:
            return checkpoint_id, None
        head, sep, name = checkpoint_id.rpartition(":")
        head, name = (head, name) if sep else (checkpoint_id, None)
        job_id = head
        if "/" in head or os.sep in head:  # a run directory: it must be one of this service's jobs
            run = Path(head).resolve()
            job_id = run.parent.name
            if run.name != "run" or run.parent.parent != self.store.root.resolve():
                raise JobError(f"{what} {checkpoint_id!r} is not a checkpoint of this service's jobs (give a job "
                               f"status's best_checkpoint_id, JOB_ID[:CHECKPOINT], or one of the embedded models "
                               f"{', '.join(sorted(EMBEDDED_MODELS))})")
        try:
            self.store._dir(job_id)
        except UnknownJob:
            raise JobError(f"{what} {checkpoint_id!r}: no job {job_id!r} (give a job status's best_checkpoint_id, "
                           f"JOB_ID[:CHECKPOINT], or one of the embedded models "
                           f"{', '.join(sorted(EMBEDDED_MODELS))})") from None
        run = (self.store.root / job_id / "run").resolve()
        if not (run / "config.yaml").is_file():
            raise JobError(f"{what} {checkpoint_id!r}: job {job_id} has not started training: no checkpoint yet")
        return f"{run}:{resolve_checkpoint(run, name).name}", job_id

    # -- changes --------------------------------------------------------------------------------
    def deploy(self, agent_id: Any, checkpoint_id: Any, environment: Any = "production",
               engine: str | None = None) -> dict[str, Any]:
        """Serve ``checkpoint_id`` alone for ``agent_id`` in ``environment`` (an A/B test there ends)."""
        d = self._dir(agent_id, environment)
        spec, _ = self.resolve(checkpoint_id, "checkpoint_id")
        return self._apply(d, agent_id, environment, {"policy": spec}, None, engine, "deploy_checkpoint")

    def configure_ab(self, agent_id: Any = None, baseline_checkpoint: Any = None, experiment_checkpoint: Any = None,
                     traffic_split: Any = 0.1, environment: Any = "production",
                     engine: str | None = None) -> dict[str, Any]:
        """Serve two arms for ``agent_id`` in ``environment``. ``baseline_checkpoint`` None: what is
        deployed there now (its baseline, if that is already an A/B test); ``experiment_checkpoint``
        None: the experiment of the A/B test running there; ``agent_id`` None: the name of the job
        the experiment comes from. The same arms with another split change the split live."""
        with self._lock:
            return self._configure_ab(agent_id, baseline_checkpoint, experiment_checkpoint, traffic_split,
                                      environment, engine)

    def _configure_ab(self, agent_id: Any, baseline_checkpoint: Any, experiment_checkpoint: Any, traffic_split: Any,
                      environment: Any, engine: str | None) -> dict[str, Any]:
        from ..serving.router import check_split

        split = check_split(traffic_split)
        exp_job = None
        if experiment_checkpoint is not None:
            experiment, exp_job = self.resolve(experiment_checkpoint, "experiment_checkpoint")
        if agent_id is None:
            if exp_job is None:
                raise JobError("configure_ab_test needs agent_id, or an experiment_checkpoint of one of this "
                               "service's jobs (whose name is the agent id)")
            agent_id = self.store._meta(self.store._dir(exp_job))["name"]
        d = self._dir(agent_id, environment)
        rec = self._record(d)
        serving = rec if self._alive(rec) else None
        where = f"agent {agent_id!r} in {environment!r}"
        if rec is not None and serving is None and None in (baseline_checkpoint, experiment_checkpoint):
            raise JobError(f"the deployment of {where} is {self._status(d, rec)['state']}: deploy_checkpoint again, "
                           "or give both checkpoints")
        if experiment_checkpoint is None:
            if serving is None or "experiment" not in serving["arms"]:
                raise JobError(f"no A/B test runs for {where}: give experiment_checkpoint")
            experiment = serving["arms"]["experiment"]
        if baseline_checkpoint is None:
            if serving is None:
                raise JobError(f"nothing is deployed for {where}: baseline_checkpoint=None means what is deployed "
                               "there; deploy_checkpoint first, or give baseline_checkpoint")
            baseline = serving["arms"].get("baseline", serving["arms"].get("policy"))
        else:
            baseline, _ = self.resolve(baseline_checkpoint, "baseline_checkpoint")
        return self._apply(d, agent_id, environment, {"baseline": baseline, "experiment": experiment}, split,
                           engine, "configure_ab_test")

    def _apply(self, d: Path, agent_id: str, environment: str, arms: dict[str, str], split: float | None,
               engine: str | None, by: str) -> dict[str, Any]:
        from ..sampling.policy_server import ENGINES

        if engine is not None and engine not in ENGINES:
            raise JobError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        with self._lock:
            rec = self._record(d)
            if rec is not None and self._alive(rec) and engine in (None, rec["engine"]):
                answer = self._admin(rec, {"arms": arms, "split": split, "by": f"job service: {by}"})
                rec.update(arms=arms, split=answer["split"], state="running")
                self._save(d, rec, {"event": by, "arms": arms, "split": answer["split"], "changed": answer["changed"]})
                return self.status(agent_id, environment)
            if rec is not None:
                self._stop(d, rec, by)  # it died, or another engine was asked for: a process of its own
            port = rec["port"] if rec is not None else free_port(self.host)
            rec = {"agent_id": agent_id, "environment": environment, "port": port,
                   "base_url": f"http://{self.host}:{port}/v1", "engine": engine or "hf"}
            self._start(d, rec, arms, split)
            rec.update(arms=arms, split=split, state="running")
            self._save(d, rec, {"event": by, "arms": arms, "split": split, "changed": "started", "pid": rec["pid"]})
            return self.status(agent_id, environment)

    def _start(self, d: Path, rec: dict[str, Any], arms: dict[str, str], split: float | None) -> None:
        d.mkdir(parents=True, exist_ok=True)
        what = ["--ab", *(f"{n}={s}" for n, s in arms.items()), "--split", str(split)] if split is not None \
            else [arms["policy"]]
        cmd = [sys.executable, "-m", "agentboost.cli", "serve", *what, "--reconfigurable", "--host", self.host,
               "--port", str(rec["port"]), "--out", str(d.resolve()), "--served-name", rec["agent_id"],
               "--engine", rec["engine"]]
        token = self.store.token()
        with open(d / "log.txt", "ab") as log:  # the token goes in the environment: never on a command line
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(d),
                                    env={**os.environ, "AGENTBOOST_SERVE_TOKEN": token}, start_new_session=True)
        self._procs[(rec["agent_id"], rec["environment"])] = proc
        rec.update(pid=proc.pid, proc_start=_proc_start(proc.pid), started_at=time.time())
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (d / "log.txt").read_text(errors="replace")[-1500:]
                raise JobError(f"the serving process for {rec['agent_id']!r} in {rec['environment']!r} exited "
                               f"({proc.returncode}) before it served: {tail.strip()}")
            try:
                req = urllib.request.Request(rec["base_url"] + "/models", headers={"Authorization": f"Bearer {token}"})
                with urllib.request.urlopen(req, timeout=5):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self._terminate(proc.pid)
        raise JobError(f"the serving process for {rec['agent_id']!r} did not answer within {READY_TIMEOUT_S:.0f} s "
                       f"(see {d / 'log.txt'})")

    def _admin(self, rec: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(rec["base_url"] + "/admin/arms", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {self.store.token()}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=READY_TIMEOUT_S) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                msg = e.reason
            raise JobError(f"the deployment of {rec['agent_id']!r} in {rec['environment']!r} refused: {msg}") from None

    def _terminate(self, pid: int) -> None:
        """SIGTERM (``serve`` closes its engines), SIGKILL after ``STOP_TIMEOUT_S``; our own child
        is waited for, so that no zombie is left."""
        try:
            os.killpg(pid, signal.SIGTERM)  # its own session: the engine's server subprocesses go too
        except ProcessLookupError:
            return
        child = next((p for p in self._procs.values() if p.pid == pid), None)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            if child is not None:
                if child.poll() is not None:
                    return
            else:  # a process a service before this one started: not ours to wait for
                fields = _proc_fields(pid)
                if fields is None or fields[0] == "Z":
                    return
            time.sleep(0.1)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if child is not None:
            child.wait()

    def _stop(self, d: Path, rec: dict[str, Any], by: str) -> None:
        if self._alive(rec):
            self._terminate(rec["pid"])
        self._procs.pop((rec["agent_id"], rec["environment"]), None)
        rec.update(state="stopped", pid=None, proc_start=None)
        self._save(d, rec, {"event": "stopped", "by": by})

    def stop(self, agent_id: Any, environment: Any = "production") -> dict[str, Any]:
        d = self._dir(agent_id, environment)
        with self._lock:
            rec = self._record(d)
            if rec is None:
                raise UnknownDeployment(f"nothing was deployed for agent {agent_id!r} in {environment!r}")
            self._stop(d, rec, "stop_deployment")
        return self.status(agent_id, environment)

    def _records(self) -> list[tuple[Path, dict[str, Any]]]:
        out = []
        for f in sorted(self.root.glob("*/*/deployment.json")):
            rec = self._record(f.parent)
            if rec is not None:
                out.append((f.parent, rec))
        return out

    def stop_all(self, by: str = "the job service stopped") -> None:
        """Every deployment this service serves, and any a service before it left running."""
        with self._lock:
            for d, rec in self._records():
                if rec.get("pid"):
                    self._stop(d, rec, by)

    # -- status ---------------------------------------------------------------------------------
    def status(self, agent_id: Any, environment: Any = "production", report: bool = False) -> dict[str, Any]:
        d = self._dir(agent_id, environment)
        rec = self._record(d)
        if rec is None:
            raise UnknownDeployment(f"nothing was deployed for agent {agent_id!r} in {environment!r}")
        return self._status(d, rec, report)

    def _status(self, d: Path, rec: dict[str, Any], report: bool = False) -> dict[str, Any]:
        out = {k: rec.get(k) for k in ("agent_id", "environment", "base_url", "engine", "arms", "split", "pid",
                                       "started_at", "updated_at")}
        alive = self._alive(rec)
        out["state"] = "running" if alive else ("stopped" if rec.get("state") == "stopped" else "failed")
        out["ab_test"] = "experiment" in (rec.get("arms") or {})
        out["events"] = str((d / "ab.jsonl").resolve())
        if out["state"] == "failed":
            log = d / "log.txt"
            out["error"] = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
        if report and out["ab_test"] and (d / "ab.jsonl").is_file():
            from ..serving.report import ab_report

            out["report"] = ab_report(d / "ab.jsonl")
        return out

    def list(self) -> list[dict[str, Any]]:
        return [self._status(d, rec) for d, rec in self._records()]

    def of_job(self, job_id: str, every: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The running deployments that serve one of the job's checkpoints (in its status), among
        ``every`` (``list()``'s, read once for many jobs) or all."""
        run = str((self.store.root / job_id / "run").resolve()) + ":"
        return [{k: s[k] for k in ("agent_id", "environment", "base_url", "arms", "split")}
                for s in (self.list() if every is None else every)
                if s["state"] == "running" and any(v.startswith(run) for v in s["arms"].values())]
