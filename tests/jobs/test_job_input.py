"""The job service never answers 500 to input: every bad request is a 4xx with a one-line reason,
leaves no job behind and the service keeps serving; configurations that would fail after the model
loads are refused at submission; webhooks to non-public addresses are refused unless allowed;
jobs over the concurrency limit queue."""

import http.client
import json
import threading
import time
from urllib.parse import urlparse

import pytest
from helpers import AppThread
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentboost.jobs.service import make_app
from agentboost.jobs.store import JobStore

DATA = [{"query": "What is 2 + 3?", "expected_outcome": "5"}]
OK = {"name": "ok", "training_data": DATA}


class Service:
    def __init__(self, root, **kwargs):
        self.store = JobStore(root, max_running=kwargs.pop("max_running", 2))
        self.app = AppThread(make_app(self.store, **kwargs))
        self.url = urlparse(self.app.url)
        self.token = self.store.token()

    def request(self, method, path, body=None, raw=None, auth=None):
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=60)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.putrequest(method, path)
        conn.putheader("Authorization", auth if auth is not None else f"Bearer {self.token}")
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders()
        if data is not None:
            conn.send(data)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, payload

    def jobs(self):
        return sorted(p.name for p in self.store.root.iterdir() if (p / "job.json").is_file())

    def stop(self):
        self.app.stop()


@pytest.fixture
def service(tmp_path):
    s = Service(tmp_path / "jobs")
    yield s
    s.stop()


NESTED = b"[" * 100_000 + b"]" * 100_000
CASES = [
    # (what, method, path, body or raw bytes, status, the reason begins with)
    ("non-JSON body", "POST", "/jobs", b"{nope", 400, "the request body is not JSON"),
    ("not UTF-8", "POST", "/jobs", b"\xff\xfe", 400, "the request body is not UTF-8 text"),
    ("deeply nested JSON", "POST", "/jobs", NESTED, 400, "the request body nests too deeply"),
    ("nested inside a field", "POST", "/jobs", b'{"name": "a", "config": ' + NESTED + b"}", 400,
     "the request body nests too deeply"),
    ("a list, not an object", "POST", "/jobs", [1], 400, "the request body must be a JSON object"),
    ("no name", "POST", "/jobs", {"training_data": DATA}, 400, "job name must be"),
    ("a name with a newline", "POST", "/jobs", {**OK, "name": "a\n"}, 400, "job name must be"),
    ("config a list", "POST", "/jobs", {**OK, "config": [1]}, 400, "config must be an object"),
    ("config a string", "POST", "/jobs", {**OK, "config": "x"}, 400, "config must be an object"),
    ("overrides a list", "POST", "/jobs", {**OK, "config": {"overrides": [1]}}, 400, "config.overrides must be an object"),
    ("overrides a string", "POST", "/jobs", {**OK, "config": {"overrides": "x"}}, 400, "config.overrides must be an object"),
    ("unknown config field", "POST", "/jobs", {**OK, "config": {"nope": 1}}, 400, "unknown GRPOConfig field 'nope'"),
    ("non-finite rate", "POST", "/jobs", {**OK, "config": {"learning_rate": 1e400}}, 400, "defaults: optim.lr must be a finite number"),
    ("training data a path", "POST", "/jobs", {**OK, "training_data": "/etc/passwd"}, 400, "training_data must be a list"),
    ("a row not an object", "POST", "/jobs", {**OK, "training_data": [1]}, 400, "training_data[0]: expected a dict"),
    ("unknown reward", "POST", "/jobs", {**OK, "reward": "no_such_reward"}, 400, "unknown reward 'no_such_reward'"),
    ("reward that does not import", "POST", "/jobs", {**OK, "reward": "nosuch.mod:fn"}, 400,
     "reward function 'nosuch.mod:fn' does not import"),
    ("tool that does not import", "POST", "/jobs", {**OK, "config": {"overrides": {"agent.tools": ["nosuch:tool"]}}},
     400, "tool 'nosuch:tool' does not import"),
    ("a data file of the server's", "POST", "/jobs", {**OK, "config": {"overrides": {"data.val_file": "/etc/passwd"}}},
     400, "config.overrides may not set data.val_file"),
    ("a model that is not there", "POST", "/jobs", {**OK, "config": {"overrides": {"model.path": "/nonexistent"}}},
     400, "model '/nonexistent' is neither an embedded model"),
    ("unknown job", "GET", "/jobs/nope-12345678", None, 404, "no job 'nope-12345678'"),
    ("cancel unknown job", "POST", "/jobs/nope-12345678/cancel", {}, 404, "no job"),
    ("webhook to loopback", "POST", "/webhooks", {"url": "http://127.0.0.1:9/x"}, 400,
     "webhook url 'http://127.0.0.1:9/x' refused: its host '127.0.0.1' is the non-public address"),
    ("webhook to a private address", "POST", "/webhooks", {"url": "http://10.1.2.3/x"}, 400, "webhook url"),
    ("webhook to a link-local address", "POST", "/webhooks", {"url": "http://169.254.169.254/latest"}, 400, "webhook url"),
    ("webhook events a string", "POST", "/webhooks", {"url": "http://127.0.0.1/x", "events": "all"}, 400,
     "events must be a list"),
    ("webhook secret too short", "POST", "/webhooks", {"url": "http://127.0.0.1/x", "secret": "short"}, 400,
     "secret must be text"),
    ("delete unknown webhook", "DELETE", "/webhooks/nope", None, 404, "no webhook subscription 'nope'"),
]


