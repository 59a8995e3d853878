"""Runs never say "done" on garbage (issue 26, run health): non-finite updates stop the run before
broken weights are checkpointed, a step whose episodes all failed stops it naming why, and bad
numbers are refused before anything starts."""

import json
import math
import os

import pytest
import torch
from helpers import REPO, cli, model_call

from agentboost.episodes.record import Episode, Status, build_segments
from agentboost.errors import RunFailed
from agentboost.run import health
from agentboost.run.config import ConfigError, load_config
from agentboost.trainer import loop

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
SMALL = ["data.tasks_per_step=2", "data.group_size=2", "sampling.max_new_tokens=16", "validation.max_tasks=2",
         "validation.max_new_tokens=16", "reward.name=helpers:length_reward"]


def ep(status=Status.OK, error=None):
    calls = [model_call([1], [2])]
    return Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=build_segments(calls),
                   status=status, error=error)


def test_the_checks_name_what_is_wrong():
    health.check_loss_and_grad(0.5, 1.0, 3)
    for loss, grad in ((math.nan, 1.0), (0.1, math.inf)):
        with pytest.raises(health.NonFiniteUpdate, match="step 3: .*not finite"):
            health.check_loss_and_grad(loss, grad, 3)
    health.check_weights([torch.ones(3)], 1)
    with pytest.raises(health.NonFiniteUpdate, match="made 2 weights non-finite"):
        health.check_weights([torch.ones(3), torch.tensor([1.0, math.nan, math.inf])], 1)
    eps = [ep(Status.ERROR, "KeyError: 'answer'"), ep(Status.ERROR, "KeyError: 'answer'"), ep(Status.TIMEOUT, "slow")]
    with pytest.raises(health.EpisodesFailed, match=r"3 of 3 episodes failed.*2x error: KeyError: 'answer'; 1x timeout"):
        health.check_episode_failures(eps, 1.0, 5)
    health.check_episode_failures(eps + [ep()], 1.0, 5)  # one good episode: the default lets the step go on
    with pytest.raises(health.EpisodesFailed):
        health.check_episode_failures(eps + [ep()], 0.75, 5)
    assert issubclass(health.EpisodesFailed, RunFailed) and issubclass(health.NonFiniteUpdate, RunFailed)


def test_warnings_for_steps_that_teach_little():
    assert health.step_warnings([ep()] * 4, all_equal_groups=1, groups=2) == []
    assert "no learning signal" in health.step_warnings([ep()] * 4, all_equal_groups=2, groups=2)[0]
    w = health.step_warnings([ep(Status.TRUNCATED)] * 3 + [ep()], all_equal_groups=0, groups=2)
    assert len(w) == 1 and "3 of 4 episodes were truncated" in w[0]


