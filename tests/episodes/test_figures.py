"""One number for one thing: every report names its success figure the same way (pass@1 from how
many tasks x samples, greedy or sampled), and none prints ``nan``: with too few tasks or episodes
for an interval it says so."""

from __future__ import annotations

import json

import pytest

from agentboost.api import Run
from agentboost.episodes.summary import ci95_text, interval_text, mean_ci95
from agentboost.evaluation.statistics import difference_text, paired_comparison, unpaired_comparison
from agentboost.run.config import TrainConfig
from agentboost.run.metrics import figure_text, validation_figure, validation_sample


def test_no_interval_below_two_values_and_the_reports_say_so():
    assert mean_ci95([1.0]) is None and mean_ci95([]) is None
    assert mean_ci95([0.0, 1.0]) == pytest.approx(1.96 * 0.5 ** 0.5 / 2 ** 0.5)
    assert ci95_text(None, 1, "tasks") == "no 95% CI from 1 task"
    assert ci95_text(0.25, 8) == "± 0.250"
    one = paired_comparison({"t1": [1.0, 1.0]}, {"t1": [0.0, 1.0]})
    assert one.ci95 is None and one.tasks == 1
    line = difference_text(1.0, 0.5, one.mean_difference, one.ci95, one.p_value, one.tasks)
    assert "no 95% CI from 1 task" in line and "nan" not in line
    two = paired_comparison({"t1": [1.0], "t2": [0.0]}, {"t1": [0.0], "t2": [0.0]})
    lo, hi = two.ci95
    assert interval_text(two.ci95, two.tasks) == f"95% CI {lo:+.3f} .. {hi:+.3f}" and lo < 0.5 < hi
    assert json.dumps(one.__dict__)  # JSON null, never NaN (which is not JSON)
    assert "NaN" not in json.dumps(one.__dict__)
    assert unpaired_comparison([1.0], [0.0, 1.0]).ci95 is None


def test_status_and_the_summary_name_the_validation_figure(tmp_path):
    cfg = TrainConfig()
    cfg.validation.k, cfg.validation.temperature, cfg.data.val_file = 2, 0.0, "val.jsonl"
    row = {"step": 2, "val_pass@1": 1.0, "val_success_ci95": None,  # one episode: no interval
           **validation_sample(cfg, tasks=1, episodes=1, aborted=1)}
    fig = validation_figure(row)
    assert fig == {"name": "validation pass@1", "value": 1.0, "step": 2, "tasks": 1, "samples_per_task": 2,
                   "episodes": 1, "aborted": 1, "temperature": 0.0, "sampling": "greedy",
                   "tasks_file": "val.jsonl", "ci95": None}
    text = figure_text(fig)
    assert text == "pass@1 1.000 no 95% CI from 1 episode (1 tasks x 2 samples greedy, 1 episodes, 1 aborted left out)"
    sampled = figure_text({**fig, "temperature": 0.7, "sampling": "sampled", "ci95": 0.1, "aborted": 0})
    assert sampled == "pass@1 1.000 ± 0.100 (1 tasks x 2 samples at temperature 0.7, 1 episodes)"
    (tmp_path / "validation.jsonl").write_text(json.dumps(row) + "\n")
    status = Run(tmp_path).status()
    assert status["validation_accuracy"] == 1.0 and status["validation"] == fig
