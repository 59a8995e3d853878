"""A small client for the job service, with the GRPO guide's method names and keywords
(``TrainingClient(base_url=, api_key=)``, ``start_training(agent_id=, config=GRPOConfig(...), ...)``,
``job["job_id"]``) beside agentboost's own (``url``, ``token``/``root``, ``name``). Standard library only.

Figures the service has not measured yet are JSON null; in a status's or an evaluation's ``metrics``
this client gives them as NaN, so the guide's format strings (``{...:.3f}``, ``{...:.2%}``) print
``nan`` instead of failing on None.
"""

from __future__ import annotations

import dataclasses
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import InputError


class JobServiceError(InputError):
    def __init__(self, status: int, message: str):
        super().__init__(f"job service answered {status}: {message}")
        self.status = status


def _one(what: str, ours: Any, guide: Any, ours_name: str, guide_name: str) -> Any:
    """One value given under agentboost's name or the guide's, not two different ones."""
    if ours is not None and guide is not None and ours != guide:
        raise InputError(f"{what}: {ours_name}={ours!r} and {guide_name}={guide!r} differ; give one of them")
    return guide if guide is not None else ours


def _job_id(job: str | dict[str, Any]) -> str:
    """A job as its id, or as the dict ``start_training`` returned."""
    if isinstance(job, dict):
        if "job_id" not in job:
            raise InputError(f"a job is its id or the dict start_training returned (with 'job_id'); got keys {sorted(job)}")
        return job["job_id"]
    return job


def _deployment_path(agent_id: str, environment: str) -> str:
    return f"/deployments/{urllib.parse.quote(str(agent_id), safe='')}/{urllib.parse.quote(str(environment), safe='')}"


def _nan_for_null(answer: dict[str, Any]) -> dict[str, Any]:
    metrics = answer.get("metrics")
    if isinstance(metrics, dict):
        answer["metrics"] = {k: (math.nan if v is None else v) for k, v in metrics.items()}
    return answer