def test_every_bad_request_is_a_4xx_with_a_reason(service):
    outcomes = {}
    for what, method, path, body, status, reason in CASES:
        raw = body if isinstance(body, bytes) else None
        got, payload = service.request(method, path, body=None if raw is not None else body, raw=raw)
        error = json.loads(payload)["error"]
        assert (got, error.startswith(reason)) == (status, True), (what, got, error)
        assert "\n" not in error and "Traceback" not in error, what
        outcomes[what] = got
    assert service.jobs() == []  # nothing refused left a job behind
    assert service.request("GET", "/jobs")[0] == 200
    # the headers: a token of any characters is a wrong token
    assert service.request("GET", "/jobs", auth="Bearer é\u0301ü".encode())[0] == 401  # raw UTF-8 bytes
    assert service.request("GET", "/jobs", auth="")[0] == 401
    print(f"{len(outcomes)} cases: " + ", ".join(f"{n} x {s}" for s in sorted(set(outcomes.values()))
                                                 for n in [sum(v == s for v in outcomes.values())]))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                           max_leaves=20)
fields = st.fixed_dictionaries({}, optional={"name": json_values | st.text(max_size=70), "config": json_values,
                                             "training_data": json_values, "evaluation_data": json_values,
                                             "reward": json_values})


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=fields | json_values)
def test_no_body_makes_the_service_fail(service, body):
    status, payload = service.request("POST", "/jobs", body=body)
    if status == 201:  # a valid job by chance: it is cancelled at once
        service.request("POST", f"/jobs/{json.loads(payload)['job_id']}/cancel", {})
        return
    assert status == 400, (body, status, payload[:300])
    assert json.loads(payload)["error"]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
# (a header with CR or LF cannot be sent at all: http.client refuses it)
@given(body=st.binary(max_size=200), header=st.text(st.characters(blacklist_characters="\r\n"), max_size=40))
def test_no_bytes_or_header_make_the_service_fail(service, body, header):
    assert service.request("POST", "/jobs", raw=body)[0] == 400
    assert service.request("POST", "/webhooks", raw=body)[0] == 400
    # a wrong token is 401; a header HTTP itself forbids (control characters) is the server's 400
    assert service.request("GET", "/jobs", auth=header.encode("utf-8").decode("latin-1"))[0] in (400, 401)


def test_private_webhooks_when_the_service_allows_them(tmp_path):
    s = Service(tmp_path / "jobs", allow_private_webhooks=True)
    try:
        status, payload = s.request("POST", "/webhooks", {"url": "http://127.0.0.1:9/x"})
        assert status == 201 and json.loads(payload)["url"] == "http://127.0.0.1:9/x"
    finally:
        s.stop()


@pytest.mark.slow
def test_jobs_over_the_limit_queue_and_a_queued_job_cancels(tmp_path, smollm2_path):
    s = Service(tmp_path / "jobs", max_running=1)
    try:
        body = {**OK, "config": {"n_iterations": 50, "batch_size": 1, "n_trajectories_per_query": 2}}
        first = json.loads(s.request("POST", "/jobs", {**body, "name": "first"})[1])["job_id"]
        second = json.loads(s.request("POST", "/jobs", {**body, "name": "second"})[1])["job_id"]
        state = lambda job: json.loads(s.request("GET", f"/jobs/{job}")[1])["state"]  # noqa: E731
        assert state(first) in ("starting", "running") and state(second) == "queued"
        assert json.loads((s.store.root / second / "job.json").read_text())["pid"] is None  # nothing started
        # two cancels at once of the queued job, then of the running one: all answered, none started
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(s.request("POST", f"/jobs/{second}/cancel", {})))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a[0] for a in answers] == [200, 200] and state(second) == "cancelled"
        assert s.request("POST", f"/jobs/{first}/cancel", {})[0] == 200
        deadline = time.time() + 120
        while state(first) not in ("cancelled", "failed") and time.time() < deadline:
            time.sleep(0.5)
        assert state(first) == "cancelled"
        time.sleep(1.5)  # a round of the queue's starter: the cancelled job stays unstarted
        assert state(second) == "cancelled" and s.store.start_queued() == []
    finally:
        s.stop()


