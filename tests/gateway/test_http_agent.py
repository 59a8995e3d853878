"""`agent.kind: http`: the user's own agent in its own process, given only a base URL and a key,
through a gateway session; the host scores it with the run's reward. Real processes, sockets and
clients; a scripted policy with SmolLM2's tokenizer, except in the training run (the real model)."""
# ruff: noqa: F811 (the fixtures come from gateway_runs by import: a conftest.py here would shadow tests/conftest.py)

import asyncio
import json
import math
import os
import sys
from pathlib import Path

import pytest
from gateway_runs import (  # noqa: F401 (fixtures)
    PARAMS,
    calls_text,
    kimi_k2_tokenizer,
    record_bytes,
    smollm2_tokenizer,
    tok,
)
from helpers import REPO, cli

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.config import spec_from_keys
from agentboost.agents.http_agent import HttpAgentSpec
from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.episodes.record import Status, check_episode
from agentboost.rewards.groups import apply_group_policy
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn

HERE = Path(__file__).parent
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>'
TASK = {"task_id": "add-1", "question": "What is 17 + 25?", "answer": "42"}
ENV = {"PYTHONPATH": f"{HERE}:{REPO}"}  # the entry points' module, for their own process


def episode(tok, spec, script, task=TASK, reward="exact_answer"):
    sampler = ScriptedSampler(script, tok)
    ep = asyncio.run(run_episode(spec, task, sampler, ChatRenderer(tok), PARAMS,
                                 env=StrandsEnv(reward=reward).validate(), group_id="g"))
    return ep, sampler


@pytest.mark.parametrize("script", ["plain_openai_agent.py", "langchain_agent.py"])
def test_an_agent_script_is_recorded_and_scored_here(smollm2_tokenizer, script):
    """The `openai` client in a plain script, and LangChain's ChatOpenAI with a bound tool: each in
    its own process, each given only the base URL and the key."""
    spec = HttpAgentSpec(command=["python", str(REPO / "examples/gateway" / script)], timeout_s=60).validate()
    ep, sampler = episode(smollm2_tokenizer, spec, [CALL, "17 + 25 = 42."])
    assert ep.status == Status.OK, ep.error
    assert check_episode(ep) == [] and len(ep.calls) == 2 and len(ep.segments) == 1 and ep.split_reasons == {}
    assert sampler.prompts == [c.prompt_ids for c in ep.calls]  # the record is what the policy was asked
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("add", True)]
    # the reward ran here, on what the agent printed
    assert ep.final_answer == ep.metadata["agent_output"] == "17 + 25 = 42." and ep.reward == 1.0
    assert ep.group_id == "g" and ep.metadata["agent_kind"] == "http"


@pytest.mark.parametrize("script", ["anthropic_agent.py", "responses_agent.py"])
def test_an_sdk_agents_record_equals_its_in_process_twins(tok, script):
    """The `anthropic` SDK's and the `openai` Responses client's own tool loops (the second continues
    by previous_response_id), each in its own process, against a Strands agent built here with the
    same tool and system prompt: the same scripted policy gives byte-identical records, on three
    templates, with Qwen3's reasoning in every turn."""
    from http_agents import example

    turns = [calls_text(tok, ("calculator", {"expression": "17 + 25"})), "17 + 25 = 42."]
    if "<think>" in tok.chat_template:  # Qwen3 thinks: its reasoning comes back whole (signed thinking,
        turns = [f"<think>\nStep {i}.\n</think>\n\n{t}" for i, t in enumerate(turns)]  # the kept history)
    twin = StrandsAgentSpec(factory="http_agents:sdk_twin", system_prompt=example("anthropic_agent.py").SYSTEM)
    local, _ = episode(tok, twin, turns)
    spec = HttpAgentSpec(command=["python", str(REPO / "examples/gateway" / script)], env=ENV, timeout_s=60).validate()
    remote, sampler = episode(tok, spec, turns)
    assert local.status == remote.status == Status.OK, (local.error, remote.error)
    assert check_episode(remote) == [] and len(remote.calls) == 2 and len(remote.segments) == 1
    assert record_bytes(remote) == record_bytes(local)
    assert sampler.prompts == [c.prompt_ids for c in remote.calls] and remote.reward == local.reward == 1.0


def test_an_entry_point_runs_in_its_own_process_and_its_return_value_is_the_answer(smollm2_tokenizer):
    spec = HttpAgentSpec(entry_point="http_agents:answer", env=ENV, timeout_s=60).validate()
    ep, _ = episode(smollm2_tokenizer, spec, ["It is 41."])
    assert ep.status == Status.OK, ep.error
    assert ep.final_answer == "It is 41." and ep.reward == 0.0 and check_episode(ep) == []


@pytest.mark.parametrize("command,status,reason", [
    (["python", "-c", "import time; time.sleep(60)"], Status.TIMEOUT, "exceeded its 3 s limit"),
    (["python", "-c", "import sys; sys.exit('no key in the vault')"], Status.ERROR, "no key in the vault"),
    (["python", "-c", "print(42)"], Status.ERROR, "made no model call through the gateway"),
    (["./no-such-agent"], Status.ERROR, "agent: FileNotFoundError"),
], ids=["timeout", "exit-code", "no-call", "no-command"])
def test_a_failing_agent_is_one_record_with_its_status_and_reason(smollm2_tokenizer, command, status, reason):
    ep, _ = episode(smollm2_tokenizer, HttpAgentSpec(command=command, timeout_s=3).validate(), ["never asked."])
    assert ep.status == status and reason in ep.error, ep.error
    assert ep.reward is None  # failed: the group policy gives it the failed reward, never the reward function


