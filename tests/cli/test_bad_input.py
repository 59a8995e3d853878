"""Bad input gets a clear error naming what is wrong."""

import json

import pytest
from helpers import cli

from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec
from agentboost.episodes.record import Episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.tasks import TaskFileError, load_tasks


def test_missing_model_path(tmp_path):
    r = cli("rollout", "--prompt", "hi", "--model", str(tmp_path / "missing-model"), "--out", str(tmp_path / "e.jsonl"))
    assert r.returncode == 2
    assert "missing-model" in r.stderr and "neither an embedded model" in r.stderr


def test_tool_import_path_that_does_not_import(tmp_path):
    r = cli("rollout", "--prompt", "hi", "--tool", "no_such_pkg.tools:calc", "--out", str(tmp_path / "e.jsonl"))
    assert r.returncode == 2
    assert "no_such_pkg.tools:calc" in r.stderr and "does not import" in r.stderr
    with pytest.raises(AgentSpecError, match="has no attribute 'nope'"):
        StrandsAgentSpec(tools=["agentboost.tools.calculator:nope"]).validate()
    with pytest.raises(AgentSpecError, match="defines no @tool functions"):
        StrandsAgentSpec(tools=["json"]).validate()


def test_task_file_with_missing_field(tmp_path):
    f = tmp_path / "tasks.jsonl"
    f.write_text(json.dumps({"task_id": "a", "question": "1+1?"}) + "\n" + json.dumps({"task_id": "b", "prompt": "2+2?"}) + "\n")
    with pytest.raises(TaskFileError, match=r"row 2: field 'question' is missing.*fields present: \['prompt', 'task_id'\]"):
        load_tasks(f)
    r = cli("rollout", "--tasks", str(f), "--out", str(tmp_path / "e.jsonl"))
    assert r.returncode == 2 and "tasks.jsonl: row 2: field 'question'" in r.stderr
    g = tmp_path / "prompts.jsonl"
    g.write_text(json.dumps({"prompt": "2+2?"}) + "\n")
    assert [t["question"] for t in load_tasks(g, question_field="prompt")] == ["2+2?"]


def test_task_files_parquet_and_errors(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"question": "a?", "answer": "1"}, {"question": "b?", "answer": "2"}]),
                   tmp_path / "t.parquet")
    tasks = load_tasks(tmp_path / "t.parquet")
    assert [t["task_id"] for t in tasks] == ["t-0", "t-1"] and tasks[1]["answer"] == "2"
    (tmp_path / "bad.jsonl").write_text("{not json}\n")
    with pytest.raises(TaskFileError, match="bad.jsonl:1: invalid JSON"):
        load_tasks(tmp_path / "bad.jsonl")
    with pytest.raises(TaskFileError, match="does not exist"):
        load_tasks(tmp_path / "none.jsonl")
    (tmp_path / "dup.jsonl").write_text('{"task_id": 1, "question": "x"}\n{"task_id": 1, "question": "y"}\n')
    with pytest.raises(TaskFileError, match="duplicate task_id '1'"):
        load_tasks(tmp_path / "dup.jsonl")


def test_bad_values_are_rejected():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="status"):
        Episode(episode_id="e", task_id="t", group_id="g", status="weird")
    with pytest.raises(AgentSpecError, match="max_model_calls"):
        StrandsAgentSpec(max_model_calls=0).validate()
