"""The warm start (``trainer/warm_start.py``): demonstrations through the run's own agent, then
supervised steps, before GRPO. Refused before the model loads when a task has no solution; a warm
start whose demonstrations all fail stops the run loudly. A full run with a warm start is
``tests/scaffold/test_init.py`` (the starter project) and the quickstart page's first run."""

import json

import pytest
from helpers import REPO, cli

from agentboost.errors import InputError
from agentboost.run.config import load_config
from agentboost.trainer.loop import Trainer
from agentboost.trainer.warm_start import WarmStartError, warm_start_tasks

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


def write_tasks(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_the_first_n_tasks_are_demonstrated_and_each_needs_a_solution(tmp_path):
    cfg = load_config(SMOKE, ["warm_start.demonstrations=3"])
    assert [t["task_id"] for t in warm_start_tasks(cfg)] == ["train-0", "train-1", "train-2"]
    assert warm_start_tasks(load_config(SMOKE)) == []  # 0: no warm start
    tasks = write_tasks(tmp_path / "t.jsonl", [
        {"task_id": "a", "question": "1 + 1?", "answer": "2",
         "solution": {"calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}], "answer": "2"}},
        {"task_id": "b", "question": "2 + 2?", "answer": "4"}])
    with pytest.raises(InputError, match=r"'solution'.*task 'b'"):
        warm_start_tasks(load_config(SMOKE, ["warm_start.demonstrations=2", f"warm_start.tasks_file={tasks}"]))
    with pytest.raises(InputError, match="warm_start.demonstrations is 5 but warm_start.tasks_file .* holds 2 tasks"):
        warm_start_tasks(load_config(SMOKE, ["warm_start.demonstrations=5", f"warm_start.tasks_file={tasks}"]))
    with pytest.raises(InputError, match="warm_start.lr must be > 0"):
        load_config(SMOKE, ["warm_start.lr=0"])


def test_train_refuses_a_task_without_a_solution_before_the_model_loads(tmp_path):
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "x", "question": "1 + 1?", "answer": "2"}])
    r = cli("train", SMOKE, "warm_start.demonstrations=1", f"warm_start.tasks_file={tasks}",
            "--run-dir", tmp_path / "run", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "warm_start needs a 'solution'" in r.stderr and "task 'x'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()  # nothing written


def test_a_warm_start_whose_demonstrations_all_fail_stops_the_run(tmp_path):
    # solutions that give the wrong answer: every demonstration scores 0, nothing worth imitating
    wrong = write_tasks(tmp_path / "wrong.jsonl", [
        {"task_id": f"w{i}", "question": f"What is {i} + 1?", "answer": str(i + 1),
         "solution": {"calls": [{"name": "calculator", "arguments": {"expression": f"{i} + 1"}}],
                      "answer": "The answer is 999."}} for i in range(2)])
    cfg = load_config(SMOKE, ["warm_start.demonstrations=2", f"warm_start.tasks_file={wrong}", "data.val_file="])
    trainer = Trainer(cfg, tmp_path / "run", log=lambda *_: None)
    with pytest.raises(WarmStartError, match="none of the 2 demonstrations succeeded"):
        trainer.run()
    demos = [json.loads(line) for line in (tmp_path / "run/episodes/warm_start.jsonl").read_text().splitlines()]
    assert len(demos) == 2 and all(d["reward"] == 0.0 and d["tool_calls"] for d in demos)  # kept, with their calls
    events = [json.loads(line) for line in (tmp_path / "run/events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "failed" and "WarmStartError" in events[-1]["error"]
    assert not (tmp_path / "run/result.json").exists()  # never "completed"
    assert not list((tmp_path / "run/checkpoints").glob("step_*"))
