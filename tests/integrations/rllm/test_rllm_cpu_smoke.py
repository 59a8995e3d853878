"""rLLM's ``AgentTrainer`` end to end on CPU, with agentboost's patches: the DeepCoder rLLM script
with ``CPU_SMOKE=1`` (the calculator agent, the embedded SmolLM2, FSDP over gloo, Ray local, the
``agentboost_cpu`` async server of ``agentboost/integrations/rllm/cpu.py``). Where rLLM@1fc3c4b and
its veRL fork are installed (`bash setup.sh --rllm`: .venv-rllm; docs/rllm.md, "What is verified where");
from another interpreter the suite runs it there (test_rllm_environment.py).

On copies of the installed ``rllm`` and ``verl`` packages (the user's installation is not touched):
``apply_patches.py``'s patcher applies the overrides, the script trains 2 steps (and rLLM's final
validation), the rollout server is given the actor's weights at every wake-up and step 2's episodes
record the weights of 1 update; the episodes are token-exact (``agentboost check``); nothing is left running; the revert restores every
file byte for byte."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, cli, rllm_or_skip

from agentboost.integrations.rllm import patcher as rp

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _rllm():
    rllm_or_skip()  # skips naming the install (fails under CI=true, which builds it)


def _ray_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in out if re.search(r"\braylet\b|gcs_server|ray::", line)]


def test_agent_trainer_two_steps_on_cpu_with_weight_sync_then_byte_exact_revert(tmp_path):
    assert not _ray_processes(), "a Ray cluster is already running here"
    roots = rp.find_roots()
    site = tmp_path / "site"
    for package, root in (("rllm", roots.rllm), ("verl", roots.verl)):
        shutil.copytree(root / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    copy = rp.Roots(rllm=site, verl=site)
    originals = {t.relpath: (copy.of(t.package) / t.relpath).read_bytes() for t in rp.TARGETS}
    if any(b.startswith(rp.OVERRIDE_MARKER.encode()) for b in originals.values()):
        pytest.skip("the installed rLLM is patched already; run `python apply_patches.py --revert` first")
    assert rp.main(["--rllm-root", str(site), "--verl-root", str(site)]) == 0

    smoke = tmp_path / "smoke"
    smoke.mkdir()
    tests_dir = str(Path(__file__).resolve().parents[2])
    # the copies first on the path, in the driver and (inherited) in every Ray worker; a continuous
    # reward (tests/helpers.py) so that no GRPO group of SmolLM2's is all-equal and step 1 updates
    env = {**os.environ, "CPU_SMOKE": "1", "SMOKE_DIR": str(smoke), "SMOKE_REWARD": "helpers:length_reward",
           "PYTHONPATH": os.pathsep.join(p for p in (str(site), tests_dir, str(REPO), os.environ.get("PYTHONPATH", "")) if p),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(REPO / "examples/deepcoder/train_deepcoder_with_strands_rllm.sh")], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-5000:]
    # rLLM's loop trains total_training_steps - 1 steps, then validates (the script sets 3)
    steps = {int(m.group(1)): m.group(0) for m in re.finditer(r"step:(\d+) - .*", out)}
    assert sorted(steps) == [1, 2, 3], out[-3000:]
    assert "actor/grad_norm" in steps[2] and "actor/grad_norm" not in steps[3], steps
    grad = float(re.search(r"actor/grad_norm:([0-9.e+-]+)", steps[1]).group(1))
    assert grad > 0, steps[1]
    # one sync per wake-up: before step 1 the initial weights (0 updates, unmoved), before step 2
    # the weights after 1 update (moved), before the final validation after 2
    syncs = [(int(m.group(1)), float(m.group(2))) for m in
             re.finditer(r"serving the weights of update (\d+) \(sync \d+; max \|w - w0\| = ([0-9.e+-]+)\)", out)]
    assert [v for v, _ in syncs] == [0, 1, 2], syncs
    assert syncs[0][1] == 0.0 and syncs[1][1] > 0.0 and syncs[2][1] > 0.0, syncs
    # the weight version every call of each step's episodes was sampled with
    for step, n, version, phase in ((1, 4, 0, "train"), (2, 4, 1, "train"), (3, 2, 2, "validation")):
        records = [json.loads(line) for line in (smoke / "out" / "episodes" / f"{step}.jsonl").read_text().splitlines()]
        assert len(records) == n, records  # 2 tasks x 2 episodes; validation: 2 tasks x 1
        assert {e["metadata"]["rllm_phase"] for e in records} == {phase}
        versions = {c.get("weight_version") for e in records for c in e["calls"]}
        assert versions == {version}, (step, versions)
    every = tmp_path / "episodes.jsonl"
    every.write_text("".join(p.read_text() for p in sorted((smoke / "out" / "episodes").glob("*.jsonl"))))
    check = cli("check", every, check=True)
    assert "checked=10 violations=0" in check.stdout, check.stdout
    deadline = time.monotonic() + 30
    while _ray_processes() and time.monotonic() < deadline:
        time.sleep(1)
    assert not _ray_processes(), _ray_processes()

    assert rp.main(["--rllm-root", str(site), "--verl-root", str(site), "--revert"]) == 0
    for t in rp.TARGETS:
        assert (copy.of(t.package) / t.relpath).read_bytes() == originals[t.relpath], t.relpath
        assert not (copy.of(t.package) / t.upstream_relpath).exists()
    print(f"rLLM AgentTrainer CPU smoke: {time.monotonic() - t0:.0f} s")
