"""Whole runs that the checks stop (``agentboost train`` in a process of its own, a fault injected
into it): the one-line reason on stderr and exit status 1, caught at the first step the fault
touches, before an update trains on what it sampled. The hf engine's faults (a version its answers
never moved to; log-probs that drift from the trainer's) and the vLLM CPU build's default path
(merged weights) with a skipped sync. A run without a fault shows its figures and passes
`agentboost check`: tests/trainer/test_trainer.py (hf) and tests/sampling/test_vllm_engine.py (vLLM);
every vLLM fault against a real server: tests/run/test_verify_vllm.py."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO, cli, vllm_python_or_skip

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
SHORT = ["run.steps=2", "data.tasks_per_step=2", "data.group_size=2", "sampling.max_new_tokens=16", "data.val_file=",
         "reward.name=helpers:length_reward", "run.checkpoint_every=0"]


def train_with_fault(tmp_path, fault: str, *overrides: str) -> subprocess.CompletedProcess:
    """``agentboost train`` with ``fault`` (Python run first, in the trainer's process) applied."""
    script = tmp_path / "faulty_train.py"
    # the guard: the rollout workers are spawned processes that import this script again
    script.write_text(textwrap.dedent(fault) + "\nimport sys\nfrom agentboost.cli import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), *sys.path])}
    return subprocess.run([sys.executable, str(script), "train", SMOKE, *SHORT, *overrides,
                           "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=900, cwd=REPO, env=env)


def one_line_failure(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, r.stderr[-3000:]
    failed = [line for line in r.stderr.splitlines() if line.startswith("agentboost train: run failed: ")]
    assert len(failed) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return failed[0]


@pytest.mark.slow
def test_a_version_the_hf_engine_never_moved_to_stops_the_run(tmp_path):
    line = one_line_failure(train_with_fault(tmp_path, """
        from agentboost.sampling import policy_server
        publish = policy_server.HFPolicyServer.publish
        def stuck(self, model, version):  # the engine's answers keep reporting the first version
            return publish(self, model, 0)
        policy_server.HFPolicyServer.publish = stuck
    """))
    assert line == ("agentboost train: run failed: WeightsMismatch: weight version 1 (hf-lora sync, served as "
                    "'agentboost-policy'): samplers are told version 0, not 1")
    run = tmp_path / "run"
    records = [json.loads(x) for x in (run / "weights.jsonl").read_text().splitlines()]
    assert [(r["version"], r["match"]) for r in records] == [(0, True), (1, False)]
    assert not (run / "episodes" / "step_000002.jsonl").exists()  # nothing sampled from the stuck engine
    r = cli("check", run)
    assert r.returncode == 1 and "weights.jsonl:2: version 1 did not match: samplers are told version 0" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("source, reward", [("update", "helpers:length_reward"), ("sample", "helpers:constant_reward")])
def test_sampler_log_probs_that_drift_from_the_trainers_stop_the_run_with_the_figures(tmp_path, source, reward):
    # update: read from the update's first pass, before its optimizer step; sample: a step with nothing
    # to train on (every group all-equal) recomputes a sample of its rows instead
    line = one_line_failure(train_with_fault(tmp_path, """
        from agentboost.sampling.hf_engine import HFEngine
        run_batch = HFEngine._run_batch
        def drifted(self, batch):  # e.g. log-probs of the raw logits reported for a sample at T=0.8
            results = run_batch(self, batch)
            for r in results:
                r.logprobs = [x - 0.5 for x in r.logprobs]
            return results
        HFEngine._run_batch = drifted
    """, f"reward.name={reward}"))
    assert line.startswith("agentboost train: run failed: LogprobParityFailed: step 1: the sampler's log-probs "
                           "differ from the trainer's (hf engine, float32, version 0): mean |Δ| 0.5 > 0.001, "
                           "p99 |Δ| 0.5 > 0.01 (max |Δ| 0.5 over "), line
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    parity = next(e for e in events if e["event"] == "parity")
    assert parity["step"] == 1 and parity["parity_tokens"] > 0 and abs(parity["parity_mean_abs_diff"] - 0.5) < 1e-3
    assert parity["parity_source"] == source
    assert not (tmp_path / "run" / "metrics.jsonl").read_text().strip()  # the step never trained


@pytest.mark.slow
@pytest.mark.vllm
def test_a_skipped_sync_on_vllm_stops_the_run(tmp_path):
    python = vllm_python_or_skip()
    line = one_line_failure(train_with_fault(tmp_path, """
        from agentboost.sampling import vllm_server
        from agentboost.sampling.policy_version import PolicyVersion, write_policy_version
        def skipped(self, model, version):  # the version advances, the weights are never reloaded
            write_policy_version(self.policy_file, PolicyVersion(self.server.served_name, version))
            return PolicyVersion(self.server.served_name, version)
        vllm_server.VLLMPolicyServer._reload_full = skipped
    """, "rollout.engine=vllm", f"rollout.vllm_python={python}", "rollout.vllm_max_model_len=2048",
        "rollout.vllm_kv_cache_gib=1", "model.lora_r=8"))
    assert line.startswith("agentboost train: run failed: WeightsMismatch: weight version 1 (merged sync, served as "
                           "'base'): the engine still holds version 0's weights; 120 of 272 tensors different "), line
