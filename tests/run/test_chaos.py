"""The chaos suite at CI size (``benchmarks/chaos.py`` kills at 50 random moments per job): a training
run and an evaluation, each killed (SIGKILL of every process it started) at named moments, resumed,
and compared with the same job run untouched: nothing lost, nothing trained twice, no file corrupted,
the final weights' SHA-256, every episode's tokens and the metrics equal."""

import json

import pytest

from agentboost.episodes.record import read_episodes
from agentboost.files import drop_torn_tail
from agentboost.run.directory import prepare_run_dir
from agentboost.run.config import load_config
from agentboost.testing import chaos, chaos_jobs
from helpers import REPO


def _has_lines(path, n):
    return lambda out: chaos.count_lines(out / path) >= n


def _writing_checkpoint(name):
    return lambda out: any((out / "checkpoints").glob(f".{name}.tmp-*"))


@pytest.mark.slow
def test_training_killed_anywhere_ends_as_if_never_killed(tmp_path, smollm2_path):
    job = chaos_jobs.train_job()
    reference, _ = chaos.untouched(job, tmp_path / "untouched")
    assert reference["result"]["steps"] == chaos_jobs.STEPS and reference["last_event"] == "completed"
    # the reward moves the weights at every step: "the final weights are equal" could fail
    assert len({m["loss"] for m in reference["metrics"]}) > 1 and all(m["grad_norm"] > 0 for m in reference["metrics"])

    # as step 1's episodes are written (when its rollouts end), before its update and the first checkpoint:
    # the resume starts the run over, saying so
    before = chaos.killed_and_resumed(job, tmp_path / "before", chaos.KillAt(
        when=_has_lines("episodes/step_000001.jsonl", 1), label="step 1 episodes"), reference)
    assert before.killed and before.phase.startswith("step 1: ") and before.phase.endswith("(checkpoint none)"), \
        before.phase
    assert before.ok, before.line()
    log = (tmp_path / "before.log").read_text()
    assert "has no checkpoint (it was stopped before its first): starting the run over" in log
    events = [json.loads(line) for line in (tmp_path / "before" / "events.jsonl").read_text().splitlines()]
    assert [e["set_aside"] for e in events if e["event"] == "restart"] == [["step_000001.jsonl"]]

    # while step 2's checkpoint is being written: the resume goes on from step 1's; weight version 2 is
    # verified once (a resume used to add a second record of the version it resumed at)
    during = chaos.killed_and_resumed(job, tmp_path / "during", chaos.KillAt(
        when=_writing_checkpoint("step_000002"), label="writing step_000002"), reference)
    assert during.killed and during.phase == "step 2: writing step_000002", during.phase
    assert during.ok, during.line()
    assert "resumed" in (tmp_path / "during.log").read_text()

    # a damaged latest checkpoint is named and skipped: the run goes on from the one before, and still
    # ends where the untouched run did
    run = tmp_path / "during"
    damaged = run / "checkpoints" / "step_000003" / "scheduler.pt"
    damaged.write_bytes(bytes(b ^ 0xFF for b in damaged.read_bytes()))  # same size: only the hash can tell
    rc, _ = chaos.run_to_end(job, job.resume(run), tmp_path / "damaged.log")
    out = (tmp_path / "damaged.log").read_text()
    assert rc == 0, out[-3000:]
    assert "checkpoint step_000003 is damaged (scheduler.pt does not match its SHA-256" in out
    assert "at step 2 from step_000002" in out
    assert chaos.differences(reference, job.summary(run)) == []
    # step 3 ran again: the episodes the first attempt recorded for it are set aside, not appended to
    assert len(list(read_episodes(run / "abandoned" / "resume_at_step_000002" / "step_000003.jsonl"))) == 4
    assert job.audit(run, reference) == {"lost": [], "twice": [], "corrupted": []}
    assert chaos.run_to_end(job, chaos.cli("check", str(run)), tmp_path / "check.log")[0] == 0


@pytest.mark.slow
def test_evaluation_killed_mid_episodes_reports_as_if_never_killed(tmp_path, smollm2_path):
    job = chaos_jobs.eval_job("smollm2-135m-instruct")
    reference, _ = chaos.untouched(job, tmp_path / "untouched")
    outcome = chaos.killed_and_resumed(job, tmp_path / "killed", chaos.KillAt(
        when=_has_lines("model_episodes.jsonl", 3), label="model's 3rd episode"), reference)
    assert outcome.killed and outcome.phase.startswith("eval: model episodes"), outcome.phase
    assert outcome.ok, outcome.line()


def test_a_resume_cuts_the_torn_line_a_kill_left_in_each_log(tmp_path):
    """A kill in the middle of an append leaves a line without its newline; the next append would run
    into it (one line that is neither record, and every later reading fails on it)."""
    run = tmp_path / "run"
    (run / "episodes").mkdir(parents=True)
    whole = '{"step": 1}\n'
    for name in ("metrics.jsonl", "events.jsonl", "episodes/step_000001.jsonl"):
        (run / name).write_text(whole + '{"step": 2, "lo')
    (run / "weights.jsonl").write_text(whole)
    said = []
    cfg = load_config(REPO / "examples/quickstart/smoke.yaml")
    prepare_run_dir(cfg, run, resume=True, log=said.append)
    for name in ("metrics.jsonl", "events.jsonl", "episodes/step_000001.jsonl", "weights.jsonl"):
        assert (run / name).read_text() == whole, name
    assert len(said) == 3 and all("torn last line" in s and "(15 bytes" in s for s in said), said
    # a file without any newline is all torn; an empty or missing one is left as it is
    (run / "x.jsonl").write_bytes(b'{"a": 1')
    assert drop_torn_tail(run / "x.jsonl") == 7 and (run / "x.jsonl").read_bytes() == b""
    assert drop_torn_tail(run / "missing.jsonl") == 0
