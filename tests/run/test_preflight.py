"""One check before a run (``run/preflight.py``): whatever a configuration names that would
fail after the model loads is refused first, in one line, by ``train``, ``train --check``, the
Python API and the job service alike; and no override value, however odd, gets past it as
anything but a one-line ``InputError``."""

import asyncio
import json
import socket

import pytest
from helpers import REPO, cli
from hypothesis import given, settings
from hypothesis import strategies as st

from agentboost.errors import InputError
from agentboost.run.config import TrainConfig, load_config
from agentboost.run.preflight import preflight
from agentboost.sampling import completions_server
from agentboost.sampling.http_sampler import HttpSampler
from agentboost.sampling.protocol import PromptTooLongError, SamplingParams

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


def keys(section, prefix=""):
    import dataclasses

    out = []
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            out += keys(value, f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}")
    return out


ALL_KEYS = keys(TrainConfig())
values = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(), st.text(max_size=20),
                   st.lists(st.text(max_size=8), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
                   st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0", "", "[", "{", "yes", "/nonexistent",
                                    "nosuch.mod:fn", "\udc80", "a" * 300]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(key=st.sampled_from(ALL_KEYS), value=values)
def test_no_override_gets_past_the_checks_as_anything_but_a_one_line_input_error(key, value):
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        cfg = load_config(SMOKE, [f"{key}={text}"])
        preflight(cfg, "config")
    except InputError as e:
        assert str(e) and "\n" not in str(e).strip(), (key, text, str(e))


def test_train_check_runs_every_check_and_writes_nothing(tmp_path):
    r = cli("train", SMOKE, "--check", "--run-dir", tmp_path / "run", timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("configuration OK"), r.stderr[-2000:]
    assert not (tmp_path / "run").exists()
    for override, message in [
        ("reward.name=nosuch.mod:fn", "reward function 'nosuch.mod:fn' does not import"),
        ("agent.tools=[nosuch:tool]", "tool 'nosuch:tool' does not import"),
        ("model.path=/nonexistent", "model '/nonexistent' is neither an embedded model"),
        ("data.val_file=/nonexistent.jsonl", "data.val_file /nonexistent.jsonl does not exist"),
        ("env.conversation=nosuch.mod:conv", "conversation factory 'nosuch.mod:conv' does not import"),
    ]:
        r = cli("train", SMOKE, override, "--check", timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, (override, r.stderr[-2000:])


def test_what_failed_only_after_the_model_loaded_is_refused_at_start():
    # each was accepted by `train --check`, then failed every episode (or sampled for ever) in the run
    for override, message in [
        ("sampling.max_new_tokens=1000000000", "sampling.max_new_tokens must be >= 1 and <= 1e+06, got 1e+09"),
        ("reward.name=json:loads", "reward 'json:loads' is a function of Python's standard library (json), not a reward"),
        ("data.train_file=/dev/zero", "task file /dev/zero is not a regular file (a directory, a device or a pipe)"),
    ]:
        with pytest.raises(InputError) as e:
            preflight(load_config(SMOKE, [override]))
        assert message in str(e.value) and "\n" not in str(e.value), (override, str(e.value))


def test_a_prometheus_port_in_use_and_wandb_without_credentials(monkeypatch, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(InputError, match=f"run.prometheus_port {port} is in use"):
            preflight(load_config(SMOKE, [f"run.prometheus_port={port}"]))
    for var in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with pytest.raises(InputError, match="no W&B credentials"):
        preflight(load_config(SMOKE, ["run.wandb_project=p"]))
    monkeypatch.setenv("WANDB_MODE", "offline")
    preflight(load_config(SMOKE, ["run.wandb_project=p"]))


@pytest.mark.slow
def test_a_request_over_the_servers_size_limit_is_a_prompt_too_long(monkeypatch, smollm2_engine):
    # the server's request limit is lowered so that a short prompt passes it: the sampler names
    # the prompt too long (the episode is truncated), where it used to fail on the 413's text
    monkeypatch.setattr(completions_server, "MAX_REQUEST_BYTES", 4096)
    srv = completions_server.CompletionsServer(smollm2_engine)
    url = srv.start_in_thread()
    try:
        sampler = HttpSampler(url)
        params = SamplingParams(temperature=0.0, max_new_tokens=4)
        assert asyncio.run(sampler.sample([1, 2, 3], params)).response_ids  # under the limit: served
        with pytest.raises(PromptTooLongError, match="over the server's size limit"):
            asyncio.run(sampler.sample([17] * 2000, params))
    finally:
        srv.stop_thread()


def test_a_prompt_past_the_context_is_the_requests_fault_not_the_servers(smollm2_engine):
    # the local engine called it a sampler failure: serve and the gateway answered 502, not a 4xx
    from agentboost.sampling.http_sampler import _prompt_too_long

    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    with pytest.raises(PromptTooLongError, match="does not fit the model's context"):
        smollm2_engine.submit([17] * smollm2_engine.max_context, params)
    # vLLM's v1 engine words it so for a prompt given as token ids (vllm/v1/engine/input_processor.py)
    vllm_says = {"error": {"message": "The decoder prompt (length 2100) is longer than the maximum model length of "
                                      "2048. Make sure that `max_model_len` is no smaller than the number of text "
                                      "tokens.", "type": "BadRequestError", "code": 400}}
    assert _prompt_too_long(vllm_says)


def test_the_python_api_refuses_before_it_writes(tmp_path):
    import agentboost

    run = tmp_path / "run"
    with pytest.raises(InputError, match="reward function 'nosuch.mod:fn' does not import"):
        agentboost.train(config={}, training_data=[{"query": "q", "expected_outcome": "1"}],
                         reward="nosuch.mod:fn", run_dir=run)
    assert not run.exists()


@pytest.mark.slow
def test_the_users_modules_beside_the_config_import_without_pythonpath(tmp_path, smollm2_path):
    import os

    project = tmp_path / "project"
    project.mkdir()
    (project / "myreward.py").write_text("def reward(task, episode):\n    return float(bool(episode.final_answer))\n")
    (project / "mytools.py").write_text("from strands import tool\n\n\n@tool\ndef add(a: int, b: int) -> int:\n"
                                        '    """Add two integers."""\n    return a + b\n')
    (project / "tasks.jsonl").write_text('{"question": "What is 2+3?", "answer": "5"}\n')
    (project / "config.yaml").write_text(
        "data: {train_file: tasks.jsonl, tasks_per_step: 1, group_size: 2}\nreward: {name: 'myreward:reward'}\n"
        "agent: {tools: ['mytools:add']}\nrun: {steps: 1, tensorboard: false}\nvalidation: {at_start: false}\n"
        "sampling: {max_new_tokens: 8}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("train", project / "config.yaml", "--check", cwd=elsewhere, env=env, timeout=120)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stderr[-2000:]
    r = cli("train", project / "config.yaml", "--run-dir", tmp_path / "run", cwd=elsewhere, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]  # the workers import them too
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps and steps[-1]["step"] == 1


def test_a_text_key_takes_its_text_and_an_override_without_a_value_is_refused():
    cfg = load_config(SMOKE, ["env.prompt_template=Answer: {question}", 'run.wandb_project="a b"'])
    assert cfg.env.prompt_template == "Answer: {question}" and cfg.run.wandb_project == "a b"
    with pytest.raises(InputError, match="override 'model.path' must look like key.sub=value"):
        load_config(SMOKE, ["model.path"])
