"""The Python API: the guide's GRPOConfig and data shape, train, status, evaluate, export."""

import json
import socket
import urllib.request

import pytest

import agentboost
from agentboost.api import APIError, GRPOConfig, task_rows


def test_guide_names_map_and_typos_are_named():
    cfg = GRPOConfig(n_iterations=7, batch_size=3, n_trajectories_per_query=5, learning_rate=2e-4,
                     checkpoint_interval=2, max_steps_per_trajectory=3, overrides={"sampling.temperature": 0.5})
    o = cfg.training_overrides()
    for expected in ("run.steps=7", "data.tasks_per_step=3", "data.group_size=5", "optim.lr=0.0002",
                     "run.checkpoint_every=2", "agent.max_model_calls=3", "sampling.temperature=0.5"):
        assert expected in o
    with pytest.raises(APIError, match="did you mean 'learning_rate'"):
        GRPOConfig.from_dict({"learning_rat": 1e-4})


def test_data_shapes():
    rows = task_rows([{"query": "What is 1 + 1?", "expected_outcome": "2"}, {"question": "q?", "task_id": "x"}], "d")
    assert rows[0] == {"question": "What is 1 + 1?", "answer": "2", "task_id": "d-0"}
    assert rows[1]["task_id"] == "x"
    with pytest.raises(APIError, match=r"d\[0\]: needs 'query'"):
        task_rows([{"prompt": "x"}], "d")
    with pytest.raises(APIError, match="is empty"):
        task_rows([], "d")


@pytest.mark.slow
def test_train_status_evaluate_export(tmp_path, smollm2_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = [{"query": f"What is {a} + {b}?", "expected_outcome": str(a + b)} for a, b in [(2, 3), (4, 4), (1, 6), (5, 2)]]
    cfg = GRPOConfig(n_iterations=1, batch_size=2, n_trajectories_per_query=2, checkpoint_interval=1,
                     max_budget_usd=1.0, cost_per_hour_usd=3600.0,  # a dollar a second: a step uses the budget
                     overrides={"sampling.max_new_tokens": 16, "validation.max_new_tokens": 16, "validation.k": 1,
                                "validation.temperature": 0, "validation.at_start": False, "run.tensorboard": False,
                                "run.prometheus_port": port})
    scraped = []

    def log(message):  # while the run is up (after its first step), its own metrics endpoint answers
        if message.startswith("step 1/"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                scraped.append(r.read().decode())

    run = agentboost.train(cfg, training_data=data, evaluation_data=data[:2], run_dir=tmp_path / "run", log=log)
    st = run.status()
    assert st["state"] == "completed" and st["step"] == 1 and st["total_steps"] == 1
    assert st["budget_limit_usd"] == 1.0 and st["budget_used_usd"] >= 0.9
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["level"] for e in events if e["event"] == "budget_warning"] == [0.75, 0.9]
    assert [e["event"] for e in events][0] == "progress" and events[-1]["event"] == "completed"
    assert scraped and "training_jobs_created_total 1.0" in scraped[0] and 'agentboost_training_step{job="run"} 1.0' in scraped[0]
    assert st["validation_accuracy"] is not None and st["loss"] is not None
    res = run.evaluate(samples=1)
    assert res["tasks"] == 2 and res["model"]["episodes"] == 2 and "p_value" in res["difference"]
    assert (tmp_path / "run" / "eval" / "eval.json").is_file()
    n = agentboost.export_trajectories(run, tmp_path / "all.jsonl")
    assert n == 4 and all("segments" in json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines())
    with pytest.raises(APIError, match="already holds a run"):
        agentboost.train(cfg, training_data=data, run_dir=tmp_path / "run")


@pytest.mark.slow
def test_the_agent_spec_is_what_trains(tmp_path, smollm2_path, monkeypatch):
    # the factory and the call limit of the spec reach the workers; nothing of it is dropped
    import yaml

    from agentboost.agents.strands_agent import StrandsAgentSpec

    built = tmp_path / "built"
    built.mkdir()
    monkeypatch.setenv("AGENTBOOST_TEST_FACTORY_DIR", str(built))
    data = [{"query": f"What is {a} + {b}?", "expected_outcome": str(a + b)} for a, b in [(2, 3), (4, 4)]]
    cfg = GRPOConfig(n_iterations=1, batch_size=2, n_trajectories_per_query=2,
                     overrides={"sampling.max_new_tokens": 16, "run.tensorboard": False})
    spec = StrandsAgentSpec(factory="helpers:recording_factory", max_model_calls=9)
    agentboost.train(cfg, training_data=data, agent=spec, run_dir=tmp_path / "run", log=lambda m: None)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["agent"]
    assert saved["factory"] == "helpers:recording_factory" and saved["max_model_calls"] == 9
    assert len(list(built.iterdir())) >= 4  # one build per episode, in the workers
    with pytest.raises(agentboost.api.APIError, match="two call limits: GRPOConfig.max_steps_per_trajectory=4 "
                                                       "and the agent's max_model_calls=9"):
        agentboost.train(GRPOConfig(max_steps_per_trajectory=4), training_data=data, agent=spec,
                         run_dir=tmp_path / "run2")
    assert not (tmp_path / "run2").exists()