class TrainingClient:
    def __init__(self, url: str | None = None, token: str | None = None, root: str | Path | None = None,
                 timeout_s: float = 3600.0, *, base_url: str | None = None, api_key: str | None = None):
        """``url`` (the guide: ``base_url``), and ``token`` (the guide: ``api_key``) or the jobs
        ``root`` whose token file to read."""
        url = _one("TrainingClient", url, base_url, "url", "base_url") or "http://127.0.0.1:8765"
        token = _one("TrainingClient", token, api_key, "token", "api_key")
        if token is None:
            if root is None:
                raise InputError("give the service's token (api_key), or the jobs root that holds it")
            token = (Path(root) / "token").read_text().strip()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InputError(f"the job service's URL must be http(s)://HOST:PORT, got {url!r}")
        self.url, self.token, self.timeout_s = url.rstrip("/"), token, timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read()).get("error", e.reason)
            except ValueError:
                msg = e.reason
            raise JobServiceError(e.code, msg) from None

    def start_training(self, name: str | None = None, config: Any = None, training_data: list | None = None,
                       evaluation_data: list | None = None, reward: Any = None, agent: Any = None, *,
                       agent_id: str | None = None, agent_type: str | None = None,
                       metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a job; returns its status as a dict (``job["job_id"]``).

        ``name`` (the guide: ``agent_id``) names the job. ``config``: a ``GRPOConfig`` or a dict of
        its fields. ``agent``: the agent's keys as a dict, or a ``StrandsAgentSpec`` (tools and
        factory as import paths the service's Python can import). The agent's type is
        ``agent_type``, else the agent's ``agent_type`` key, else ``agent_id``: with no ``reward``,
        the reward set for that type (the guide's ``registry.set_agent_strategy``) is used.
        ``reward``: a reward name or function; one registered in this process only is sent as its
        import path (``portable_reward``), so the service's Python must be able to import it."""
        from ..rewards.registry import default_reward, portable_reward

        name = _one("start_training", name, agent_id, "name", "agent_id")
        if name is None:
            raise InputError("start_training needs the job's name (the guide: agent_id)")
        if training_data is None:
            raise InputError("start_training needs training_data")
        if config is None:
            config = {}
        elif dataclasses.is_dataclass(config) and not isinstance(config, type):
            config = dataclasses.asdict(config)
        agent_keys = None
        if agent is not None:
            agent_keys = dict(agent) if isinstance(agent, dict) else agent.as_config()
        kind = agent_type or (agent_keys or {}).get("agent_type") or (agent_id if agent_id is not None else None)
        if kind is not None:
            agent_keys = {**(agent_keys or {}), "agent_type": kind}
        if reward is None and kind is not None:
            reward = default_reward(kind)  # set in this process: the service does not know it
        body = {"name": name, "config": config, "training_data": training_data, "evaluation_data": evaluation_data,
                "reward": portable_reward(reward) if reward is not None else None, "metadata": metadata}
        if agent_keys is not None:
            body["agent"] = agent_keys
        return self._call("POST", "/jobs", body)

    def get_status(self, job_id: str | dict[str, Any]) -> dict[str, Any]:
        return _nan_for_null(self._call("GET", f"/jobs/{_job_id(job_id)}"))

    def list_jobs(self) -> list[dict[str, Any]]:
        return [_nan_for_null(j) for j in self._call("GET", "/jobs")["jobs"]]

    def cancel(self, job_id: str | dict[str, Any]) -> dict[str, Any]:
        return _nan_for_null(self._call("POST", f"/jobs/{_job_id(job_id)}/cancel", {}))

    def evaluate(self, job_id: str | dict[str, Any], samples: int | None = None,
                 baseline: str | None = None) -> dict[str, Any]:
        return _nan_for_null(self._call("POST", f"/jobs/{_job_id(job_id)}/evaluate",
                                        {"samples": samples, "baseline": baseline}))

    def subscribe_webhook(self, url: str, events: list[str] | None = None, secret: str | None = None) -> dict[str, Any]:
        """``events``: agentboost's names or the guide's (``training.job.progress``, ...)."""
        return self._call("POST", "/webhooks", {"url": url, "events": events, "secret": secret})

    def export_trajectories(self, job_id: str | dict[str, Any], name: str | None = None, success_only: bool = False,
                            min_reward: float | None = None, limit: int | None = None) -> dict[str, Any]:
        """Into the job's ``exports/<name>.jsonl`` (None: a timestamped name); the answer holds the
        file's path, the count (``episodes``) and the records (``trajectories``)."""
        return self._call("POST", f"/jobs/{_job_id(job_id)}/export", {"name": name, "success_only": success_only,
                                                                       "min_reward": min_reward, "limit": limit})

    def deploy_checkpoint(self, agent_id: str, checkpoint_id: str, environment: str = "production",
                          engine: str | None = None) -> dict[str, Any]:
        """Serve ``checkpoint_id`` (a status's ``best_checkpoint_id``, ``JOB_ID[:CHECKPOINT]`` or an
        embedded model name) to ``agent_id``'s agents in ``environment``, alone; the answer is the
        deployment's status, with ``base_url`` (the OpenAI-compatible API; the API key is this
        client's). ``engine``: hf (default) or vllm."""
        return self._call("POST", "/deployments", {"agent_id": agent_id, "checkpoint_id": checkpoint_id,
                                                   "environment": environment, "engine": engine})

    def configure_ab_test(self, agent_id: str | None = None, baseline_checkpoint: str | None = None,
                          experiment_checkpoint: str | None = None, traffic_split: float = 0.1,
                          environment: str = "production", engine: str | None = None) -> dict[str, Any]:
        """An A/B test in ``environment``: ``traffic_split`` of the sessions to
        ``experiment_checkpoint``, the rest to ``baseline_checkpoint`` (None: what is deployed
        there now). Called again with the same checkpoints and another split, it changes the split
        live (logged); ``experiment_checkpoint`` None keeps the running test's. ``agent_id`` None:
        the name of the job the experiment comes from."""
        return self._call("POST", "/deployments/ab", {
            "agent_id": agent_id, "baseline_checkpoint": baseline_checkpoint,
            "experiment_checkpoint": experiment_checkpoint, "traffic_split": traffic_split,
            "environment": environment, "engine": engine})

    def get_deployment(self, agent_id: str, environment: str = "production") -> dict[str, Any]:
        """The deployment's state, base URL, arms and split, and an A/B test's report (``ab report``'s)."""
        return self._call("GET", _deployment_path(agent_id, environment))

    def list_deployments(self) -> list[dict[str, Any]]:
        return self._call("GET", "/deployments")["deployments"]

    def stop_deployment(self, agent_id: str, environment: str = "production") -> dict[str, Any]:
        return self._call("DELETE", _deployment_path(agent_id, environment))
