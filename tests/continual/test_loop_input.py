"""Bad input to the continual loop gets one line (exit 2) or a 4xx, before any model loads: a loop
whose budget is already spent, a budget that cannot bind, a directory that holds a loop (or none),
proposals that name nothing or both things, configurations that cannot learn, the job service's
loops (owned keys, no held-out tasks, unknown loops). And what the loop reads from the serving
logs without a model: sessions joined with their outcomes, counted, torn lines skipped."""

import json
import urllib.error
import urllib.request

import pytest
from helpers import REPO, AppThread, cli

from agentboost.cli import main

from agentboost.continual.lineage import LoopState, fingerprint
from agentboost.continual.loop import ContinualLoop, propose
from agentboost.continual.sessions import ServedLog
from agentboost.run.config import ConfigError, load_config

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


class Service:
    def __init__(self, root):
        from agentboost.jobs.service import make_app
        from agentboost.jobs.store import JobStore

        self.store = JobStore(root)
        self.app = AppThread(make_app(self.store))
        self.token = self.store.token()

    def request(self, method, path, body=None):
        req = urllib.request.Request(self.app.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


@pytest.fixture
def service(tmp_path):
    s = Service(tmp_path / "jobs")
    yield s
    s.app.stop()


def one_line_error(capsys, argv, *needles):
    """``agentboost ARGV`` (in this process: the same ``main`` as the console script) fails with
    one line on stderr and exit status 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_a_spent_budget_and_a_budget_that_cannot_bind(tmp_path, smollm2_path, capsys):
    out = tmp_path / "loop"
    cfg = load_config(SMOKE, ["loop.max_cost=0.5", "run.cost_per_hour=2.0"])
    ContinualLoop(cfg, out, log=lambda m: None)  # made, not run: its state and production version on disk
    st = LoopState.load(out)
    assert st.production["spec"] == "smollm2-135m-instruct" and st.production["fingerprint"].startswith("sha256:")
    assert st.production["fingerprint"] == fingerprint(str(smollm2_path))  # the model's own manifest of hashes
    st.data["elapsed_s"] = 3600.0  # an hour at 2 USD: 2 USD of a 0.5 USD budget
    st.save()
    r = cli("continual", "run", "--resume", str(out))  # the console script itself, once
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "loop.max_cost 0.5 USD is already spent" in r.stderr
    one_line_error(capsys, ["continual", "run", "--resume", str(out)], "loop.max_cost 0.5 USD is already spent",
                   "2.0000 USD", "raise loop.max_cost to go on")
    one_line_error(capsys, ["continual", "run", SMOKE, "loop.max_cost=1", "--out", str(tmp_path / "b")],
                   "loop.max_cost needs run.cost_per_hour")
    one_line_error(capsys, ["continual", "run", SMOKE, "--out", str(out)], "already holds a loop", "--resume")
    one_line_error(capsys, ["continual", "run", "--resume", str(tmp_path / "none")], "holds no loop to resume")
    one_line_error(capsys, ["continual", "run", SMOKE, "data.val_file=", "--out", str(tmp_path / "c")],
                   "the offline gate needs held-out tasks")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()  # refused: nothing written


def test_proposals_and_configurations_refused(tmp_path, capsys):
    with pytest.raises(Exception, match="holds no loop"):
        propose(tmp_path, "smollm2-135m-instruct")
    (tmp_path / "loop.json").write_text("{}")
    with pytest.raises(Exception, match="not both"):
        propose(tmp_path, "x", noise=0.1)
    with pytest.raises(Exception, match="not both"):
        propose(tmp_path)
    with pytest.raises(Exception, match="--noise must be > 0"):
        propose(tmp_path, noise=-1.0)
    for override, needle in [("loop.method=grpo", "loop.method grpo learns from sessions served at"),
                             ("loop.split=1.5", "loop.split must be > 0 and < 1"),
                             ("loop.metric=clicks", "loop.metric must be one of reward, success"),
                             ("loop.alpha=0", "loop.alpha must be > 0"),
                             ("loop.judge={rubric: x}", "loop.judge")]:
        extra = ["validation.temperature=0"] if "grpo" in override else []
        with pytest.raises(ConfigError, match=needle):
            load_config(SMOKE, [override, *extra])
    one_line_error(capsys, ["continual", "status", str(tmp_path / "nothing")], "holds no loop")


def test_served_sessions_joined_with_their_outcomes(tmp_path):
    serve = tmp_path / "serve"
    serve.mkdir()

    def record(eid, session, spec, status="ok", reward=None, outcome=None):
        return {"episode_id": eid, "task_id": "t", "group_id": "t", "status": status, "reward": reward,
                "metadata": {"served": {"session": session, "spec": spec, "arm": "baseline", "outcome": outcome,
                                        "recorded_at": 0.0}}}

    rows = [record("e1", "s1", "P", reward=1.0, outcome={"reward": 1.0, "source": "client"}),
            record("e2", "s2", "P"),  # forgotten before its feedback: ab.jsonl has it
            record("e3", "s3", "P"),  # none at all: kept, counted, never trained on
            record("e4", "s4", "P", status="incomplete"),
            record("e5", "s5", "C", reward=0.0, outcome={"reward": 0.0})]
    with open(serve / "sessions.jsonl", "w") as f:
        for r in rows[:2]:
            f.write(json.dumps(r) + "\n")
        f.write('{"episode_id": "torn", "tas\n')  # a line a crash tore: skipped, what follows still read
        for r in rows[2:]:
            f.write(json.dumps(r) + "\n")
        f.write('{"episode_id": "half-written"')  # still being written: read at the next poll
    events = [{"event": "assign", "session": f"s{i}", "arm": "baseline"} for i in range(1, 7)]
    events.append({"event": "feedback", "session": "s2", "arm": "baseline", "reward": None, "success": True})
    (serve / "ab.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    log = ServedLog(serve, tmp_path)
    log.poll()
    assert set(log.sessions) == {"e1", "e2", "e3", "e4", "e5"}
    assert [log.reward(log.sessions[e]) for e in ("e1", "e2", "e3")] == [(1.0, "client"), (1.0, "feedback"),
                                                                         (None, None)]
    assert [s.episode_id for s in log.candidates_for("P", used=set())] == ["e1", "e2"]
    assert [s.episode_id for s in log.candidates_for("P", used={"e1"})] == ["e2"]
    counts = log.counts()
    assert counts == {"served": 6, "recorded": 5, "rewarded": {"feedback": 3}, "unrewarded": 1, "not_trainable": 1,
                      "unconfirmed_delivery": 0,
                      "not_recorded_yet": 1}
    with open(serve / "sessions.jsonl", "a") as f:
        f.write(', "late": 1}\n')
    log.poll()
    assert log.sessions["half-written"].spec == ""  # completed: read now (it names no policy: never trained on)
    (tmp_path / "judged.jsonl").write_text(json.dumps({"episode_id": "e3", "reward": 0.75}) + "\n")
    log.poll()
    assert log.reward(log.sessions["e3"]) == (0.75, "judge") and log.counts()["rewarded"] == {"feedback": 3, "judge": 1}


def test_the_job_service_refuses_bad_loops(service):
    status, body = service.request("POST", "/loops", {"loop_id": "a", "config": {"loop.gate_file": "/etc/passwd"},
                                                      "gate_data": [{"question": "q", "answer": "1"}]})
    assert status == 400 and b"may not set loop.gate_file" in body
    status, body = service.request("POST", "/loops", {"loop_id": "a"})
    assert status == 400 and b"gate_data" in body
    status, body = service.request("POST", "/loops", {"loop_id": "../x", "gate_data": [{"question": "q"}]})
    assert status == 400 and b"loop_id must be" in body
    status, body = service.request("POST", "/loops", {"loop_id": "a", "gate_data": [{"question": "q", "answer": "1"}],
                                                      "production": "/some/path:best"})
    assert status == 400 and b"production" in body
    assert service.request("GET", "/loops/none")[0] == 404
    assert service.request("POST", "/loops/none/propose", {"noise": 0.1})[0] == 404
    assert service.request("POST", "/loops/none/stop")[0] == 404
    status, body = service.request("GET", "/loops")
    assert status == 200 and json.loads(body) == {"loops": []}
    assert not (service.store.root / "loops" / "a").exists()  # a refused loop leaves nothing behind


def test_the_job_service_runs_a_loop_stops_and_resumes_it(service, smollm2_path):
    """POST /loops starts a real `agentboost continual run` process serving the embedded model at its
    own loopback port with the service's token; stopped, its state says why; started again under
    the same id it resumes (the same directory, the same port)."""
    import time

    rows = [{"task_id": f"g{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(2)]
    status, body = service.request("POST", "/loops", {"loop_id": "a", "gate_data": rows,
                                                      "config": {"loop.poll_s": 0.2}})
    assert status == 201, body
    base = json.loads(body)["base_url"]

    def status_of():
        return json.loads(service.request("GET", "/loops/a")[1])

    deadline = time.monotonic() + 240
    while not status_of().get("url") and time.monotonic() < deadline:
        assert status_of()["state"] == "running", status_of().get("error")
        time.sleep(0.5)
    s = status_of()
    assert s["state"] == "running" and s["url"] == base and s["production"] == "v0000", s
    req = urllib.request.Request(base + "/chat/completions", method="POST",
                                 data=json.dumps({"messages": [{"role": "user", "content": "Hi"}],
                                                  "max_tokens": 4}).encode(),
                                 headers={"Authorization": f"Bearer {service.token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200 and json.loads(r.read())["choices"][0]["message"]["role"] == "assistant"
    status, body = service.request("POST", "/loops/a/propose", {"noise": 0.1, "skip_gate": True})
    assert status == 201 and json.loads(body)["proposal"].endswith(".json")
    status, body = service.request("POST", "/loops/a/stop")
    assert status == 200 and json.loads(body)["state"] == "stopped"
    assert [x["loop_id"] for x in json.loads(service.request("GET", "/loops")[1])["loops"]] == ["a"]
    status, body = service.request("POST", "/loops", {"loop_id": "a", "gate_data": rows})
    assert status == 400 and b"resumes with its own configuration" in body
    status, body = service.request("POST", "/loops", {"loop_id": "a"})  # the same loop, resumed
    assert status == 201 and json.loads(body)["base_url"] == base
    rec = json.loads((service.store.root / "loops" / "a" / "loop.json").read_text())
    assert rec["resumed"] is True
    assert service.request("POST", "/loops/a/stop")[0] == 200
