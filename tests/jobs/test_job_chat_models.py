"""A job started through the job service with a judge reward (a chat model) whose API key is
planted in the service's environment: the key reaches the judge's calls (the chat server refuses
requests without it) and appears in no file under the job's directory (config, log, run, exports)
nor in any answer of the service (status, events, export). (A chat model as `eval`'s baseline is
grepped the same way in tests/evaluation/test_eval_chat_models.py.)"""

import json
import time
import urllib.request

import pytest
from helpers import CHAT_KEY, CHAT_KEY_ENV, AppThread

from agentboost.jobs.client import TrainingClient
from agentboost.jobs.service import make_app
from agentboost.jobs.store import JobStore

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

DATA = [{"query": "What is 2 + 3?", "expected_outcome": "5"}]


def _chat(server) -> dict:
    return {"provider": "openai", "model_id": "base", "base_url": server.url + "/v1", "api_key_env": CHAT_KEY_ENV,
            "max_retries": 1}


def test_a_job_with_a_judge_writes_no_key_anywhere(tmp_path, chat_server):
    judge = {"model": {**_chat(chat_server),
                       # a 135M judge keeps to the JSON asked for only when the server enforces it
                       "params": {"response_format": {"type": "json_schema", "json_schema": {"name": "grade", "schema": {
                           "type": "object", "required": ["score", "reason"],
                           "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                                          "reason": {"type": "string", "maxLength": 40}}}}}}},
             "rubric": "Score 1 when the final answer is the correct number, else 0.", "max_tokens": 80}
    config = {"batch_size": 1, "n_trajectories_per_query": 2, "n_iterations": 1, "checkpoint_interval": 1,
              "overrides": {"reward.judge": judge, "sampling.max_new_tokens": 16, "agent.max_model_calls": 2,
                            "run.tensorboard": False}}
    root = tmp_path / "jobs"
    svc = AppThread(make_app(JobStore(root)))
    answers = []
    try:
        client = TrainingClient(svc.url, root=root)
        job = client.start_training("judged", config, DATA, reward="judge")["job_id"]
        deadline = time.time() + 600
        while (status := client.get_status(job))["state"] not in ("completed", "failed", "cancelled"):
            assert time.time() < deadline, "the job did not finish"
            time.sleep(1.0)
        log = (root / job / "log.txt").read_text()
        assert status["state"] == "completed", log[-3000:]
        # the judge was called with the key (the server answers nothing without it)
        metrics = [json.loads(x) for x in (root / job / "run" / "metrics.jsonl").read_text().splitlines()]
        assert any(m.get("judge_calls", 0) >= 1 for m in metrics), metrics
        answers += [status, client.export_trajectories(job, "all")]
        req = urllib.request.Request(svc.url + f"/jobs/{job}/events", headers={"Authorization": f"Bearer {client.token}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            answers.append(r.read().decode())
    finally:
        svc.stop()
    assert answers[1]["episodes"] >= 2
    files = [f for f in root.rglob("*") if f.is_file()]
    assert len(files) > 10
    for f in files:
        assert CHAT_KEY.encode() not in f.read_bytes(), f"the API key leaked into {f}"
    for a in answers:
        assert CHAT_KEY not in (a if isinstance(a, str) else json.dumps(a, default=str))
    assert CHAT_KEY_ENV in (root / job / "config.yaml").read_text()  # the variable's name is what is kept
