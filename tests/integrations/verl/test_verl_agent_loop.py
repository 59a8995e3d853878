"""The Strands agent loop inside veRL 0.9.1's real ``AgentLoopWorker`` (built from veRL's own
``ppo_trainer`` config, no Ray), with a server client that has the real ``generate`` signature and
answers through agentboost samplers: scripted turns with SmolLM2's tokenizer, and the real
SmolLM2 through the local engine."""

import asyncio
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from agentboost.integrations.verl.config import compose_ppo_config
from agentboost.integrations.verl.sampler import VerlServerSampler
from agentboost.integrations.verl.server_client import ForwardingServerClient
from agentboost.sampling.protocol import SamplerError, SamplingParams
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn

def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a judge service that is down."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PROMPT_LEN, RESPONSE_LEN = 1024, 256
FAILED = -1.0
LOOPS_YAML = """
- name: strands_agent
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], system_prompt: "YAML-PROMPT use the calculator.",
          max_model_calls: 4, timeout_s: 30}
  env: {reward: exact_answer, failed_reward: -1.0}
- name: strands_looping
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], system_prompt: "Loop.", max_model_calls: 100,
          max_response_tokens: 100000, timeout_s: 60}
  env: {reward: exact_answer, failed_reward: -1.0}
- name: strands_quick_timeout
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], system_prompt: "Hurry.", timeout_s: 1}
  env: {reward: exact_answer, failed_reward: -1.0}
- name: strands_short
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], max_model_calls: 3, timeout_s: 900}
  env: {reward: exact_answer, failed_reward: -1.0}
  max_new_tokens: 48
- name: strands_slow_reward
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], timeout_s: 30}
  env: {reward: "test_verl_agent_loop:slow_reward", failed_reward: -1.0}
  score_timeout_s: 0.5
- name: strands_tau2
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.environments.tau2.tools.airline:get_reservation_details"], system_prompt: null, max_model_calls: 6,
          timeout_s: 60, agent_type: tau2}
  env:
    reward: agentboost.environments.tau2.evaluator:tau2_reward
    failed_reward: -1.0
    conversation: agentboost.environments.tau2.conversation:tau2_conversation
    conversation_options: {user: scripted, user_options: {turns: 2}, system_prompt: compact, compact_chars: 300}
- name: http_agent
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent:
    kind: http
    command: python EXAMPLES/gateway/strands_openai_agent.py
    max_model_calls: 3
    timeout_s: 120
  env:
    reward: exact_answer
    failed_reward: -1.0
- name: strands_judge_down
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent: {tools: ["agentboost.tools.calculator:calculator"], max_model_calls: 4, timeout_s: 30}
  env:
    reward: judge
    failed_reward: -1.0
    judge: {rubric: "Score 1 when the answer is right.",
            model: {provider: openai, model_id: judge, base_url: "http://127.0.0.1:DEADPORT/v1",
                    api_key_env: AB_VERL_JUDGE_KEY, max_retries: 0, timeout_s: 5}}
""".replace("EXAMPLES", str(Path(__file__).resolve().parents[3] / "examples")).replace("DEADPORT", str(_dead_port()))


def slow_reward(task, episode):
    """A reward that outlives its time limit (and would then call the episode a success)."""
    import time

    time.sleep(2.0)
    return 1.0
TOOL_CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>'


def overrides(model_path, yaml_path, *extra):
    return [f"actor_rollout_ref.model.path={model_path}", "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.prompt_length={PROMPT_LEN}",
            f"actor_rollout_ref.rollout.response_length={RESPONSE_LEN}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={yaml_path}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "actor_rollout_ref.rollout.temperature=0.8", "actor_rollout_ref.rollout.top_p=0.95",
            "actor_rollout_ref.rollout.val_kwargs.temperature=0.3", "actor_rollout_ref.rollout.val_kwargs.top_p=0.9",
            *extra]


