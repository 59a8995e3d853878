"""The parts of the vLLM engine that need no vLLM: the watchdog that takes a server's process group
down with its owner (here around a stand-in server: a process with a child of its own), and the
engine choice (a missing engine is a named error with the install command)."""

import importlib.util
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from helpers import REPO

from agentboost.run.config import ConfigError, load_config
from agentboost.sampling.policy_server import resolve_engine
from agentboost.sampling.vllm_server import VLLMNotInstalled, checkpoint_dtype
from agentboost.testing.processes import processes_with_marker, wait_no_processes

WATCHDOG = REPO / "agentboost" / "sampling" / "server_watchdog.py"
# a "server" that starts a child of its own, as vLLM's API server starts its engine core
SERVER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"


def owner_script(tmp_path, mark):
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        r, w = os.pipe()
        p = subprocess.Popen([sys.executable, {str(WATCHDOG)!r}, str(r), "5", "--", sys.executable, "-c", {SERVER!r}],
                             pass_fds=(r,), start_new_session=True, env={{**os.environ, {mark!r}: "1"}})
        os.close(r)
        print("ready", p.pid, flush=True)
        if sys.argv[1] == "stop":
            time.sleep(1.0)
            os.write(w, b"stop")
            p.wait(timeout=30)
            print("stopped", p.returncode, flush=True)
        else:
            time.sleep(600)
    """))
    return script


@pytest.mark.parametrize("how", ["sigkill", "stop"])
def test_the_server_group_ends_with_its_owner(tmp_path, how):
    mark = f"AGENTBOOST_TEST_WATCHDOG_{uuid.uuid4().hex[:8]}"
    owner = subprocess.Popen([sys.executable, str(owner_script(tmp_path, mark)), how], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().startswith("ready")
        deadline = time.time() + 30
        while time.time() < deadline and len(processes_with_marker(mark)) < 3:
            time.sleep(0.1)
        assert len(processes_with_marker(mark)) == 3  # the watchdog, the server, the server's child
        if how == "sigkill":
            owner.send_signal(signal.SIGKILL)
        else:
            assert owner.stdout.readline().startswith("stopped")
        owner.wait(timeout=30)
        assert wait_no_processes(mark, timeout=20) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_engine_choice_and_a_missing_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTBOOST_VLLM_PYTHON", str(tmp_path / "nothing" / "python"))
    assert resolve_engine("hf") == "hf"
    assert resolve_engine("auto", str(tmp_path / "nothing" / "python")) == "hf"
    with pytest.raises(VLLMNotInstalled, match="setup.sh --vllm"):
        resolve_engine("vllm", str(tmp_path / "nothing" / "python"))
    # an interpreter without vllm (agentboost's own: vLLM lives in its own environment) is no vLLM either
    assert importlib.util.find_spec("vllm") is None
    with pytest.raises(VLLMNotInstalled):
        resolve_engine("vllm", sys.executable)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        resolve_engine("vlm")


def test_rollout_engine_is_validated(tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text('{"question": "1+1", "answer": "2"}\n')
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"data:\n  train_file: {data}\n")
    assert load_config(str(cfg), []).rollout.engine == "hf"
    with pytest.raises(ConfigError, match="rollout.engine must be one of hf, vllm, auto; got 'vlm'; did you mean 'vllm'"):
        load_config(str(cfg), ["rollout.engine=vlm"])


def test_checkpoint_dtype_is_what_the_model_declares(tmp_path, smollm2_path):
    assert checkpoint_dtype(smollm2_path) == "float32"
    assert checkpoint_dtype(tmp_path) == "auto"  # no config: vLLM says what is wrong