@pytest.mark.parametrize("override, message", [
    ("optim.lr=nan", "optim.lr must be a finite number, got nan"),
    ("optim.lr=inf", "optim.lr must be a finite number, got inf"),
    ("optim.grad_clip=.nan", "optim.grad_clip must be a finite number"),
    ("sampling.temperature=nan", "sampling.temperature must be a finite number"),
    ("sampling.temperature=0", "sampling.temperature must be > 0 and <= 10, got 0"),
    ("run.max_wall_s=-5", "run.max_wall_s must be >= 0, got -5"),
    ("data.group_size=100000000", "data.group_size must be >= 1 and <= 1024, got 1e+08"),
    ("optim.lr=2", "optim.lr must be > 0 and <= 1, got 2"),
    ("validation.k=0", "validation.k must be >= 1 and <= 1024, got 0"),
    ("run.max_failed_share=0", "run.max_failed_share must be > 0 and <= 1, got 0"),
    ("reward.failed_reward=-.inf", "reward.failed_reward must be a finite number"),
])
def test_bad_numbers_are_refused_before_anything_starts(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        load_config(SMOKE, [override])


@pytest.mark.parametrize("override, message", [("optim.lr=inf", "optim.lr must be a finite number, got inf"),
                                                ("run.max_wall_s=-5", "run.max_wall_s must be >= 0, got -5")])
def test_the_command_line_refuses_them_in_one_line_and_creates_nothing(override, message, tmp_path):
    r = cli("train", SMOKE, override, "--run-dir", str(tmp_path / "run"), timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_non_finite_update_stops_the_run_and_latest_stays_the_last_good_checkpoint(tmp_path, smollm2_path,
                                                                                     monkeypatch):
    cfg = load_config(SMOKE, ["run.steps=3", *SMALL])
    trainer = loop.Trainer(cfg, tmp_path / "run", log=lambda m: None)
    real = loop.losses.policy_loss

    def policy_loss(logp, batch, actor):  # step 2's loss goes non-finite, as an exploding update's would
        loss, pg = real(logp, batch, actor)
        return (loss * math.nan if trainer.step == 1 else loss), pg

    monkeypatch.setattr(loop.losses, "policy_loss", policy_loss)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    with pytest.raises(health.NonFiniteUpdate, match="step 2: the update's loss"):
        trainer.run(after_step=lambda t, m: before.update(
            {n: p.detach().clone() for n, p in t.model.named_parameters() if p.requires_grad}))
    run = tmp_path / "run"
    assert (run / "checkpoints" / "latest").read_text() == "step_000001"
    assert not (run / "checkpoints" / "step_000002").exists() and not (run / "result.json").exists()
    # the failed update never reached the weights: they are step 1's
    assert all(torch.equal(p.detach(), before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "failed" and "NonFiniteUpdate" in events[-1]["error"]
    assert not any(e["event"] == "completed" for e in events)


@pytest.mark.slow
@pytest.mark.parametrize("reward, reason", [
    ("broken_reward", "reward is broken"),
    # a reward that is NaN for every episode ran "done" with a best checkpoint: NaN is no reward
    ("nan_reward", "gave an invalid reward: its score is nan (not a finite number)")])
def test_a_step_whose_episodes_all_fail_fails_the_run_with_their_reason(tmp_path, smollm2_path, reward, reason):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}  # the reward is in helpers
    r = cli("train", SMOKE, *SMALL[:-1], f"reward.name=helpers:{reward}", "--run-dir", str(run), timeout=600,
            env=env)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "run failed: EpisodesFailed: step 1: 4 of 4 episodes failed" in r.stderr and reason in r.stderr
    assert "Traceback" not in r.stderr and "done:" not in r.stdout
    assert (run / "episodes" / "step_000001.jsonl").is_file()  # the failed episodes are kept, with their errors
    assert not (run / "checkpoints" / "latest").exists() and not (run / "result.json").exists()


def split_ep(reason=None):
    second = (model_call([5], [6], rerendered=True, rerender_reason=reason) if reason  # a fresh render: a new row
              else model_call([1, 2, 3], [4]))  # extends the first call: one row
    calls = [model_call([1], [2]), second]
    e = Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=build_segments(calls))
    e.num_splits = len(e.segments) - 1
    e.split_reasons = {reason: 1} if reason else {}
    return e


def test_the_merge_rate_gate_fails_a_run_whose_share_of_split_episodes_passes_its_bound():
    gate = health.SplitGate(0.5, min_episodes=4)
    gate.add([split_ep("rewritten_history"), split_ep("rewritten_history"), split_ep("edited_turn")])
    gate.check(1)  # 3 of 3 split, but fewer episodes than the gate waits for
    gate.add([split_ep(), Episode(episode_id="f", task_id="t", group_id="g", status=Status.ERROR)])  # no call: not counted
    assert (gate.episodes, gate.split) == (4, 3)
    with pytest.raises(health.TooManySplits, match=r"step 2: 3 of the run's 4 episodes split .*75% > "
                                                   r"run.max_split_share=0.5.*rewritten_history \(2\), edited_turn \(1\)"):
        gate.check(2)
    assert isinstance(health.TooManySplits("x"), RunFailed)
    off = health.SplitGate(1.0, min_episodes=1)
    off.add([split_ep("rewritten_history")])
    off.check(1)  # 1.0: off
    fine = health.SplitGate(0.5, min_episodes=1)
    fine.add([split_ep("edited_turn"), split_ep(), split_ep()])
    fine.check(1)