def script_for(tok):
    """Turns chosen by what the prompt holds, so episodes can interleave in one worker."""
    def turn(prompt_ids, index):
        text = tok.decode(prompt_ids)
        if "(The policy is abridged.)" in text:  # a tau2 conversation: answer each user turn in text
            return f"Reply {text.count('<|im_start|>user')}."
        if "BROKEN" in text:
            return ScriptedTurn(error="the server is down")
        if "SLOW" in text:
            return ScriptedTurn(text="late", delay_s=4.0)
        if "LOOP" in text:
            return TOOL_CALL
        return TOOL_CALL if text.count("<tool_response>") == 0 else "The answer is 5."
    return turn


def batch(rows, agent_name="strands_agent", validate=False):
    from verl.protocol import DataProto

    n = len(rows)
    raw = np.empty(n, dtype=object)
    raw[:] = [[{"role": "user", "content": r["question"]}] for r in rows]
    names = [r.get("agent", agent_name) for r in rows]
    nt = {"raw_prompt": raw, "agent_name": np.array(names, dtype=object),
          "extra_info": np.array([{"index": i, "agentboost_task": json.dumps(r)} for i, r in enumerate(rows)],
                                 dtype=object),
          "index": np.arange(n)}
    return DataProto.from_dict(tensors={"dummy_tensor": torch.zeros(n, 1, dtype=torch.uint8)}, non_tensors=nt,
                               meta_info={"validate": validate})


def unpack(out):
    """Per row: the unpadded prompt, response, mask, rollout log-probs, rm_scores and extras."""
    b, P = out.batch, out.batch["prompts"].shape[1]
    rows = []
    for i in range(len(out)):
        att = b["attention_mask"][i]
        n_prompt, n_resp = int(att[:P].sum()), int(att[P:].sum())
        rows.append({
            "prompt": b["prompts"][i][P - n_prompt:].tolist(),
            "response": b["responses"][i][:n_resp].tolist(),
            "mask": b["response_mask"][i][:n_resp].tolist(),
            "logprobs": b["rollout_log_probs"][i][:n_resp].tolist(),
            "rm": b["rm_scores"][i].tolist(), "n_resp": n_resp,
            **{k: out.non_tensor_batch[k][i] for k in out.non_tensor_batch if k.startswith("agentboost_")},
        })
    return rows


def sampled_by_request(client):
    by = {}
    for r in client.requests:
        by.setdefault(r["request_id"], []).append(r)
    return by


@pytest.fixture(scope="module")
def loops_yaml(tmp_path_factory):
    p = tmp_path_factory.mktemp("verl") / "agent_loops.yaml"
    p.write_text(LOOPS_YAML)
    return p


@pytest.fixture(scope="module")
def scripted_worker(smollm2_path, loops_yaml):
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    client = ForwardingServerClient(ScriptedSampler(script_for(tok), tok, logprob=-0.25))
    cfg = compose_ppo_config(overrides(smollm2_path, loops_yaml))
    return AgentLoopWorker(cfg, llm_client=client), client, tok


