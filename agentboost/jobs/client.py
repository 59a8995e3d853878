"""A small client for the job service, with the guide's method names. Standard library only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import InputError


class JobServiceError(InputError):
    def __init__(self, status: int, message: str):
        super().__init__(f"job service answered {status}: {message}")
        self.status = status


class TrainingClient:
    def __init__(self, url: str = "http://127.0.0.1:8765", token: str | None = None, root: str | Path | None = None,
                 timeout_s: float = 3600.0):
        """``token``, or the jobs ``root`` whose token file to read."""
        if token is None:
            if root is None:
                raise InputError("give the service's token, or the jobs root that holds it")
            token = (Path(root) / "token").read_text().strip()
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

    def start_training(self, name: str, config: dict[str, Any], training_data: list, evaluation_data: list | None = None,
                       reward: str = "exact_answer", agent: Any = None) -> str:
        """``agent``: the agent's keys as a dict, or a ``StrandsAgentSpec`` (its tools and factory as
        import paths the service's Python can import)."""
        body = {"name": name, "config": config, "training_data": training_data, "evaluation_data": evaluation_data,
                "reward": reward}
        if agent is not None:
            body["agent"] = agent if isinstance(agent, dict) else agent.as_config()
        return self._call("POST", "/jobs", body)["job_id"]

    def get_status(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}")

    def list_jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs")["jobs"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/jobs/{job_id}/cancel", {})

    def evaluate(self, job_id: str, samples: int | None = None, baseline: str | None = None) -> dict[str, Any]:
        return self._call("POST", f"/jobs/{job_id}/evaluate", {"samples": samples, "baseline": baseline})

    def subscribe_webhook(self, url: str, events: list[str] | None = None, secret: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/webhooks", {"url": url, "events": events, "secret": secret})

    def export_trajectories(self, job_id: str, name: str, success_only: bool = False, min_reward: float | None = None,
                            limit: int | None = None) -> dict[str, Any]:
        return self._call("POST", f"/jobs/{job_id}/export", {"name": name, "success_only": success_only,
                                                              "min_reward": min_reward, "limit": limit})
