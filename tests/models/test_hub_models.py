"""``model.path`` as a hub id (``org/name``): found in the local Hugging Face cache; where it is
not cached and cannot be downloaded, one line saying how to fetch it. ``model.device`` and
``model.dtype``: a device the machine lacks is refused before anything starts."""

import os
import shutil

import pytest
import torch
from helpers import REPO, cli

from agentboost.models.loading import load_policy, resolve_model_path

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


def fake_hub_cache(root, repo_id, files_from):
    """The Hugging Face cache layout (refs/main -> snapshots/<commit>/...) holding a real model."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(files_from, repo / "snapshots" / commit)
    return repo / "snapshots" / commit


def test_a_cached_hub_model_is_found_and_a_missing_one_says_how_to_fetch_it(tmp_path, smollm2_path, monkeypatch):
    cache = tmp_path / "hub"
    snapshot = fake_hub_cache(cache, "agentboost-test/tiny", smollm2_path)
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    r = cli("train", SMOKE, "model.path=agentboost-test/tiny", "--check", env=env, timeout=120)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stderr[-2000:]
    r = cli("train", SMOKE, "model.path=agentboost-test/missing", "--check", env=env, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert ("model 'agentboost-test/missing' is not in the Hugging Face cache" in r.stderr
            and "huggingface-cli download agentboost-test/missing" in r.stderr)
    # and it loads from there, in the dtype asked for
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    assert resolve_model_path("agentboost-test/tiny") == snapshot
    model, _ = load_policy("agentboost-test/tiny", dtype="bfloat16", device="cpu")
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_device_this_machine_lacks_is_refused_in_one_line():
    r = cli("train", SMOKE, "model.device=cuda", "--check", timeout=120)
    assert r.returncode == 2 and "model.device cuda: no CUDA GPU here" in r.stderr and r.stderr.count("\n") == 1
    r = cli("train", SMOKE, "model.device=gpu0", "--check", timeout=120)
    assert r.returncode == 2 and "model.device must be auto, cpu, cuda or cuda:N" in r.stderr
