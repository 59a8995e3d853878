"""Without isolation (here: bubblewrap pointed at a path that does not exist), runs that execute
model-written code refuse to start with one line naming what is missing, before any model loads;
allowed explicitly, they run with a warning kept in the run's result."""

import json
import os

from helpers import cli

NO_BWRAP = {**os.environ, "AGENTBOOST_BWRAP": "/nonexistent/bwrap", "AGENTBOOST_SANDBOX_ALLOW_WEAK": ""}


def _tasks(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "t1", "question": "print 3", "answer": None,
                                 "tests": json.dumps({"public": [], "hidden": [
                                     {"kind": "stdio", "input": "", "output": "3"}]})}) + "\n")
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": "t1", "answer": "```python\nprint(3)\n```"}) + "\n")
    return tasks, answers


def test_sandbox_info_names_what_is_missing():
    r = cli("sandbox", "info", env=NO_BWRAP)
    assert r.returncode == 0, r.stderr
    assert "sandbox: NOT isolated" in r.stdout and "missing: bubblewrap failed to start a sandbox" in r.stdout


def test_score_refuses_then_runs_when_allowed(tmp_path):
    tasks, answers = _tasks(tmp_path)
    r = cli("score", "--reward", "code", "--tasks", tasks, "--answers", answers, env=NO_BWRAP)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line, = r.stderr.strip().splitlines()
    assert line.startswith("agentboost score: error: this run (reward code) executes model-written code, but "
                           "the sandbox cannot isolate it here") and "sandbox.allow_weak: true" in line
    r = cli("score", "--reward", "code", "--tasks", tasks, "--answers", answers, "--allow-weak-sandbox",
            env=NO_BWRAP)
    assert r.returncode == 0, r.stderr
    assert "warning: weak sandbox" in r.stdout and r.stdout.strip().endswith("passed=1 total=1")
    # a reward that runs no code needs no sandbox
    r = cli("score", "--reward", "exact_answer", "--tasks", tasks, "--answers", answers, env=NO_BWRAP)
    assert r.returncode == 0, r.stderr


def test_train_refuses_before_the_model_loads(tmp_path):
    tasks, _ = _tasks(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"data:\n  train_file: {tasks}\nreward:\n  name: code\n"
                      "agent:\n  tools: [agentboost.tools.strands_code_tool:test_code]\n")
    r = cli("train", config, "--run-dir", tmp_path / "run", env=NO_BWRAP, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(
        "agentboost train: error: this run (reward code and tool agentboost.tools.strands_code_tool:test_code) "
        "executes model-written code")
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_allowing_a_weak_sandbox_warns_and_reaches_the_workers(monkeypatch):
    import pytest

    from agentboost.errors import InputError
    from agentboost.run.assembly import check_sandbox
    from agentboost.sandbox import runner

    weak = {**runner.protections(), "isolated": False, "missing": ["bubblewrap (bwrap) not found"]}
    monkeypatch.setattr(runner, "protections", lambda: weak)
    monkeypatch.delenv("AGENTBOOST_SANDBOX_ALLOW_WEAK", raising=False)
    assert check_sandbox("exact_answer", ["agentboost.tools.calculator:calculator"], None) is None
    with pytest.raises(InputError, match=r"this run \(reward code\) executes model-written code"):
        check_sandbox("code", [], None)
    warning = check_sandbox("code", [], True)
    assert warning.startswith("weak sandbox: model-written code is not isolated from the host (bubblewrap")
    assert os.environ["AGENTBOOST_SANDBOX_ALLOW_WEAK"] == "1"  # the rollout workers inherit it


def test_ci_has_an_isolating_sandbox():
    # CI installs bubblewrap (setup.sh, as root): there the sandbox must isolate, or this fails
    from agentboost.sandbox.runner import protections

    if os.environ.get("CI", "").lower() != "true":
        import pytest

        pytest.skip("outside CI a machine without bubblewrap runs the weak sandbox (see tests/conftest.py)")
    assert protections()["isolated"], protections()["missing"]
