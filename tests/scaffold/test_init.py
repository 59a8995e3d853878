"""``agentboost init DIR``: the starter project trains from its own directory with no environment
variable, its warm start teaches the embedded model to call the project's own tools, and the run
resumes without repeating the warm start."""

import json
import os

import pytest
from helpers import cli

from agentboost.scaffold.project import SHOP, tasks
from agentboost.trainer.loop import Trainer


def test_init_refuses_a_non_empty_directory_and_writes_consistent_data(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    r = cli("init", tmp_path)
    assert r.returncode == 2 and "is not empty" in r.stderr and (tmp_path / "mine.txt").read_text() == "keep me"
    train, test = tasks()
    assert not {t["question"] for t in train} & {t["question"] for t in test}
    for t in train + test:  # the answers are the tools' own table
        item = t["solution"]["calls"][0]["arguments"]["item"]
        assert t["answer"] == str(SHOP[item][0 if t["tool"] == "check_stock" else 1])


@pytest.mark.slow
def test_init_project_trains_and_calls_its_own_tools(tmp_path):
    project = tmp_path / "shop"
    cli("init", project, check=True)
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "config.yaml", "data", "reward.py", "tools.py"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the project's files
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("train", project / "config.yaml", "run.steps=2", "validation.at_start=false",
            "--run-dir", project / "runs/first", cwd=elsewhere, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    run = project / "runs/first"
    demos = [json.loads(line) for line in (run / "episodes/warm_start.jsonl").read_text().splitlines()]
    assert len(demos) == 24 and all(d["reward"] == 1.0 for d in demos)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    warm = next(e for e in events if e["event"] == "warm_start")
    assert warm["succeeded"] == 24 and warm["last_loss"] < warm["first_loss"] / 2
    sampled = [json.loads(line) for f in ("step_000001.jsonl", "step_000002.jsonl", "val_step_000002.jsonl")
               for line in (run / "episodes" / f).read_text().splitlines()]
    calls = [c for ep in sampled for c in ep["tool_calls"]]
    # the policy's own samples, after the warm start: calls to the project's tools that ran
    assert {c["name"] for c in calls if c["ok"]} <= {"check_stock", "get_price"}
    assert sum(c["ok"] for c in calls) >= len(sampled) // 4, [ep["final_answer"] for ep in sampled]
    assert "tool-call rate" in r.stdout and "done: 2 steps" in r.stdout
    # resumed, the run does not demonstrate again: the warm start is in its checkpoints
    trainer = Trainer(None, run, resume=True, log=lambda *_: None)
    try:
        assert trainer.warm_started and trainer.step == 2
    finally:
        trainer.close()
