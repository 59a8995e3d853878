"""One run lifecycle for both trainers (``run/lifecycle.py``): SIGTERM finishes the step in progress,
checkpoints and ends the run as cancelled, with its result; a step that does not finish within
``run.stop_grace_s`` is abandoned and the run stops at its last checkpoint (exit 143). The same
tests run against the weights trainer and the prompt trainer (which before had no grace: it waited
for its step, gates included, however long)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import REPO

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
SMALL = ["data.tasks_per_step=2", "data.group_size=2", "sampling.max_new_tokens=16", "validation.max_tasks=2",
         "validation.max_new_tokens=16", "validation.at_start=false", "reward.name=helpers:length_reward"]
# the prompt trainer: one instruction to try, a gate of two tasks
POLICY = {"weights": [], "prompt": ["algorithm.policy=prompt", "prompt.demonstrations=false",
                                    'prompt.instruction_pool=["Use the calculator tool."]', "prompt.gate_tasks=2",
                                    "prompt.gate_samples=1"]}


def start(run, overrides):
    # unbuffered: the test reads the step lines as they are printed
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "train", SMOKE, *overrides, "--run-dir", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc


def wait_for(proc, prefix):
    for line in proc.stdout:
        if line.startswith(prefix):
            return
    raise AssertionError(f"the run ended before a line starting {prefix!r}: {proc.stderr.read()[-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["weights", "prompt"])
def test_sigterm_finishes_the_step_checkpoints_and_ends_cancelled(tmp_path, smollm2_path, policy):
    run = tmp_path / "run"
    proc = start(run, [*SMALL, "run.steps=50", "run.checkpoint_every=0", *POLICY[policy]])
    try:
        wait_for(proc, "step 1/")
        # step 2 is under way: its episodes are in (every one truncated at 16 tokens, which the run's
        # health check reports before the update). A signal right after step 1's line could land
        # between the steps, where no step is in progress to finish.
        wait_for(proc, "warning: step 2:")
        proc.send_signal(signal.SIGTERM)  # the step in progress finishes
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["stopped"] == "stopped by SIGTERM" and result["stop_requested"] and 1 < result["steps"] < 50
    latest = (run / "checkpoints" / "latest").read_text().strip()
    assert latest == f"step_{result['steps']:06d}"  # the step it stopped at is checkpointed
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "cancelled" and events[-1]["step"] == result["steps"]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["weights", "prompt"])
def test_sigterm_mid_step_stops_within_the_grace(tmp_path, smollm2_path, policy):
    # a step far longer than the grace (many long episodes): SIGTERM must not wait for it
    run = tmp_path / "run"
    proc = start(run, [*SMALL[:-2], "reward.name=helpers:length_reward", "data.tasks_per_step=8", "data.group_size=8",
                       "sampling.max_new_tokens=512", "run.stop_grace_s=3", "validation.at_start=false",
                       *POLICY[policy]])
    try:
        wait_for(proc, "run directory:")  # the handler is installed right after this line
        time.sleep(3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert took < 3 + 30, took  # the grace, then the pool's shutdown
    assert err.strip().splitlines()[-1].startswith("agentboost train: stopped: stopped by SIGTERM: step 1 did not "
                                                   "finish within run.stop_grace_s=3 s and was abandoned")
    assert "Traceback" not in err and not (run / "result.json").exists()
