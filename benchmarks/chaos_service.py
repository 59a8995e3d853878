"""The job-service job of the chaos suite (``benchmarks/chaos.py --jobs service``): what a user's
script does against ``agentboost jobs serve``, written to be run again after a kill.

    .venv/bin/python benchmarks/chaos_service.py OUT WEBHOOK_URL

Starts the real service (``agentboost jobs serve --root OUT/jobs``, a process of its own), subscribes
``WEBHOOK_URL`` to every event and submits one small job, each unless already done (a run after a
kill finds them: the job resumes with the service, ``JobStore.recover``); waits until the job ends
and every event of it was delivered, then stops the service. Exit status 0 when the job completed.
The receiver (``WebhookReceiver``) lives in the harness, outside what a kill reaches.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from agentboost.jobs.client import JobServiceError, TrainingClient
from agentboost.sampling.vllm_server import free_port
from agentboost.testing.chaos import Job, stop
from agentboost.testing.chaos_jobs import DETERMINISTIC, GROUP, STEPS, TASKS_PER_STEP, train_audit, train_phase, train_summary

DATA = [{"query": f"What is {a} + {b}?", "expected_outcome": str(a + b)} for a, b in [(2, 3), (4, 4), (1, 6), (5, 2)]]
CONFIG = {"batch_size": TASKS_PER_STEP, "n_trajectories_per_query": GROUP, "n_iterations": STEPS,
          "checkpoint_interval": 1,
          "overrides": {"sampling.max_new_tokens": 16, "run.tensorboard": False,
                        "reward.name": "agentboost.testing.chaos_jobs:answer_length",
                        **{k: int(v) for k, v in (o.split("=", 1) for o in DETERMINISTIC)}}}


def _wait(fn, timeout_s: float, what: str, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = fn()
        except (OSError, JobServiceError):
            value = None  # the service is starting
        if value:
            return value
        time.sleep(every_s)
    raise TimeoutError(f"timed out waiting for {what}")


def delivered_all(root: Path, job_id: str) -> bool:
    """Every event of the job's run is past every subscription's offset (``webhooks.json``)."""
    events = root / job_id / "run" / "events.jsonl"
    n = sum(1 for line in events.read_text().splitlines() if line.strip()) if events.is_file() else 0
    state = json.loads((root / "webhooks.json").read_text())
    return all(sub["offsets"].get(job_id, 0) >= n for sub in state["subscriptions"].values())


def main(out: str, hook: str) -> int:
    root = Path(out) / "jobs"
    port = free_port()
    svc = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "jobs", "serve", "--root", str(root), "--port",
                            str(port), "--allow-private-webhooks"])
    try:
        client = _wait(lambda: (c := TrainingClient(f"http://127.0.0.1:{port}", root=root)).list_jobs() is not None
                       and c, 120, "the job service")
        if not client._call("GET", "/webhooks")["webhooks"]:
            client.subscribe_webhook(hook)
        jobs = client.list_jobs()
        job_id = jobs[0]["job_id"] if jobs else client.start_training("chaos", CONFIG, DATA)["job_id"]
        status = _wait(lambda: (s := client.get_status(job_id))["state"] in ("completed", "failed", "cancelled")
                       and s, 1800, "the job's end", every_s=0.5)
        _wait(lambda: delivered_all(root, job_id), 120, "the webhook deliveries")
        print(f"chaos_service: job {job_id} {status['state']}", flush=True)
        return 0 if status["state"] == "completed" else 1
    finally:
        stop(svc, 60)


class WebhookReceiver:
    """Receives the deliveries of every attempt (``URL/<attempt name>``) into
    ``<dir>/<attempt name>.deliveries.jsonl``: job, seq, event and the delivery id of each, as they
    come (a delivery repeated shows twice)."""

    def __init__(self, directory: Path):
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = self.path.strip("/").split("/")[-1]
                with lock, open(directory / f"{name}.deliveries.jsonl", "a") as f:
                    f.write(json.dumps({"delivery": self.headers.get("X-Agentboost-Delivery"), "seq": body["seq"],
                                        "job_id": body["job_id"], "event": body["event"]}) + "\n")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def _run(out: Path) -> Path:
    jobs = sorted(p for p in (out / "jobs").iterdir() if (p / "job.json").is_file())
    if len(jobs) != 1:
        raise AssertionError(f"{out / 'jobs'} holds {len(jobs)} jobs, not 1")
    return jobs[0] / "run"


def _deliveries(out: Path) -> list[dict]:
    path = out.with_name(f"{out.name}.deliveries.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def service_summary(out: Path) -> dict:
    return train_summary(_run(out))


def service_audit(out: Path, reference: dict) -> dict[str, list[str]]:
    """The training's audit, and the webhooks': every event of the job's run delivered, in order, once
    (a repeat of a delivery id counts as twice)."""
    run = _run(out)
    found = train_audit(run, reference)
    n = sum(1 for line in (run / "events.jsonl").read_text().splitlines() if line.strip())
    got = Counter(d["seq"] for d in _deliveries(out))
    found["lost"] += [f"webhook delivery of event {seq}" for seq in range(n) if not got[seq]]
    found["twice"] += [f"webhook delivery {seq} x{k}" for seq, k in sorted(got.items()) if k > 1]
    found["corrupted"] += [f"webhook delivery of event {seq}, which the run does not have" for seq in got if seq >= n]
    return found


def service_phase(out: Path) -> str:
    try:
        run = _run(out)
    except (AssertionError, FileNotFoundError):
        return "job service: starting (no job yet)"
    if not (run / "config.yaml").is_file():
        return "job service: job starting"
    return "job: " + train_phase(run)


def service_job(receiver: WebhookReceiver) -> Job:
    argv = lambda out: [sys.executable, str(Path(__file__).resolve()), str(out), f"{receiver.url}/{out.name}"]
    return Job(name="job service (a job with webhooks)", start=argv, resume=argv, summary=service_summary,
               audit=service_audit, phase=service_phase, timeout_s=1800,
               tolerance="the training's as above; every event of the job's run delivered to the webhook once, "
                         "in order")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
