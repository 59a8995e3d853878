"""The tool-use example at smoke size: its data generator, demonstrations through the real agent
and calculator, a supervised warm start that raises their likelihood, and two GRPO steps from it."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial

import helpers
import pytest
from helpers import REPO, tool_result_texts

EXAMPLE = REPO / "examples" / "tool_use"
SYSTEM_PROMPT = ("You are a helpful assistant with a calculator tool. Use the calculator for the arithmetic, "
                 "then give the final answer as a number.")

cli = partial(helpers.cli, timeout=600, cwd=REPO)


def test_the_committed_data_is_what_the_generator_writes(tmp_path):
    r = subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for split in ("train", "test"):
        assert (tmp_path / f"{split}.jsonl").read_text() == (EXAMPLE / "data" / f"{split}.jsonl").read_text()
    train = {json.loads(line)["question"] for line in (EXAMPLE / "data" / "train.jsonl").read_text().splitlines()}
    test = {json.loads(line)["question"] for line in (EXAMPLE / "data" / "test.jsonl").read_text().splitlines()}
    assert len(train) == 400 and len(test) == 100 and not train & test


def test_demonstrations_refuse_a_task_without_a_solution(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"task_id": "x-1", "question": "What is 2 + 2?", "answer": "4"}) + "\n")
    r = cli("rollout", "--demonstrations", "--tasks", str(tasks), "--out", str(tmp_path / "d.jsonl"))
    assert r.returncode == 2 and "task 'x-1': no 'solution'" in r.stderr and "Traceback" not in r.stderr
    r = cli("rollout", "--demonstrations", "--prompt", "What is 2 + 2?", "--out", str(tmp_path / "d.jsonl"))
    assert r.returncode == 2 and "--demonstrations needs --tasks" in r.stderr


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """Eight demonstrations of training tasks, written by `agentboost rollout --demonstrations`."""
    d = tmp_path_factory.mktemp("tool_use")
    tasks = d / "tasks.jsonl"
    tasks.write_text("".join((EXAMPLE / "data" / "train.jsonl").read_text().splitlines(keepends=True)[:8]))
    r = cli("rollout", "--demonstrations", "--tasks", str(tasks), "--out", str(d / "demos.jsonl"),
            "--reward", "exact_answer", "--system-prompt", SYSTEM_PROMPT, "--max-model-calls", "3",
            "--max-new-tokens", "64")
    assert r.returncode == 0, r.stderr[-3000:]
    return d


def test_demonstrations_are_real_tool_using_episodes(demos):
    from agentboost.episodes.record import Episode, check_episode

    tasks = {json.loads(line)["task_id"]: json.loads(line) for line in (demos / "tasks.jsonl").read_text().splitlines()}
    episodes = [Episode.from_dict(json.loads(line)) for line in (demos / "demos.jsonl").read_text().splitlines()]
    assert len(episodes) == 8
    for ep in episodes:
        assert ep.status == "ok" and ep.reward == 1.0, (ep.task_id, ep.status, ep.error, ep.reward)
        assert [(t.name, t.ok) for t in ep.tool_calls] == [("calculator", True)]
        assert not check_episode(ep)  # token-exact like any model's episode
        # the calculator's own result is in the conversation and is the task's answer
        assert tool_result_texts(ep)[0] == tasks[ep.task_id]["answer"]


@pytest.mark.slow
def test_sft_raises_the_demonstrations_likelihood_and_grpo_runs_from_it(demos):
    import torch

    from agentboost.models.loading import load_policy
    from agentboost.trainer.sft import load_sft_rows, nll

    out = demos / "sft"
    r = cli("sft", str(demos / "demos.jsonl"), "--out", str(out), "--lr", "1e-3", "--batch-rows", "4", "--epochs", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = load_sft_rows([demos / "demos.jsonl"])
    assert len(rows) == 8  # one segment each: the tool call and the answer extend one sequence
    with torch.no_grad():
        losses = {}
        for name in ("smollm2-135m-instruct", str(out)):
            model, tok = load_policy(name)
            losses[name] = float(nll(model.eval(), rows, tok.pad_token_id)[0])
    assert losses[str(out)] < 0.5 * losses["smollm2-135m-instruct"], losses

    run = demos / "run"
    # one step and two held-out tasks (CI time); smoke.yaml itself runs two steps
    r = cli("train", str(EXAMPLE / "smoke.yaml"), f"model.path={out}", "validation.compare_to_base=true",
            "run.steps=1", "validation.max_tasks=2", "--run-dir", str(run))
    assert r.returncode == 0, r.stderr[-3000:]
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1]
    assert all("tool_success_rate" in s and "mean_turns" in s for s in steps)
    val = [json.loads(line) for line in (run / "validation.jsonl").read_text().splitlines()]
    assert val and "val_tool_call_rate" in val[-1]
    assert (run / "plots" / "reward.png").is_file() and (run / "plots" / "tool_use.png").is_file()
    # validation.compare_to_base: the trained policy against the warm start, paired on the same tasks
    cmp = json.loads((run / "compare_to_base" / "eval.json").read_text())
    assert cmp["baseline"]["policy"] == str(out) and cmp["model"]["episodes"] == cmp["baseline"]["episodes"] == 4
    assert 0 <= cmp["difference"]["p_value"] <= 1
    assert "compare_to_base" in (run / "events.jsonl").read_text()
