"""Stock ``python -m verl.trainer.main_ppo`` end to end on CPU: the math example script with
``CPU_SMOKE=1`` (agentboost's veRL CPU platform and ``agentboost_cpu`` rollout, FSDP2 over gloo,
Ray local, the Strands agent loop, the embedded SmolLM2). Two training steps finish; the rollout
server is given the trained weights after each update and step 2's episodes are sampled with
step 1's weights; the agent loop's episodes are token-exact; nothing is left running. The command
runs as docs/verl.md writes it, in a fresh shell (no environment active, none on PATH: the script
runs this checkout's .venv)."""

import os
import re
from pathlib import Path

import pytest
from helpers import REPO, RayWatch, cli, fresh_shell_env, one_ray_smoke_at_a_time, run_logged, when

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_main_ppo_runs_two_steps_on_cpu_and_syncs_the_weights(tmp_path, record_property):
    # a continuous reward (tests/helpers.py): with exact_answer, SmolLM2's 2 groups of 2 episodes are
    # all-equal often enough that step 1 has no gradient, and the update this test checks would not happen
    tests_dir = str(Path(__file__).resolve().parents[2])
    watch = RayWatch()  # this run's processes, not those of a cluster another test runs beside it
    env = fresh_shell_env(CPU_SMOKE="1", SMOKE_DIR=str(tmp_path), SMOKE_REWARD="helpers:length_reward",
                          PYTHONPATH=os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH", "")) if p),
                          **watch.env())
    with one_ray_smoke_at_a_time(), watch:
        code, log = run_logged(["bash", str(REPO / "examples/math/train_math_with_strands.sh")], env=env,
                               cwd=tmp_path, timeout=480)
    out = "\n".join(line for _, line in log)
    record_property("profile", "; ".join(  # where its minutes went, printed at the end of the run (conftest.py)
        f"{what} {t:.0f} s" for what, t in (("Ray up", when(log, r"Started a local Ray instance")),
                                            ("step 1 done", when(log, r"step:1 - ")),
                                            ("step 2 done", when(log, r"step:2 - ")), ("end", log[-1][0] if log else None))
        if t is not None))
    assert code == 0, out[-4000:]
    steps = {int(m.group(1)): m.group(0) for m in re.finditer(r"step:(\d+) - .*", out)}
    assert sorted(steps) == [1, 2], out[-3000:]
    # step 1 trained (a gradient), and the server then served step 1's weights, moved from the start
    grad = float(re.search(r"actor/grad_norm:([0-9.e+-]+)", steps[1]).group(1))
    assert grad > 0, steps[1]
    syncs = {int(m.group(1)): float(m.group(2)) for m in
             re.finditer(r"serving the weights of step (\d+) \(sync \d+; max \|w - w0\| = ([0-9.e+-]+)\)", out)}
    assert syncs.get(0) == 0.0 and syncs.get(1, 0.0) > 0.0, syncs
    # staleness = (step - 1) - the newest weight version that sampled the step's episodes: 0 at step 2
    # means they came from the weights of step 1, not the initial ones
    assert re.search(r"trajectory_staleness/max:(np\.int64\()?0\)?( |$)", steps[2]), steps[2]
    episodes = sorted((tmp_path / "episodes").glob("*.jsonl"))
    assert episodes, "the agent loop wrote no episodes"
    check = cli("check", *episodes, check=True)
    assert "checked=8 violations=0" in check.stdout, check.stdout  # 2 steps x 2 tasks x 2 episodes
    # a Ray cluster of its own (a smoke run never joins another run's, which another test may run beside it)
    assert when(log, r"Started a local Ray instance") is not None and when(log, r"Connecting to existing Ray") is None
    # main_ppo's driver stops the local Ray cluster it started: nothing of the run is left
    assert any("raylet" in a for a in watch.seen), watch.seen  # (the watch saw the cluster)
    assert watch.left() == [], watch.left()
    # Hydra's log and config went into the run's directory, not the working directory's ./outputs
    assert not (tmp_path / "outputs").exists() and list((tmp_path / "checkpoints" / "hydra").glob("*/.hydra/config.yaml"))
