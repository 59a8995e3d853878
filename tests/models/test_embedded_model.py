"""The embedded model cache: atomic, verified preparation; any HF directory accepted by path."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from agentboost.models.embedded import (
    MANIFEST,
    ModelNotFoundError,
    prepare_embedded,
    verify_cache,
)
from agentboost.models.loading import load_policy, resolve_model_path


def test_prepared_cache_reloads_and_generates(smollm2_path):
    assert verify_cache(smollm2_path, full=True) is None
    model, tok = load_policy(str(smollm2_path))  # an HF directory, by path
    assert tok.eos_token == "<|im_end|>" and model.config.eos_token_id == tok.eos_token_id
    assert "<|im_start|>" in tok.chat_template


def test_killed_preparation_leaves_no_loadable_cache(tmp_path):
    cache = tmp_path / "cache"
    code = ("from agentboost.models.embedded import prepare_embedded; "
            "prepare_embedded('smollm2-135m-instruct')")
    env = dict(os.environ, AGENTBOOST_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    models = cache / "models"
    deadline = time.time() + 60
    while time.time() < deadline and not (models.is_dir() and any(models.iterdir())):
        time.sleep(0.1)  # wait until it has started writing its temporary directory
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    target = models / "smollm2-135m-instruct"
    assert not target.exists(), "a killed preparation must not leave the final directory"
    leftovers = [p.name for p in models.iterdir()]
    assert all(n.startswith(".smollm2-135m-instruct.tmp-") for n in leftovers), leftovers


@pytest.mark.slow
def test_corrupted_cache_is_detected_and_rebuilt(tmp_path, smollm2_path):
    copy = tmp_path / "models" / "smollm2-135m-instruct"
    shutil.copytree(smollm2_path, copy)
    (copy / "config.json").write_text("{}")
    assert "config.json" in verify_cache(copy)
    (copy / MANIFEST).unlink()
    assert "missing" in verify_cache(copy)
    # the next use prepares it again instead of loading a broken cache
    path = prepare_embedded("smollm2-135m-instruct", cache_dir=tmp_path)
    assert path == copy and verify_cache(copy, full=True) is None


def test_cache_location_follows_env(monkeypatch, tmp_path):
    from agentboost.models.embedded import cache_root

    monkeypatch.setenv("AGENTBOOST_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    assert cache_root(tmp_path / "explicit") == tmp_path / "explicit"


def test_bad_model_paths_name_the_problem(tmp_path):
    with pytest.raises(ModelNotFoundError, match="neither an embedded model"):
        resolve_model_path(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model_path(str(tmp_path / "empty"))
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match="no weights"):
        resolve_model_path(str(tmp_path / "noweights"))
    with pytest.raises(ModelNotFoundError, match="unknown embedded model"):
        prepare_embedded("gpt-17")
