"""The chaos suite at CI size (``benchmarks/chaos.py`` kills at 50 random moments per job): a training
run killed (SIGKILL of every process it started) at named moments, resumed, and compared with the same
job run untouched: nothing lost, nothing trained twice, no file corrupted, the final weights' SHA-256,
every episode's tokens and the metrics equal. An evaluation killed mid-episodes is
tests/evaluation/test_eval_chat_models.py's (the benchmark kills ``eval`` at 50 moments)."""

import json

import pytest

from agentboost.episodes.record import read_episodes
from agentboost.files import drop_torn_tail
from agentboost.run.directory import prepare_run_dir
from agentboost.run.config import load_config
from agentboost.run.verify import check_run
from agentboost.testing import chaos, chaos_jobs
from helpers import REPO


def _has_lines(path, n):
    return lambda out: chaos.count_lines(out / path) >= n


def _writing_checkpoint(name):
    return lambda out: any((out / "checkpoints").glob(f".{name}.tmp-*"))


@pytest.mark.slow
def test_training_killed_anywhere_ends_as_if_never_killed(tmp_path, smollm2_path):
    """One run killed three times in a row, each resume taken up where the last kill left it (one
    run, not three: CI's minutes), then compared with the untouched run."""
    job = chaos_jobs.train_job()
    reference, _ = chaos.untouched(job, tmp_path / "untouched")
    assert reference["result"]["steps"] == chaos_jobs.STEPS and reference["last_event"] == "completed"
    # the reward moves the weights at every step: "the final weights are equal" could fail
    assert len({m["loss"] for m in reference["metrics"]}) > 1 and all(m["grad_norm"] > 0 for m in reference["metrics"])
    run, log = tmp_path / "run", tmp_path / "run.log"

    # as step 1's episodes are written (when its rollouts end), before its update and the first checkpoint
    killed, phase, _ = chaos.kill(job, run, job.start(run), chaos.KillAt(
        when=_has_lines("episodes/step_000001.jsonl", 1), label="step 1 episodes"))
    assert killed and phase.startswith("step 1: ") and phase.endswith("(checkpoint none)"), phase
    # resumed: it starts the run over, saying so; killed again while step 2's checkpoint is being written
    killed, phase, _ = chaos.kill(job, run, job.resume(run), chaos.KillAt(
        when=_writing_checkpoint("step_000002"), label="writing step_000002"))
    assert killed and phase == "step 2: writing step_000002", phase
    assert "has no checkpoint (it was stopped before its first): starting the run over" in log.read_text()
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["set_aside"] for e in events if e["event"] == "restart"] == [["step_000001.jsonl"]]
    # resumed to the end from step 1's checkpoint (the temporary of step 2's removed); weight version 2 is
    # verified once (a resume used to add a second record of the version it resumed at)
    rc, _ = chaos.run_to_end(job, job.resume(run), log)
    assert rc == 0, log.read_text()[-3000:]
    assert "resumed" in log.read_text()
    assert job.audit(run, reference) == {"lost": [], "twice": [], "corrupted": []}
    assert chaos.differences(reference, job.summary(run)) == []

    # a damaged latest checkpoint is named and skipped: the run goes on from the one before, and still
    # ends where the untouched run did
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
    problems, counts = check_run(run)  # what `agentboost check RUN_DIR` reads
    assert problems == [] and counts["steps"] == chaos_jobs.STEPS, (problems, counts)


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
    # what a kill in the vLLM engine's merged-weights or adapter write leaves (hundreds of MB each)
    for left in ("vllm/.weights.tmp-k1lled", "vllm/adapters/.v000002.tmp-k1lled", "checkpoints/.step_000002.tmp-x"):
        (run / left).mkdir(parents=True)
        (run / left / "model.safetensors").write_bytes(b"half")
    prepare_run_dir(cfg, run, resume=True, log=said.append)
    for name in ("metrics.jsonl", "events.jsonl", "episodes/step_000001.jsonl", "weights.jsonl"):
        assert (run / name).read_text() == whole, name
    torn = [s for s in said if "torn last line" in s]
    assert len(torn) == 3 and all("(15 bytes" in s for s in torn), said
    assert chaos.temporaries(run) == [] and len([s for s in said if "interrupted write" in s]) == 3 + 3, said
    # a file without any newline is all torn; an empty or missing one is left as it is
    (run / "x.jsonl").write_bytes(b'{"a": 1')
    assert drop_torn_tail(run / "x.jsonl") == 7 and (run / "x.jsonl").read_bytes() == b""
    assert drop_torn_tail(run / "missing.jsonl") == 0


def test_every_appender_cuts_a_torn_line_before_its_first_append(tmp_path, caplog):
    """The logs outside a run directory (serve's ab.jsonl and sessions.jsonl, eval's episodes, the
    job service's deployment history, the loop's lineage) are appended through ``open_append``: a
    line a killed writer tore is cut before this process appends, once (a line this process is
    writing is never taken for torn)."""
    from agentboost.episodes.record import EpisodeWriter
    from agentboost.files import open_append
    from agentboost.serving.router import EventLog

    whole = '{"event": "config"}\n'
    for name in ("ab.jsonl", "sessions.jsonl", "history.jsonl"):
        (tmp_path / name).write_text(whole + '{"event": "ass')
    log = EventLog(tmp_path / "ab.jsonl")
    log.write({"event": "restart"})
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [r["event"] for r in rows] == ["config", "restart"]
    EpisodeWriter(tmp_path / "sessions.jsonl").close()
    assert (tmp_path / "sessions.jsonl").read_text() == whole
    with open_append(tmp_path / "history.jsonl") as f:
        f.write('{"event": "deploy"')  # this process's own line, not yet ended ...
    with open_append(tmp_path / "history.jsonl") as f:
        f.write("}\n")  # ... is not cut at its next open
    assert (tmp_path / "history.jsonl").read_text() == whole + '{"event": "deploy"}\n'
    assert sum("removed a torn last line (14 bytes" in r.getMessage() for r in caplog.records) == 3


def test_the_benchmarks_report_merges_runs_of_other_seeds(tmp_path):
    """``benchmarks/chaos.py --report A B``: a job's kill points add up across runs of other seeds (N grows by
    runs); the same seed twice would count its moments twice, and is refused."""
    import subprocess
    import sys

    def outcome(ok, phase="step 1: sampling (checkpoint none)"):
        return {"kill": "1.00 s", "phase": phase, "killed": True, "lost": [], "twice": [], "corrupted": [],
                "differences": [] if ok else ["metrics[0].loss: 1 != 2"], "error": "", "ok": ok}

    for seed, outs in ((0, [outcome(True)] * 2), (1, [outcome(True), outcome(False, "step 2: updating")])):
        (tmp_path / f"s{seed}.json").write_text(json.dumps({"train": {
            "job": "train (hf engine)", "untouched_s": 30.0, "tolerance": "to the bit", "seed": seed, "outcomes": outs}}))
    run = lambda *files: subprocess.run([sys.executable, "benchmarks/chaos.py", "--report", *map(str, files)],
                                        cwd=REPO, capture_output=True, text=True)
    r = run(tmp_path / "s0.json", tmp_path / "s1.json")
    assert r.returncode == 0, r.stderr
    assert "| train (hf engine) | 4 | 4 | sampling 3, updating 1 | 0 | 0 | 0 | 3/4 |" in r.stdout, r.stdout
    r = run(tmp_path / "s0.json", tmp_path / "s0.json")
    assert r.returncode != 0 and "two reports ran train with seed 0" in r.stderr, r.stderr