def test_the_same_agent_in_yaml_and_in_a_job_records_the_same_config(tmp_path):
    import yaml

    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.run.config import load_config

    spec = StrandsAgentSpec(tools=["agentboost.tools.calculator:calculator"], factory="helpers:recording_factory",
                            max_model_calls=9, system_prompt="Use the calculator.", tool_parser="hermes")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agent": spec.as_config()}))
    from_yaml = load_config(config, [], for_training=False).to_dict()["agent"]
    s = Service(tmp_path / "jobs", max_running=1)
    try:
        status, payload = s.request("POST", "/jobs", {**OK, "agent": spec.as_config()})
        assert status == 201, payload
        job = json.loads(payload)["job_id"]
        s.request("POST", f"/jobs/{job}/cancel", {})
        from_job = yaml.safe_load((s.store.root / job / "config.yaml").read_text())["agent"]
        assert from_job == from_yaml and from_job["factory"] == "helpers:recording_factory"
        status, payload = s.request("POST", "/jobs", {**OK, "agent": {"max_model_calls": 9, "nope": 1}})
        assert status == 400 and "agent: unknown keys ['nope']" in json.loads(payload)["error"]
        status, payload = s.request("POST", "/jobs", {**OK, "config": {"max_steps_per_trajectory": 4},
                                                      "agent": {"max_model_calls": 9}})
        assert status == 400 and "two call limits" in json.loads(payload)["error"]
    finally:
        s.stop()


def test_a_body_that_trickles_in_is_answered_408_and_the_service_goes_on(tmp_path, monkeypatch):
    # a client that sends its headers and then its body a byte at a time (or never) held a request
    # open for as long as it liked
    import socket

    from agentboost.jobs import service

    monkeypatch.setattr(service, "BODY_TIMEOUT_S", 1.0, raising=False)
    s = Service(tmp_path / "jobs")
    try:
        conn = socket.create_connection((s.url.hostname, s.url.port), timeout=10)
        conn.sendall(f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {s.token}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na".encode())
        t0 = time.monotonic()
        reply = conn.recv(65536).decode(errors="replace")
        conn.close()
        assert reply.startswith("HTTP/1.1 408"), reply[:300]
        assert "the request body did not arrive within 1 s" in reply
        assert time.monotonic() - t0 < 10
        assert s.request("GET", "/jobs")[0] == 200 and s.jobs() == []
    finally:
        s.stop()


def test_a_failed_jobs_error_is_its_reason_not_its_progress_bars(tmp_path):
    # the error was the log's last 2,000 characters: 2.5 KB of progress bars, the reason cut off
    store = JobStore(tmp_path / "jobs")
    d = store.root / "bars-0123abcd"
    d.mkdir(parents=True)
    (d / "config.yaml").write_text("run: {steps: 2}\n")
    reason = "agentboost train: error: config: sampling.max_new_tokens must be <= 1048576, got 1000000000"
    bars = "".join(f"\rLoading weights: {p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:0{p % 10}<00:01, 99.1it/s]"
                   for p in range(0, 101, 2))
    (d / "log.txt").write_text("starting\n" + bars * 3 + "\n\x1b[31m" + reason + "\x1b[0m\n")
    store._save(d, {"job_id": d.name, "name": "bars", "created_at": 0.0, "pid": 2**22 + 7, "proc_start": "1",
                    "cancel_requested": False, "reward": "exact_answer", "metadata": {}})
    status = store.status(d.name)
    assert status["state"] == "failed" and status["error"] == "starting\n" + reason, status["error"][:300]
    # a run that failed says why in its events: that line is the error
    (d / "run").mkdir()
    (d / "run" / "events.jsonl").write_text(json.dumps({"event": "failed", "step": 1,
                                                        "error": "EpisodesFailed: step 1: 4 of 4 episodes failed"}) + "\n")
    assert store.status(d.name)["error"] == "EpisodesFailed: step 1: 4 of 4 episodes failed"
