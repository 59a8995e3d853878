"""veRL dataset rows: written by the real CLI, read back by veRL's own ``RLHFDataset``, and turned
back into the same agentboost task by the agent loop."""

import json

import pyarrow.parquet as pq
import pytest
from helpers import cli

from agentboost.integrations.verl.agent_loop import task_from_row
from agentboost.integrations.verl.config import compose_ppo_config
from agentboost.tasks import load_tasks

TASKS = [
    {"task_id": "a", "question": "What is 2+3?", "answer": 5},
    {"task_id": "b", "question": "Name the capital of France.", "answer": "Paris", "metadata": {"level": 2}},
    {"task_id": "c", "question": "Write f(x) returning x+1.",
     "tests": [{"input": "1", "output": "2"}], "fn_name": "f", "data_source": "code"},
]


def test_any_task_file_becomes_verl_rows_that_verls_dataset_reads(tmp_path, smollm2_path):
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    out = tmp_path / "verl" / "train.parquet"
    assert "wrote 3 veRL rows" in cli("data", "verl", str(src), "--out", str(out), "--agent-name", "my_agent",
                                    check=True).stdout

    table = pq.read_table(out)
    assert {"prompt", "agent_name", "data_source", "reward_model", "extra_info"} <= set(table.column_names)
    cfg = compose_ppo_config([f"data.train_files={out}", f"actor_rollout_ref.model.path={smollm2_path}"])
    ds = RLHFDataset(data_files=[str(out)], tokenizer=AutoTokenizer.from_pretrained(str(smollm2_path)),
                     config=cfg.data)
    assert len(ds) == 3
    expected = load_tasks(src)
    for i, want in enumerate(expected):
        row = ds[i]
        assert row["agent_name"] == "my_agent" and row["index"] == i
        assert row["raw_prompt"] == [{"role": "user", "content": want["question"]}]
        assert row["data_source"] == (want.get("data_source") or "tasks")
        assert row["reward_model"]["ground_truth"] == ("" if "answer" not in want else str(want["answer"]))
        assert task_from_row(row) == want  # the task the agent loop runs is the task file's row


def test_data_prepare_writes_verl_rows_next_to_the_task_files(tmp_path):
    src = tmp_path / "math.jsonl"
    src.write_text("".join(json.dumps({"problem": f"What is {i}+{i}?", "answer": str(2 * i)}) + "\n" for i in range(10)))
    out = tmp_path / "math"
    text = cli("data", "prepare", "math", "--source", str(src), "--out", str(out), "--test-fraction", "0.2",
               "--verl-agent", "strands_math", check=True).stdout
    assert "veRL rows" in text
    train = pq.read_table(out / "verl_train.parquet").to_pylist()
    test = pq.read_table(out / "verl_test.parquet").to_pylist()
    assert len(train) == 8 and len(test) == 2
    tasks = {t["task_id"]: t for t in load_tasks(out / "train.parquet")}
    for row in train:
        assert row["agent_name"] == "strands_math" and row["data_source"] == "math"
        task = task_from_row(row)
        assert task == tasks[task["task_id"]] and row["reward_model"]["ground_truth"] == task["answer"]


def test_a_bad_task_file_is_a_named_error(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps({"task_id": "x", "prompt": "no question field"}) + "\n")
    res = cli("data", "verl", str(src), "--out", str(tmp_path / "o.parquet"), timeout=120)
    assert res.returncode != 0 and "question" in res.stderr and str(src) in res.stderr
    assert not (tmp_path / "o.parquet").exists()
    with pytest.raises(Exception, match="agentboost_task"):
        task_from_row({"extra_info": {"agentboost_task": "[1, 2]"}})
