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
from pathlib import Path

import pytest
from helpers import REPO, RayWatch, cli, fresh_shell_env, rllm_or_skip, run_logged, when

from agentboost.integrations.rllm import patcher as rp

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _rllm():
    rllm_or_skip()  # skips naming the install (fails under CI=true, which builds it)


def profile(log: list[tuple[float, str]]) -> str:
    """Where the run's time went, from its log's times: up to the Ray cluster, to rLLM's trainer
    built (its workers and the FSDP actor), each step (its rollout and its update, by rLLM's own
    timings), the final validation, the end."""
    def at(pattern: str) -> str:
        t = when(log, pattern)
        return "?" if t is None else f"{t:.0f} s"

    parts = [f"Ray up {at(r'Started a local Ray instance')}",
             f"trainer built {at(r'Using trajectory-level advantage')}",
             f"first weights served {at(r'serving the weights of update 0')}"]
    for step in (1, 2, 3):
        line = next((x for _, x in log if re.search(rf"step:{step} - ", x)), "")
        timing = {k: float(v) for k, v in re.findall(r"timing_s/(\w+):([0-9.]+)", line)}
        parts.append(f"step {step} done {at(rf'step:{step} - ')} (" +
                     ", ".join(f"{k} {v:.0f} s" for k, v in timing.items() if v >= 1) + ")")
    parts.append(f"end {log[-1][0]:.0f} s" if log else "end ?")
    return "; ".join(parts)


def _files(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}


def test_agent_trainer_two_steps_on_cpu_with_weight_sync_then_byte_exact_revert(tmp_path, record_property):
    roots = rp.find_roots()
    site = tmp_path / "site"
    for package, root in (("rllm", roots.rllm), ("verl", roots.verl)):
        shutil.copytree(root / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    copy = rp.Roots(rllm=site, verl=site)
    args = ["--rllm-root", str(site), "--verl-root", str(site)]
    if any((copy.of(t.package) / t.relpath).read_bytes().startswith(rp.OVERRIDE_MARKER.encode()) for t in rp.TARGETS):
        assert rp.main(args + ["--revert"]) == 0  # the installation is patched: its copy starts from the originals
    originals = {t.relpath: (copy.of(t.package) / t.relpath).read_bytes() for t in rp.TARGETS}
    assert rp.main(args) == 0
    installed = _files(site)

    smoke = tmp_path / "smoke"
    smoke.mkdir()
    tests_dir = str(Path(__file__).resolve().parents[2])
    # the command as docs/rllm.md writes it, in a fresh shell (the script runs .venv-rllm); the copies
    # first on the path, in the driver and (inherited) in every Ray worker; a continuous reward
    # (tests/helpers.py) so that no GRPO group of SmolLM2's is all-equal and step 1 updates
    watch = RayWatch()  # this run's processes, not those of a cluster another test runs beside it
    env = fresh_shell_env(".venv-rllm", CPU_SMOKE="1", SMOKE_DIR=str(smoke), SMOKE_REWARD="helpers:length_reward",
                          PYTHONPATH=os.pathsep.join(p for p in (str(site), tests_dir, str(REPO), os.environ.get("PYTHONPATH", "")) if p),
                          **watch.env())
    with watch:
        code, log = run_logged(["bash", str(REPO / "examples/deepcoder/train_deepcoder_with_strands_rllm.sh")],
                               env=env, cwd=tmp_path, timeout=900)
    out = "\n".join(line for _, line in log)
    record_property("profile", profile(log))  # printed at the end of the run (conftest.py)
    assert code == 0, out[-5000:]
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
    # a Ray cluster of its own (a smoke run never joins another run's, which another test may run beside it)
    assert when(log, r"Started a local Ray instance") is not None and when(log, r"Connecting to existing Ray") is None
    # nothing of the run is left (its Ray cluster included: the watch saw it)
    assert any("raylet" in a for a in watch.seen), watch.seen
    assert watch.left() == [], watch.left()
    # the run wrote nothing into rLLM's installation (its dataset registry and Hydra's log went into
    # the run's directory, and no ./outputs appeared where it ran)
    assert _files(site) == installed, sorted(_files(site) ^ installed)
    assert (smoke / "out" / "datasets" / "dataset_registry.json").is_file() and not (tmp_path / "outputs").exists()
    assert list((smoke / "out" / "hydra").glob("*/.hydra/config.yaml"))

    assert rp.main(args + ["--revert"]) == 0
    for t in rp.TARGETS:
        assert (copy.of(t.package) / t.relpath).read_bytes() == originals[t.relpath], t.relpath
        assert not (copy.of(t.package) / t.upstream_relpath).exists()
