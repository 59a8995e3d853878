"""agentboost eval: the paired test, and the command on the real embedded model."""

import json
from functools import partial

import helpers
import pytest
from helpers import REPO

from agentboost.evaluation.statistics import EvalInputError, paired_comparison

cli = partial(helpers.cli, timeout=600, cwd=REPO)


def test_identical_outcomes_differ_by_nothing():
    scores = {f"t{i}": [1.0, 0.0] if i % 2 else [1.0, 1.0] for i in range(10)}
    r = paired_comparison(scores, dict(scores))
    assert r.mean_difference == 0 and r.p_value == 1.0 and not r.significant and r.differing_tasks == 0


def test_exact_p_value_when_few_tasks_differ():
    # 6 tasks all better by 1, 4 equal: only the all-positive and all-negative sign patterns are as
    # extreme, so p = 2 / 2**6
    model = {f"t{i}": [1.0] for i in range(10)}
    base = {f"t{i}": [0.0] if i < 6 else [1.0] for i in range(10)}
    r = paired_comparison(model, base)
    assert r.p_value == pytest.approx(2 / 64) and r.significant and r.mean_difference == pytest.approx(0.6)
    assert r.ci95[0] < 0.6 < r.ci95[1]
    assert not paired_comparison(model, base, alpha=0.01).significant


def test_a_model_better_on_most_tasks_is_significant_and_a_coin_flip_is_not():
    model = {f"t{i}": [1.0, 1.0, 0.0] for i in range(40)}
    base = {f"t{i}": ([0.0, 0.0, 0.0] if i < 30 else [1.0, 1.0, 1.0]) for i in range(40)}
    r = paired_comparison(model, base, seed=1)  # 40 differing tasks: Monte Carlo
    assert r.differing_tasks == 40 and r.p_value < 0.01 and r.significant
    mixed = {f"t{i}": ([1.0] if i % 2 else [0.0]) for i in range(40)}
    flipped = {f"t{i}": ([0.0] if i % 2 else [1.0]) for i in range(40)}
    r = paired_comparison(mixed, flipped, seed=1)
    assert r.mean_difference == 0 and r.p_value > 0.5 and not r.significant


def test_different_task_sets_are_refused():
    with pytest.raises(EvalInputError, match="different tasks"):
        paired_comparison({"a": [1.0]}, {"b": [1.0]})


@pytest.mark.slow
def test_eval_of_a_model_against_itself(tmp_path, smollm2_path):
    r = cli("eval", "--model", "smollm2-135m-instruct", "--baseline", str(smollm2_path),
            "--tasks", "examples/quickstart/data/test.jsonl", "--max-tasks", "2", "--samples", "2",
            "--out", str(tmp_path / "ev"), "validation.temperature=0", "validation.max_new_tokens=16")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert res["tasks"] == 2 and res["model"]["episodes"] == res["baseline"]["episodes"] == 4
    # greedy, same seed, same weights: the same outcomes, so no difference and nothing significant
    assert res["model"]["success_rate"] == res["baseline"]["success_rate"]
    assert res["difference"]["mean_difference"] == 0 and not res["difference"]["significant"]
    assert "not significant" in r.stdout
    assert len((tmp_path / "ev" / "model_episodes.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
def test_eval_bad_input_is_named(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("{}")
    r = cli("eval", "--model", str(run), "--baseline", "smollm2-135m-instruct",
            "--tasks", "examples/quickstart/data/test.jsonl", "--max-tasks", "1", "--out", str(tmp_path / "ev"))
    assert r.returncode == 2 and "has no intact checkpoint" in r.stderr and "Traceback" not in r.stderr
    r = cli("eval", "--model", "smollm2-135m-instruct", "--out", str(tmp_path / "ev"))
    assert r.returncode == 2 and "no held-out tasks" in r.stderr