# -- the sampler over veRL's client ----------------------------------------------------------------
def test_fake_client_has_the_installed_llm_server_client_signature():
    from verl.workers.rollout.llm_server import LLMServerClient

    def shape(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert shape(ForwardingServerClient.generate) == shape(LLMServerClient.generate)
    assert inspect.iscoroutinefunction(inspect.unwrap(LLMServerClient.generate))


class _Server:
    """Answers with fixed TokenOutputs, to see how the sampler reads what veRL returns."""

    def __init__(self, outputs):
        self.outputs, self.calls = list(outputs), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        self.calls.append((request_id, list(prompt_ids), sampling_params))
        return self.outputs.pop(0)


def test_sampler_infers_length_keeps_logprobs_sends_stop_ids_and_one_request_id():
    from verl.workers.rollout.replica import TokenOutput

    server = _Server([TokenOutput(token_ids=[5, 6, 2], log_probs=[-0.1, -0.2, -0.3], stop_reason="completed"),
                      TokenOutput(token_ids=[7, 8], log_probs=[-0.4, -0.5], stop_reason="completed"),
                      TokenOutput(token_ids=[9], log_probs=None, stop_reason="completed"),
                      TokenOutput(token_ids=[], stop_reason="aborted")])
    rollout = {"temperature": 0.7, "top_p": 0.9, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False,
               "not_a_sampling_key": 1}
    s = VerlServerSampler(server, "episode-1", rollout, stop_token_ids=[2, 3])
    # whatever the model side asks for besides the budget, the rollout's parameters are sent
    stop = asyncio.run(s.sample([1, 2, 3], SamplingParams(temperature=1.7, top_p=0.3, max_new_tokens=8)))
    assert stop.finish_reason == "stop" and stop.response_ids == [5, 6, 2] and stop.logprobs == [-0.1, -0.2, -0.3]
    # "completed" without a stop token at the end: the budget cut it
    cut = asyncio.run(s.sample([1, 2, 3, 5, 6, 2, 4], SamplingParams(max_new_tokens=2)))
    assert cut.finish_reason == "length" and cut.logprobs == [-0.4, -0.5]
    with pytest.raises(SamplerError, match="log-probs"):
        asyncio.run(s.sample([1], SamplingParams(max_new_tokens=2)))
    with pytest.raises(SamplerError, match="aborted"):
        asyncio.run(s.sample([1], SamplingParams(max_new_tokens=2)))
    assert {c[0] for c in server.calls} == {"episode-1"}  # sticky: one id per episode
    first, second = server.calls[0][2], server.calls[1][2]
    assert first == {"temperature": 0.7, "top_p": 0.9, "top_k": -1, "repetition_penalty": 1.0, "max_tokens": 8,
                     "logprobs": True, "stop_token_ids": [2, 3]}
    assert second["max_tokens"] == 2 and first is not second  # a fresh dict per call (servers pop keys)


# -- the loop in veRL's worker ----------------------------------------------------------------------
def test_multi_turn_tool_episodes_are_one_row_each_with_the_sampled_tokens_and_rewards(scripted_worker):
    worker, client, tok = scripted_worker
    client.requests.clear()
    tasks = [{"task_id": "right", "question": "What is 2+3?", "answer": "5"},
             {"task_id": "wrong", "question": "What is 2+2?", "answer": "4"}]
    rows = unpack(asyncio.run(worker.generate_sequences(batch(tasks))))
    by = sampled_by_request(client)
    assert [r["agentboost_status"] for r in rows] == ["ok", "ok"]
    assert [r["agentboost_reward"] for r in rows] == [1.0, 0.0]
    for row in rows:
        reqs = by[row["agentboost_episode_id"]]
        assert len(reqs) == 2 and row["agentboost_model_calls"] == 2 and row["agentboost_tool_calls"] == 1
        # the tokens trained on are exactly the sampled ones, with their log-probs
        sampled = [t for r in reqs for t in r["token_ids"]]
        assert [t for t, m in zip(row["response"], row["mask"]) if m] == sampled
        assert [lp for lp, m in zip(row["logprobs"], row["mask"]) if m] == [lp for r in reqs for lp in r["log_probs"]]
        # one row: the first prompt, then every later prompt is a prefix of the whole sequence
        assert row["prompt"] == reqs[0]["prompt_ids"]
        whole = row["prompt"] + row["response"]
        assert whole[: len(reqs[1]["prompt_ids"])] == reqs[1]["prompt_ids"]
        assert "<tool_response>" in tok.decode(row["response"]) and 0 in row["mask"]
        assert "YAML-PROMPT" in tok.decode(row["prompt"])
        # rm_scores: the reward on the last response token, zero elsewhere
        assert row["rm"][row["n_resp"] - 1] == row["agentboost_reward"] and sum(row["rm"]) == row["agentboost_reward"]
        assert row["agentboost_forced_extensions"] == 0  # SmolLM2's template never re-renders here


def test_a_tau2_conversation_is_one_row_with_the_user_turns_under_mask_0(scripted_worker):
    """The agent loop runs the environment's conversation (tau2, scripted user saying two lines):
    one row, the user's turns in it under mask 0, the model's replies under mask 1, scored by the
    conversation's ending."""
    pytest.importorskip("tau2.domains.airline.environment")
    from agentboost.environments.tau2 import domain as td

    worker, client, tok = scripted_worker
    client.requests.clear()
    row = next(r for r in td.task_rows("airline", "base") if not r["evaluation_criteria"]["actions"])
    (out,) = unpack(asyncio.run(worker.generate_sequences(batch([dict(row, agent="strands_tau2")]))))
    assert out["agentboost_status"] == "ok", out.get("agentboost_error")
    reqs = sampled_by_request(client)[out["agentboost_episode_id"]]
    assert len(reqs) == 2  # two user lines, two replies; then the user's stop ends it
    assert [t for t, m in zip(out["response"], out["mask"]) if m] == [t for r in reqs for t in r["token_ids"]]
    user_part = tok.decode([t for t, m in zip(out["response"], out["mask"]) if not m])
    known = row["user_scenario"]["instructions"]["known_info"].strip()
    assert known[:40] in user_part and "Reply" not in user_part
    assert "Hi! How can I help you today?" in tok.decode(out["prompt"])
    # the task needs no action and nothing to say: a user stop scores 1, as tau2 scores it
    assert out["agentboost_reward"] == 1.0


def test_training_uses_the_rollout_parameters_and_validation_its_val_kwargs(scripted_worker):
    worker, client, _ = scripted_worker
    task = [{"task_id": "t", "question": "What is 2+3?", "answer": "5"}]
    for validate, (temp, top_p) in ((False, (0.8, 0.95)), (True, (0.3, 0.9))):
        client.requests.clear()
        asyncio.run(worker.generate_sequences(batch(task, validate=validate)))
        sent = [r["sampling_params"] for r in client.requests]
        assert len(sent) == 2 and all(p["temperature"] == temp and p["top_p"] == top_p for p in sent)


def test_an_episode_that_would_not_fit_the_row_ends_truncated_within_it(scripted_worker):
    worker, client, _ = scripted_worker
    client.requests.clear()
    out = asyncio.run(worker.generate_sequences(batch([{"task_id": "l", "question": "LOOP forever", "answer": "5"}],
                                                      agent_name="strands_looping")))
    (row,) = unpack(out)
    reqs = client.requests
    assert row["agentboost_status"] == "truncated" and len(reqs) > 3
    assert row["n_resp"] <= RESPONSE_LEN
    for r in reqs:  # every turn's budget kept the whole sequence inside the row
        assert len(r["prompt_ids"]) - len(reqs[0]["prompt_ids"]) + r["sampling_params"]["max_tokens"] <= RESPONSE_LEN
    assert [t for t, m in zip(row["response"], row["mask"]) if m] == [t for r in reqs for t in r["token_ids"]]
    assert row["agentboost_reward"] == 0.0 and sum(row["rm"]) == 0.0  # scored (no answer), not the failed reward


def test_failed_episodes_yield_a_valid_row_with_the_failed_reward(scripted_worker):
    worker, _, tok = scripted_worker
    tasks = [{"task_id": "slow", "question": "SLOW please", "answer": "5", "agent": "strands_quick_timeout"},
             {"task_id": "broken", "question": "BROKEN server", "answer": "5"},
             {"task_id": "fine", "question": "What is 2+3?", "answer": "5"}]
    rows = unpack(asyncio.run(worker.generate_sequences(batch(tasks))))
    assert [r["agentboost_status"] for r in rows] == ["timeout", "error", "ok"]
    assert "the server is down" in rows[1]["agentboost_error"] and "1 s" in rows[0]["agentboost_error"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    for row in rows[:2]:
        assert row["prompt"] == [pad] and row["response"] == [pad] and row["mask"] == [1]
        assert row["rm"][0] == FAILED and sum(row["rm"]) == FAILED and row["agentboost_reward"] == FAILED
    assert rows[2]["agentboost_reward"] == 1.0  # the group's other members are untouched


def test_an_aborted_episode_trains_nothing_and_is_counted_not_failed(scripted_worker, monkeypatch):
    """The judge's service is down (a real connection refused through Strands' OpenAI provider): the
    episode is aborted, not a wrong answer. Its row has mask 0, so with veRL's own GRPO and loss
    (installed core_algos) it gets no advantage and the loss stays finite in every loss mode; it is
    counted in reward_extra_info, not as failed. Its score, which veRL requires, is the failed reward
    (a loop cannot leave veRL's uid group; the agent_loop docstring says so)."""
    from verl.trainer.ppo.core_algos import agg_loss, compute_grpo_outcome_advantage

    monkeypatch.setenv("AB_VERL_JUDGE_KEY", "sk-unused")
    worker, _, tok = scripted_worker
    tasks = [{"task_id": "t", "question": "What is 2+3?", "answer": "5"},
             {"task_id": "t", "question": "What is 2+2?", "answer": "4"},
             {"task_id": "t", "question": "What is 2+3?", "answer": "5", "agent": "strands_judge_down"}]
    out = asyncio.run(worker.generate_sequences(batch(tasks)))
    rows = unpack(out)
    assert [r["agentboost_status"] for r in rows] == ["ok", "ok", "aborted"]
    assert "Connect" in rows[2]["agentboost_error"], rows[2]["agentboost_error"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    assert rows[2]["response"] == [pad] and rows[2]["mask"] == [0] and rows[2]["rm"][0] == FAILED
    assert list(out.non_tensor_batch["aborted"]) == [0.0, 0.0, 1.0]
    assert list(out.non_tensor_batch["failed"]) == [0.0, 0.0, 0.0]
    mask = out.batch["response_mask"]
    adv, _ = compute_grpo_outcome_advantage(out.batch["rm_scores"], mask, np.array(["u"] * 3, dtype=object))
    assert adv[2].abs().sum() == 0 and adv[0].abs().sum() > 0
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        loss = agg_loss(-adv * 0.5, mask, mode)  # a per-token loss shaped like the policy loss
        assert torch.isfinite(loss), mode
        # the same loss as a batch without the row (the per-sequence modes do not count it either)
        assert torch.allclose(loss, agg_loss(-adv[:2] * 0.5, mask[:2], mode)), mode


def test_an_http_agent_in_its_own_process_is_one_row_of_exactly_the_sampled_tokens(scripted_worker):
    """agent.kind http from veRL's loop: a Strands agent with the stock OpenAIModel in its own
    process, through a gateway session in front of veRL's server client; one row, the sampled
    tokens under mask 1, the reward computed here from what the agent printed."""
    worker, client, tok = scripted_worker
    client.requests.clear()
    (row,) = unpack(asyncio.run(worker.generate_sequences(batch(
        [{"task_id": "h", "question": "What is 2+3?", "answer": "5"}], agent_name="http_agent"))))
    assert row["agentboost_status"] == "ok" and row["agentboost_reward"] == 1.0, row["agentboost_error"]
    reqs = sampled_by_request(client)[row["agentboost_episode_id"]]
    assert len(reqs) == 2 == row["agentboost_model_calls"] and row["agentboost_tool_calls"] == 1
    assert row["prompt"] == reqs[0]["prompt_ids"]
    assert [t for t, m in zip(row["response"], row["mask"]) if m] == [t for r in reqs for t in r["token_ids"]]
    assert (row["prompt"] + row["response"])[: len(reqs[1]["prompt_ids"])] == reqs[1]["prompt_ids"]


def test_a_reward_over_its_time_limit_gives_a_failed_row(scripted_worker):
    worker, _, _ = scripted_worker
    out = asyncio.run(worker.generate_sequences(batch([{"task_id": "s", "question": "What is 2+3?", "answer": "5"}],
                                                      agent_name="strands_slow_reward")))
    (row,) = unpack(out)
    assert row["agentboost_status"] == "timeout" and "reward exceeded its 0.5 s limit" in row["agentboost_error"]
    assert row["agentboost_reward"] == FAILED and row["mask"] == [1]


def test_rows_without_an_agentboost_task_use_the_prompt(scripted_worker):
    from agentboost.integrations.verl.agent_loop import task_from_row

    assert task_from_row({"raw_prompt": [{"role": "user", "content": "hi"}], "index": 3}) == {
        "question": "hi", "task_id": "3"}
    assert task_from_row({"extra_info": {"question": "q", "answer": 1, "index": 0}})["answer"] == 1
    worker, _, _ = scripted_worker
    b = batch([{"task_id": "x", "question": "What is 2+3?", "answer": "5"}])
    b.non_tensor_batch["extra_info"][0] = {"index": 0, "agentboost_task": "{not json"}
    (row,) = unpack(asyncio.run(worker.generate_sequences(b)))
    assert row["agentboost_status"] == "error" and "agentboost_task" in row["agentboost_error"]
    assert row["mask"] == [1] and row["agentboost_reward"] == FAILED


def test_yaml_kwargs_reach_every_instance_even_after_the_module_is_first_imported(smollm2_path, loops_yaml, tmp_path):
    """The trap: veRL's @register decorator writes a bare entry under its name when the module is
    first imported, which happens while the worker instantiates the first loop, after it loaded
    the YAML list; later instances would then lose their YAML keys. Run in a fresh interpreter so
    the module really is imported by the worker."""
    code = textwrap.dedent(f"""
        import asyncio, json, sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        from verl.experimental.agent_loop import agent_loop as al
        from test_verl_agent_loop import batch, overrides, script_for, unpack
        from agentboost.integrations.verl.config import compose_ppo_config
        from agentboost.sampling.scripted import ScriptedSampler
        from agentboost.integrations.verl.server_client import ForwardingServerClient
        assert "agentboost.integrations.verl.agent_loop" not in sys.modules
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(smollm2_path)!r})
        client = ForwardingServerClient(ScriptedSampler(script_for(tok), tok))
        w = al.AgentLoopWorker(compose_ppo_config(overrides({str(smollm2_path)!r}, {str(loops_yaml)!r})), client)
        task = [dict(task_id="t", question="What is 2+3?", answer="5")]
        for _ in range(2):  # the second batch runs after the module's first import
            rows = unpack(asyncio.run(w.generate_sequences(batch(task))))
            assert rows[0]["agentboost_status"] == "ok", rows[0]
        assert "agentboost.integrations.verl.agent_loop" in sys.modules
        assert "agent" in al._agent_loop_registry["strands_agent"], al._agent_loop_registry["strands_agent"]
        systems = [tok.decode(r["prompt_ids"]).count("YAML-PROMPT") for r in client.requests]
        print(json.dumps(systems))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(counts) == 4 and all(c == 1 for c in counts)  # every call of both episodes: the YAML's prompt


def test_verls_default_v1_worker_stores_the_same_rows(scripted_worker, monkeypatch):
    """main_ppo's default (trainer.use_v1) worker post-processes each output into TransferQueue:
    its own post-processing, with the store (a distributed service) replaced by a recorder."""
    import types

    from verl.trainer.ppo.v1 import agent_loop_tq

    worker, client, _ = scripted_worker
    stored = []

    class _Store:
        async def async_kv_batch_put(self, keys, fields, tags, partition_id):
            stored.append({"keys": keys, "fields": fields, "tags": tags, "partition": partition_id})

    monkeypatch.setattr(agent_loop_tq, "tq", _Store())
    post = agent_loop_tq.AgentLoopWorkerTQ.__ray_metadata__.modified_class._agent_loop_postprocess
    monkeypatch.setattr(worker, "_agent_loop_postprocess", types.MethodType(post, worker))
    params = {"temperature": 0.8, "top_p": 0.95, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    client.requests.clear()
    for i, task in enumerate([{"task_id": "ok", "question": "What is 2+3?", "answer": "5"},
                              {"task_id": "bad", "question": "BROKEN server", "answer": "5"}]):
        asyncio.run(worker._run_agent_loop(
            dict(params), {"step": 1, "sample_index": i, "rollout_n": 0, "validate": False}, agent_name="strands_agent",
            uid=f"u{i}", session_id=0, global_steps=1, index=i,
            raw_prompt=[{"role": "user", "content": task["question"]}],
            extra_info={"index": i, "agentboost_task": json.dumps(task)}))
    ok, bad = stored
    assert ok["keys"] == ["u0_0_0"] and ok["tags"][0]["status"] == "success" and ok["partition"] == "train"
    f = ok["fields"][0]
    mask, resp = f["response_mask"].tolist(), f["responses"].tolist()
    sampled = [t for r in client.requests if r["request_id"] == f["extra_fields"]["agentboost_episode_id"]
               for t in r["token_ids"]]
    assert [t for t, m in zip(resp, mask) if m] == sampled and f["loss_mask"].tolist() == mask
    assert f["prompts"].tolist() == client.requests[0]["prompt_ids"]
    assert f["rm_scores"].tolist()[-1] == 1.0 and float(f["rm_scores"].sum()) == 1.0
    assert len(f["rollout_log_probs"]) == len(resp)
    b = bad["fields"][0]
    assert b["response_mask"].tolist() == [1] and b["rm_scores"].tolist() == [FAILED]
    assert b["extra_fields"]["agentboost_status"] == "error"


# -- the real model ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_smollm2_through_the_worker_trains_exactly_the_sampled_tokens(smollm2_path, smollm2_engine, loops_yaml):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from agentboost.sampling.hf_engine import EngineSampler

    client = ForwardingServerClient(EngineSampler(smollm2_engine))
    worker = AgentLoopWorker(compose_ppo_config(overrides(smollm2_path, loops_yaml)), llm_client=client)
    tasks = [{"task_id": f"r{i}", "question": q, "answer": a, "agent": "strands_short"}
             for i, (q, a) in enumerate([("What is 12 * 7? Use the calculator.", "84"), ("What is 5 + 9?", "14")])]
    rows = unpack(asyncio.run(worker.generate_sequences(batch(tasks))))
    by = sampled_by_request(client)
    assert len(by) == 2
    for row in rows:
        assert row["agentboost_status"] in ("ok", "truncated"), row["agentboost_error"]
        reqs = by[row["agentboost_episode_id"]]
        assert [t for t, m in zip(row["response"], row["mask"]) if m] == [t for r in reqs for t in r["token_ids"]]
        assert [lp for lp, m in zip(row["logprobs"], row["mask"]) if m] == pytest.approx(
            [lp for r in reqs for lp in r["log_probs"]], abs=1e-6)
        assert row["prompt"] == reqs[0]["prompt_ids"] and row["n_resp"] <= RESPONSE_LEN
        assert sum(row["rm"]) == row["agentboost_reward"] and row["agentboost_reward"] in (0.0, 1.0)
        assert all(r["sampling_params"]["temperature"] == 0.8 and r["sampling_params"]["max_tokens"] <= 48
                   for r in reqs)