def test_a_client_gone_mid_call_leaves_the_episode_incomplete_and_out_of_training(smollm2_tokenizer):
    spec = HttpAgentSpec(entry_point="http_agents:impatient", env=ENV, timeout_s=60).validate()
    ep, sampler = episode(smollm2_tokenizer, spec, [ScriptedTurn("late.", delay_s=3.0)])
    assert sampler.calls == 1
    assert ep.status == Status.INCOMPLETE and "disconnected" in ep.error and ep.failed
    assert ep.metadata["gateway"]["incomplete"] and ep.metadata["agent_output"] == "gave up"
    # never trained on, whatever the group policy: its group goes on without it, counted
    ok, _ = episode(smollm2_tokenizer, HttpAgentSpec(entry_point="http_agents:answer", env=ENV).validate(), ["42."])
    for policy in ("keep", "drop"):
        kept, report = apply_group_policy([ep, ok], policy, group_size=2)
        assert kept == [ok] and report.incomplete_episodes == 1 and report.dropped_groups == 0


def test_the_agent_kinds_from_configuration_keys():
    assert isinstance(spec_from_keys({"kind": "strands", "command": "", "max_model_calls": 3}), StrandsAgentSpec)
    spec = spec_from_keys({"kind": "http", "command": "python agent.py --fast", "max_model_calls": 3,
                           "tools": ["agentboost.tools.calculator:calculator"], "system_prompt": None})
    assert isinstance(spec, HttpAgentSpec) and spec.argv() == [sys.executable, "agent.py", "--fast"]
    assert spec.max_model_calls == 3 and spec.tools == ()
    for keys, message in [({"kind": "strands", "command": "x"}, "agent.command is for agent.kind http"),
                          ({"kind": "http", "command": "x", "tools": ["m:t"]}, "agent.tools is not used"),
                          ({"kind": "lambda"}, "agent.kind must be one of strands, http"),
                          ({"kind": "http"}, "exactly one of command and entry_point"),
                          ({"kind": "http", "entry_point": "nope_module:fn"}, "nope_module")]:
        with pytest.raises(AgentSpecError, match=message):
            spec_from_keys(keys).validate()


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["strands_openai_agent.py", "anthropic_agent.py", "responses_agent.py"])
def test_train_trains_an_agent_in_its_own_process(tmp_path, smollm2_path, agent):
    """The done-when runs: `agentboost train` on the quickstart task, the agent in its own process
    (a Strands agent with the stock OpenAIModel, the `anthropic` SDK's own tool loop over Anthropic
    Messages, the `openai` client's Responses tool loop by previous_response_id), a real policy on
    CPU; finite losses, token-exact episodes (`agentboost check`)."""
    run = tmp_path / "run"
    r = cli("train", "--run-dir", str(run), str(REPO / "examples/gateway/http_agent.yaml"), "data.tasks_per_step=1",
            f"agent.command=python examples/gateway/{agent}",
            "sampling.max_new_tokens=32", "agent.max_model_calls=2", "reward.name=helpers:length_reward",
            cwd=REPO, timeout=600,  # helpers (the reward) importable by the trainer and its workers
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"),
                                                                           str(REPO / "tests")]))})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "train/loss" in m or "loss" in m]
    assert len(steps) == 2, metrics
    loss_key = "train/loss" if "train/loss" in steps[0] else "loss"
    assert all(math.isfinite(m[loss_key]) for m in steps)
    files = sorted((run / "episodes").glob("*.jsonl"))
    episodes = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(episodes) == 4 and all(ep["metadata"]["agent_kind"] == "http" for ep in episodes)
    # the agent reached the policy (real calls, through the gateway) and its episodes trained
    assert sum(len(ep["calls"]) for ep in episodes) >= 4
    assert sum(ep["status"] in ("ok", "truncated") for ep in episodes) >= 2, [ep["error"] for ep in episodes]
    both = tmp_path / "episodes.jsonl"  # one `agentboost check` for the whole run
    both.write_text("".join(f.read_text() for f in files))
    c = cli("check", str(both), cwd=REPO, timeout=120)
    assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.slow
def test_the_merge_rate_gate_fails_a_run_whose_episodes_split(tmp_path, smollm2_path):
    """An agent that forgets its history between calls: every episode splits (rewritten_history), and
    with run.max_split_share=0.5 the run fails at its first step naming the reason, episodes kept."""
    run = tmp_path / "run"
    r = cli("train", "--run-dir", str(run), str(REPO / "examples/gateway/http_agent.yaml"), "data.tasks_per_step=1",
            "agent.command=", "agent.entry_point=http_agents:forgetful", "sampling.max_new_tokens=8",
            "agent.max_model_calls=2", "run.max_split_share=0.5", "run.split_gate_min_episodes=2",
            cwd=REPO, timeout=600, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)])})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    assert "run failed: TooManySplits: step 1: 2 of the run's 2 episodes split" in r.stderr, r.stderr[-3000:]
    assert "commonest split reasons: rewritten_history (2)" in r.stderr and "Traceback" not in r.stderr
    assert (run / "episodes" / "step_000001.jsonl").is_file() and not (run / "checkpoints" / "latest").exists()


def test_settings_for_an_agent_agentboost_builds_are_refused_for_an_http_agent_in_one_line():
    r = cli("rollout", "--prompt", "hi", "--agent-command", "python agent.py", "--tool", "m:t", cwd=REPO, timeout=120)
    assert r.returncode == 2 and "--agent-command and --agent-entry-point run your own agent" in r.stderr, r.stderr
    r = cli("train", "--check", str(REPO / "examples/gateway/http_agent.yaml"), "agent.system_prompt=Be brief.",
            cwd=REPO, timeout=120)
    assert r.returncode == 2 and "agent.system_prompt is not used by an http agent" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
