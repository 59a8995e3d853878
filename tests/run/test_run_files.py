"""Where the run's files cannot be written: a read-only run directory is refused in one line before
anything starts; a disk that fills mid-run fails the run by name, keeps the last intact checkpoint
as ``latest`` and leaves no half-written checkpoint. Real file systems: tmpfs mounts (root)."""

import os
import shutil
import subprocess
from contextlib import contextmanager

import pytest
from helpers import REPO, cli

from agentboost.files import iter_jsonl
from agentboost.run import health
from agentboost.run.checkpoint import verify_checkpoint
from agentboost.run.config import load_config
from agentboost.trainer import loop

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
SMALL = ["data.tasks_per_step=2", "data.group_size=2", "sampling.max_new_tokens=16", "validation.max_tasks=2",
         "validation.max_new_tokens=16", "reward.name=helpers:length_reward"]
needs_mounts = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                  reason="mounting a small or read-only tmpfs needs root (CI runs as root)")


@contextmanager
def tmpfs(path, options):
    path.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@needs_mounts
def test_a_read_only_run_directory_is_refused_in_one_line(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        r = cli("train", SMOKE, "--run-dir", ro / "run", timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    line, = r.stderr.strip().splitlines()
    assert line == f"agentboost train: error: run directory {ro / 'run'} cannot be written: Read-only file system " \
                   f"({ro / 'run'})"


@needs_mounts
@pytest.mark.slow
def test_a_full_disk_fails_the_run_by_name_and_keeps_the_last_checkpoint(tmp_path, smollm2_path):
    with tmpfs(tmp_path / "disk", "size=300m") as disk:
        cfg = load_config(SMOKE, ["run.steps=3", "run.checkpoint_every=1", *SMALL])
        trainer = loop.Trainer(cfg, disk / "run", log=lambda m: None)

        def fill(t, metrics):  # after step 1 and its checkpoint, the disk fills up
            if t.step == 1:
                with open(disk / "filler", "wb") as f:
                    try:
                        while True:
                            f.write(b"\0" * (1 << 20))
                            f.flush()
                    except OSError:
                        pass

        with pytest.raises(health.RunWriteFailed, match="No space left on device; the last intact checkpoint "
                                                        "step_000001 is kept"):
            trainer.run(after_step=fill)
        ckpts = disk / "run" / "checkpoints"
        assert (ckpts / "latest").read_text().strip() == "step_000001"
        assert verify_checkpoint(ckpts / "step_000001") is None
        assert sorted(p.name for p in ckpts.iterdir()) == ["latest", "step_000001"]  # nothing half-written
        assert not (disk / "run" / "result.json").exists()

        # once there is space again, the run resumes from that checkpoint and ends whole
        (disk / "filler").unlink()
        said = []
        result = loop.Trainer(None, disk / "run", resume=True, log=said.append).run()
        assert result["steps"] == 3 and any("at step 1 from step_000001" in s for s in said), said
        for path in sorted((disk / "run").glob("*.jsonl")) + sorted((disk / "run" / "episodes").glob("*.jsonl")):
            assert path.read_bytes().endswith(b"\n"), path  # no torn line left where the disk filled up
            list(iter_jsonl(path))
        assert (ckpts / "latest").read_text().strip() == "step_000003"


def test_a_resume_sets_aside_the_episode_files_past_its_step_and_never_overwrites_an_earlier_one(tmp_path):
    from agentboost.run.directory import set_aside_after

    run = tmp_path / "run"
    (run / "episodes").mkdir(parents=True)
    for name in ("step_000001", "step_000002", "val_step_000002", "step_000003", "val_step_000003", "notes"):
        (run / "episodes" / f"{name}.jsonl").write_text(f"{name}\n")
    aside, moved = set_aside_after(run, 2)
    assert aside == run / "abandoned" / "resume_at_step_000002" and moved == ["step_000003.jsonl", "val_step_000003.jsonl"]
    assert sorted(p.name for p in (run / "episodes").iterdir()) == [
        "notes.jsonl", "step_000001.jsonl", "step_000002.jsonl", "val_step_000002.jsonl"]
    (run / "episodes" / "step_000003.jsonl").write_text("second attempt\n")  # resumed at step 2 once more
    again, moved = set_aside_after(run, 2)
    assert again == run / "abandoned" / "resume_at_step_000002-2" and moved == ["step_000003.jsonl"]
    assert (aside / "step_000003.jsonl").read_text() == "step_000003\n"  # the first attempt's, kept
    assert (again / "step_000003.jsonl").read_text() == "second attempt\n"
    # a run stopped before its first checkpoint starts over: every step's file goes, the start's validation too
    (run / "episodes" / "val_step_000000.jsonl").write_text("v0\n")
    _, moved = set_aside_after(run, -1)
    assert moved == ["step_000001.jsonl", "step_000002.jsonl", "val_step_000000.jsonl", "val_step_000002.jsonl"]
