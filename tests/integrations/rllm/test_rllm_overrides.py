"""The three rLLM-path overrides against stand-ins honouring the upstream interfaces.

The stand-ins (rllm_fakes.py, beside this file) are installed into a temporary site-packages and
the real patcher puts agentboost's override modules over them, so every ``import ..._upstream``
resolves as in a real installation. Strands agents, the worker pool, the HTTP sampler and the
policy server (SmolLM2 behind agentboost's completions server) are real.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import rllm_fakes as fakes
import torch
from helpers import REPO, serve_app
from omegaconf import OmegaConf

from agentboost.episodes.record import (
    Episode,
    ModelCall,
    build_segments,
    check_episode,
    read_episodes,
)
from agentboost.integrations.rllm.episode_rows import batch_tensors, episode_row


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site-packages")
    fakes.install(root, fakes.FAKE_RLLM, REPO)
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "rllm" or m.startswith("rllm.")
                     or m == "agentboost.integrations.rllm.agents"]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def mods(site):
    return {
        "engine": importlib.import_module("rllm.engine.agent_execution_engine"),
        "engine_up": importlib.import_module("rllm.engine.agent_execution_engine_upstream"),
        "trainer": importlib.import_module("rllm.trainer.verl.agent_ppo_trainer"),
        "trainer_up": importlib.import_module("rllm.trainer.verl.agent_ppo_trainer_upstream"),
        "adapters": importlib.import_module("agentboost.integrations.rllm.agents"),
    }


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_stand_ins_honour_the_upstream_interfaces(mods):
    up, tr_up = mods["engine_up"], mods["trainer_up"]
    assert params(up.AgentExecutionEngine.__init__) == fakes.ENGINE_INIT_PARAMS
    assert params(up.AgentExecutionEngine.trajectory_generator) == fakes.TRAJECTORY_GENERATOR_PARAMS
    assert params(up.AgentExecutionEngine.update_envs_and_agents) == fakes.UPDATE_ENVS_AND_AGENTS_PARAMS
    assert params(tr_up.AgentPPOTrainer.__init__) == fakes.TRAINER_INIT_PARAMS
    assert params(tr_up.AgentPPOTrainer._transform_agent_trajectories) == fakes.TRANSFORM_PARAMS
    assert params(tr_up.AgentPPOTrainer.visualize_trajectory) == fakes.VISUALIZE_PARAMS
    from rllm.agents.agent import BaseAgent
    from rllm.environments.base.base_env import BaseEnv

    assert BaseAgent.__abstractmethods__ == fakes.BASE_AGENT_ABSTRACT
    assert BaseEnv.__abstractmethods__ == fakes.BASE_ENV_ABSTRACT


def test_overrides_extend_upstream_and_the_trainer_picks_them_up(mods):
    ov, up, tr, tr_up = mods["engine"], mods["engine_up"], mods["trainer"], mods["trainer_up"]
    assert issubclass(ov.AsyncAgentExecutionEngine, up.AsyncAgentExecutionEngine)
    assert issubclass(ov.AgentExecutionEngine, up.AgentExecutionEngine)
    # the trainer module imports the engine by name: after patching it gets ours
    assert tr_up.AsyncAgentExecutionEngine is ov.AsyncAgentExecutionEngine
    assert issubclass(tr.AgentPPOTrainer, tr_up.AgentPPOTrainer)
    assert params(ov.AsyncAgentExecutionEngine.trajectory_generator) == fakes.TRAJECTORY_GENERATOR_PARAMS
    assert params(tr.AgentPPOTrainer._transform_agent_trajectories) == fakes.TRANSFORM_PARAMS
    # every upstream constructor argument is still accepted, and engine_args pass through
    names = [p for p in fakes.ENGINE_INIT_PARAMS if p not in ("self", "kwargs")]
    e = ov.AsyncAgentExecutionEngine(**{n: None for n in names if n not in ("engine_name", "n_parallel_agents")},
                                     engine_name="openai", n_parallel_agents=2, sampling_params={"x": 1})
    assert e.sampling_params == {"x": 1}
    # the adapters are rLLM classes, so rLLM's own isinstance checks accept them
    a = mods["adapters"]
    from rllm.agents.agent import BaseAgent
    from rllm.environments.base.base_env import BaseEnv

    assert isinstance(a.StrandsRLLMAgent(), BaseAgent)
    env = a.StrandsRLLMEnv.from_dict({"question": "q", "strands_env": {"reward": "exact_answer"}})
    assert isinstance(env, BaseEnv) and env.task["question"] == "q" and env.task["task_id"].startswith("task-")
    # agent_args are a configuration's agent section: the same schema, the same one-line errors
    with pytest.raises(ValueError, match="agent.agent_args: unknown configuration key 'agent.tool'; did you mean "
                                         "'agent.tools'"):
        a.StrandsRLLMAgent(tool=["x"])
    with pytest.raises(RuntimeError, match="apply_patches.py"):
        env.reset()  # rLLM's unpatched engine driving a Strands env says what to do


class _Waker:
    def __init__(self, addresses=(), state=None):
        self.server_addresses = list(addresses)
        self.state = state
        self.events: list[str] = []

    def wake_up(self):
        self.events.append("wake")
        if self.state is not None:
            self.state["awake"] = True

    def sleep(self):
        self.events.append("sleep")
        if self.state is not None:
            self.state["awake"] = False


def _upstream_agent_classes(mods):
    from rllm.agents.agent import BaseAgent
    from rllm.environments.base.base_env import BaseEnv

    class EchoAgent(BaseAgent):  # a non-Strands rLLM agent
        def update_from_env(self, observation, reward, done, info, **kwargs): ...

        def update_from_model(self, response, **kwargs): ...

        def reset(self): ...

        def act(self, env, mode, meta_info):
            return {"prompt_tokens": torch.tensor([1, 2]), "response_tokens": torch.tensor([env.n, 4]),
                    "response_masks": torch.tensor([1, 1]), "trajectory_reward": float(env.n), "chat_completions": [],
                    "metrics": {"steps": 1}, "mode": mode, "meta": meta_info}

    class EchoEnv(BaseEnv):
        def __init__(self, n):
            self.n = n

        def reset(self): ...

        def step(self, action): ...

        @staticmethod
        def from_dict(info):
            return EchoEnv(info["n"])

    return EchoAgent, EchoEnv


def test_other_rllm_agents_run_upstream_code_unchanged(mods):
    EchoAgent, EchoEnv = _upstream_agent_classes(mods)
    results = {}
    for name, cls in (("upstream", mods["engine_up"].AsyncAgentExecutionEngine),
                      ("patched", mods["engine"].AsyncAgentExecutionEngine)):
        waker = _Waker(["127.0.0.1:1"])
        e = cls(engine_name="verl", rollout_engine=waker, config=None)
        e.update_envs_and_agents([EchoEnv(n) for n in (5, 6, 7)], [EchoAgent() for _ in range(3)])

        async def collect():
            return [x async for x in e.trajectory_generator(timing_raw={}, mode="Token", meta_info={"k": 1})]

        out = asyncio.run(collect())
        results[name] = ([{k: (v.tolist() if torch.is_tensor(v) else v) for k, v in r.items()} for r in out],
                         waker.events)
    assert results["patched"] == results["upstream"]
    assert results["patched"][1] == ["wake", "sleep"]


# -- Strands agents through the patched engine, against a real policy server -----------------------
@pytest.fixture(scope="module")
def policy_server(smollm2_engine):
    from agentboost.sampling.completions_server import CompletionsServer

    state = {"awake": False, "requests": []}

    class RecordingServer(CompletionsServer):
        async def _completions(self, request):
            body = await request.json()
            state["requests"].append({"awake": state["awake"], "temperature": body.get("temperature"),
                                      "top_p": body.get("top_p"), "max_tokens": body.get("max_tokens"),
                                      "model": body.get("model")})
            return await super()._completions(request)

    srv = RecordingServer(smollm2_engine)
    url = srv.start_in_thread()
    yield url, state
    srv.stop_thread()


def _config(model_path, out_dir, max_prompt=2048, max_response=256):
    return OmegaConf.create({
        "actor_rollout_ref": {
            "model": {"path": str(model_path)},
            "rollout": {"temperature": 0.9, "top_p": 0.95, "top_k": -1, "response_length": 16,
                        "val_kwargs": {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "n": 1, "do_sample": False}},
        },
        "data": {"max_prompt_length": max_prompt, "max_response_length": max_response},
        "trainer": {"default_local_dir": str(out_dir)},
        "agent": {"engine_args": {}},
    })


TASKS = [
    {"task_id": "mul", "question": "What is 17 * 3? Use the calculator.", "answer": "51"},
    {"task_id": "broken", "prompt_missing": "this task has no question field", "answer": "0"},
]
# small budgets: the point is the plumbing, and CI machines are slow
AGENT_ARGS = {"tools": ["agentboost.tools.calculator:calculator"], "max_model_calls": 2,
              "max_response_tokens": 64, "timeout_s": 900.0}
ENV_ARGS = {"strands_env": {"reward": "exact_answer", "failed_reward": -1.0}}


@pytest.mark.slow
def test_strands_episodes_token_exact_weights_synced_params_from_config(mods, policy_server, smollm2_path,
                                                                         smollm2_engine, tmp_path):
    from agentboost.integrations.rllm.engine import served_model_name

    url, state = policy_server
    state["requests"].clear()
    a = mods["adapters"]
    cfg = _config(smollm2_path, tmp_path)
    waker = _Waker([url.split("://", 1)[1]], state)
    engine = mods["engine"].AsyncAgentExecutionEngine(
        engine_name="verl", tokenizer=smollm2_engine.tokenizer, rollout_engine=waker, config=cfg,
        max_prompt_length=cfg.data.max_prompt_length, max_response_length=cfg.data.max_response_length,
        agent_class=a.StrandsRLLMAgent, env_class=a.StrandsRLLMEnv,
        agentboost_workers_per_server=1, agentboost_slots=4)
    envs = [a.StrandsRLLMEnv.from_dict({**t, **ENV_ARGS}) for t in TASKS]
    engine.update_envs_and_agents(envs, [a.StrandsRLLMAgent(**AGENT_ARGS) for _ in TASKS])

    async def collect(meta):
        return [x async for x in engine.trajectory_generator(timing_raw={}, mode="Token", meta_info=meta)]

    try:
        train = asyncio.run(collect({"agent_rollout": True}))
        n_train_requests = len(state["requests"])
        val = asyncio.run(collect({"validate": True, "do_sample": False, "agent_rollout": True}))
    finally:
        engine.close_agentboost_pools()

    # wake_up/sleep bracket each rollout phase, and nothing sampled while the servers slept
    assert waker.events == ["wake", "sleep", "wake", "sleep"]
    assert state["requests"] and all(r["awake"] for r in state["requests"])
    train_req, val_req = state["requests"][:n_train_requests], state["requests"][n_train_requests:]
    assert train_req and val_req
    assert {(r["temperature"], r["top_p"]) for r in train_req} == {(0.9, 0.95)}
    assert {(r["temperature"], r["top_p"]) for r in val_req} == {(0.0, 1.0)}
    assert all(r["max_tokens"] <= 16 for r in state["requests"])
    assert {r["model"] for r in state["requests"]} == {served_model_name(str(smollm2_path))}

    pad = smollm2_engine.tokenizer.pad_token_id
    for phase in (train, val):
        assert sorted(r["idx"] for r in phase) == [0, 1]  # one result per env: none dropped
        for r in phase:
            assert fakes.TOKEN_TRAJECTORY_KEYS <= set(r)
            ep = Episode.from_dict(r["episode"])
            assert check_episode(ep) == []
            task = TASKS[r["idx"]]
            assert ep.task_id == task["task_id"]
            if task["task_id"] == "broken":  # failed: kept, with status, reason and the failed reward
                assert ep.status == "error" and "question" in ep.error
                assert r["trajectory_reward"] == -1.0 and r["row"]["status"] == "error"
                assert r["prompt_tokens"].tolist() == [pad] and r["response_tokens"].tolist() == [pad]
                continue
            assert ep.calls, ep.error
            seg = ep.segments[-1]
            row = r["prompt_tokens"].tolist() + r["response_tokens"].tolist()
            assert row == seg.input_ids  # the row is the sequence as sampled
            mask = r["response_masks"].tolist()
            sampled = [t for t, m in zip(r["response_tokens"].tolist(), mask) if m == 1]
            assert sampled == [t for i in seg.call_indices for t in ep.calls[i].response_ids]
            assert r["trajectory_reward"] == ep.reward
            assert all(len(c.response_logprobs) == len(c.response_ids) for c in ep.calls)

    # the trainer override turns the same results into rLLM's batch
    trainer = mods["trainer"].AgentPPOTrainer(config=cfg, tokenizer=smollm2_engine.tokenizer,
                                              role_worker_mapping={}, resource_pool_manager=None)
    trainer.global_steps = 3
    data, metrics = trainer._transform_agent_trajectories(sorted(train, key=lambda r: r["idx"]))
    assert fakes.TRAJECTORY_BATCH_KEYS <= set(data.batch.keys())
    assert list(data.non_tensor_batch["episode_status"]) == [Episode.from_dict(r["episode"]).status
                                                            for r in sorted(train, key=lambda r: r["idx"])]
    assert metrics["agentboost/episodes_error"] == 1
    written = list(read_episodes(tmp_path / "episodes" / "3.jsonl"))
    assert [e.episode_id for e in written] == list(data.non_tensor_batch["episode_id"])
    assert trainer.visualized  # upstream's console view still runs


# -- the trainer's transform ------------------------------------------------------------------------
class _Tok:
    pad_token_id = 0
    eos_token_id = 0  # pad == end-of-turn, as with several policies


def _traj(idx, prompt, response, mask, reward, episode=None, row=None):
    t = {"prompt_tokens": torch.tensor(prompt), "response_tokens": torch.tensor(response),
         "response_masks": torch.tensor(mask), "trajectory_reward": reward, "idx": idx,
         "chat_completions": [{"role": "user", "content": str(idx)}], "metrics": {"steps": 1, "llm_time": 0.5}}
    if episode is not None:
        t["episode"], t["row"] = episode, row
    return t


def test_transform_one_row_each_attention_from_lengths(mods, tmp_path):
    cfg = _config("unused", tmp_path, max_prompt=6, max_response=8)
    trainer = mods["trainer"].AgentPPOTrainer(config=cfg, tokenizer=_Tok(), role_worker_mapping={},
                                              resource_pool_manager=None)
    # the end-of-turn id equals the pad id (0) and appears inside the sequence
    trajs = [_traj(0, [5, 6, 7], [8, 0, 9, 0], [1, 1, 0, 1], 1.0),
             _traj(1, [5], [3], [1], 0.0)]
    data, metrics = trainer._transform_agent_trajectories(trajs)
    b = data.batch
    assert b["input_ids"].shape == (2, 14)
    assert b["attention_mask"][0].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert b["attention_mask"][1].tolist() == [0] * 5 + [1, 1] + [0] * 7
    assert b["prompts"][0].tolist() == [0, 0, 0, 5, 6, 7]
    assert b["responses"][0].tolist() == [8, 0, 9, 0, 0, 0, 0, 0]
    assert b["traj_mask"][0].tolist() == [1, 1, 0, 1, 0, 0, 0, 0]
    assert b["token_level_scores"][0].tolist() == [0, 0, 0, 1.0, 0, 0, 0, 0]  # on the last real token
    assert b["position_ids"][0].tolist()[3:10] == list(range(7))
    assert list(data.non_tensor_batch["is_pad_step"]) == [False, False]
    assert "episode_status" not in data.non_tensor_batch  # rLLM's own agents: no made-up status
    assert metrics["traj/llm_time_mean"] == 0.5
    # token != pad would have lost the end-of-turn tokens from the sequence
    naive = (b["input_ids"][0] != 0).long()
    assert naive.sum() < b["attention_mask"][0].sum()

    with pytest.raises(ValueError, match="row 0: response of 9 tokens exceeds data.max_response_length=8"):
        trainer._transform_agent_trajectories([_traj(0, [1], [1] * 9, [1] * 9, 0.0)])


def test_aborted_episodes_train_nothing_and_leave_their_groups_baseline(mods, tmp_path):
    """An episode the serving side aborted, through the engine's result and the trainer's transform:
    a row with mask 0 whose reward is its group's mean over the members with an outcome, so veRL's
    GRPO baseline (installed core_algos, Dr.GRPO form) is what it is without the row; a group with
    no outcome at all trains nothing. Counted in the metrics, never a failure."""
    import types

    import numpy as np
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    from agentboost.rewards.groups import apply_group_policy

    c = ModelCall(prompt_ids=[1, 2, 3], response_ids=[4, 5], response_logprobs=[-1, -1], finish_reason="stop")
    eps = [_episode([c], reward=1.0), _episode([c], reward=0.0), _episode([c], status="aborted", reward=None),
           _episode([c], status="aborted", reward=None)]
    for i, ep in enumerate(eps):
        ep.episode_id, ep.group_id = f"e{i}", "g" if i < 3 else "all-down"
        ep.error = "serving side unavailable: APIConnectionError" if ep.aborted else None
    apply_group_policy(eps, "keep", failed_reward=-1.0)
    engine = types.SimpleNamespace(max_prompt_length=6, max_response_length=8)
    results = [mods["engine"].StrandsRolloutMixin._ab_result(engine, ep, i, -1.0, 0) for i, ep in enumerate(eps)]
    assert [r["response_masks"].tolist() for r in results] == [[1, 1], [1, 1], [0], [0]]
    assert [r["episode"]["reward"] for r in results] == [1.0, 0.0, None, None]  # the records keep no outcome

    trainer = mods["trainer"].AgentPPOTrainer(config=_config("unused", tmp_path, 6, 8), tokenizer=_Tok(),
                                              role_worker_mapping={}, resource_pool_manager=None)
    data, metrics = trainer._transform_agent_trajectories(results)
    b = data.batch
    assert b["traj_mask"][2].sum() == 0 and b["traj_mask"][3].sum() == 0
    scores = b["token_level_scores"].sum(-1).tolist()
    assert scores == [1.0, 0.0, 0.5, -1.0]  # the group's mean; no outcome: every row masked out anyway
    assert metrics["agentboost/aborted_episodes"] == 2 and metrics["agentboost/aborted_groups"] == 1
    assert metrics["agentboost/episodes_aborted"] == 2 and metrics["agentboost/failed_fraction"] == 0.0
    assert list(data.non_tensor_batch["episode_status"]) == ["ok", "ok", "aborted", "aborted"]

    uid = np.array(["g", "g", "g", "all-down"], dtype=object)
    adv, _ = compute_grpo_outcome_advantage(b["token_level_scores"], b["traj_mask"], uid,
                                            norm_adv_by_std_in_grpo=False)
    alone, _ = compute_grpo_outcome_advantage(b["token_level_scores"][:2], b["traj_mask"][:2], uid[:2],
                                              norm_adv_by_std_in_grpo=False)
    assert torch.equal(adv[:2], alone)  # the others' baseline as if the aborted one had never run
    assert adv[2:].abs().sum() == 0  # and no gradient from an aborted row


def _episode(calls, status="ok", reward=1.0):
    ep = Episode(episode_id=f"e{len(calls)}{status}", task_id="t", group_id="t", status=status, reward=reward)
    ep.calls = calls
    ep.segments = build_segments(calls)
    ep.num_splits = max(0, len(ep.segments) - 1)
    return ep


def test_episode_rows_splits_limits_and_failures():
    c1 = ModelCall(prompt_ids=[1, 2, 3], response_ids=[4, 5], response_logprobs=[-1, -1], finish_reason="stop")
    c2 = ModelCall(prompt_ids=[1, 2, 3, 4, 5, 6, 7], response_ids=[8], response_logprobs=[-1], finish_reason="stop")
    row = episode_row(_episode([c1, c2]), 10, 10, -1.0, 0)
    assert row.prompt_ids == [1, 2, 3] and row.response_ids == [4, 5, 6, 7, 8]
    assert row.response_mask == [1, 1, 0, 0, 1] and row.calls_in_row == 2 and row.splits == 0

    rerender = ModelCall(prompt_ids=[1, 9, 9, 6, 7], response_ids=[8], response_logprobs=[-1], finish_reason="stop",
                         rerendered=True)
    ep = _episode([c1, rerender])
    row = episode_row(ep, 10, 10, -1.0, 0)
    assert row.splits == 1 and row.calls_in_row == 1 and row.calls_total == 2  # counted, not hidden
    assert row.prompt_ids == [1, 9, 9, 6, 7] and row.response_ids == [8]

    ep = _episode([c1, c2])
    row = episode_row(ep, 10, 3, -1.0, 0)  # the sequence outgrows data.max_response_length
    assert row.cut and row.response_ids == [4, 5, 6] and row.status == "truncated" and row.reward == -1.0
    assert ep.status == "truncated" and "max_response_length" in ep.error

    ep = _episode([c1], reward=1.0)
    row = episode_row(ep, 2, 10, -1.0, 0)  # the first prompt does not fit data.max_prompt_length
    assert (row.prompt_ids, row.response_ids, row.response_mask) == ([0], [0], [1])
    assert row.status == "truncated" and row.reward == -1.0

    ep = _episode([], status="timeout", reward=-1.0)
    row = episode_row(ep, 10, 10, -1.0, 0)
    assert (row.response_ids, row.status, row.reward) == ([0], "timeout", -1.0)

    with pytest.raises(ValueError, match="has no reward"):
        episode_row(_episode([c1], reward=None), 10, 10, -1.0, 0)
    aborted = episode_row(_episode([c1], status="aborted", reward=None), 10, 10, -1.0, 0)
    assert (aborted.response_ids, aborted.response_mask, aborted.aborted) == ([0], [0], True)


def test_batch_tensors_rejects_bad_rows():
    with pytest.raises(ValueError, match="row 0: response .2. and its mask .1. differ"):
        batch_tensors([[1]], [[1, 2]], [[1]], [0.0], 4, 4, 0)
    with pytest.raises(ValueError, match="row 0: prompt of 5 tokens exceeds data.max_prompt_length=4"):
        batch_tensors([[1] * 5], [[1]], [[1]], [0.0], 4, 4, 0)


# -- the veRL fork's server ---------------------------------------------------------------------------
SERVER_CHECK = """
import asyncio, inspect, json, sys
from types import SimpleNamespace
sys.path[:0] = [{site!r}, {repo!r}, {tests!r}]
import rllm_fakes as fakes
from verl.workers.rollout.vllm_rollout import vllm_async_server as ov
from verl.workers.rollout.vllm_rollout import vllm_async_server_upstream as up
from agentboost.sampling.http_sampler import parse_completion, _prompt_too_long

assert ov.__file__.startswith({site!r}), ov.__file__  # the stand-in package, not an installed veRL
up_cls, ov_cls = up.AsyncvLLMServer.__ray_actor_class__, ov.AsyncvLLMServer.__ray_actor_class__
import ray.actor
assert issubclass(ov_cls, up_cls) and isinstance(ov.AsyncvLLMServer, ray.actor.ActorClass)
def names(fn):  # Ray adds a keyword-only _ray_trace_ctx to actor methods
    return [p for p in inspect.signature(fn).parameters if p != "_ray_trace_ctx"]
assert names(ov_cls.__init__) == fakes.SERVER_INIT_PARAMS
assert names(ov_cls.completions) == fakes.SERVER_COMPLETIONS_PARAMS

seen = []
class Serving:
    async def create_completion(self, request, raw_request):
        seen.append(request.fields)
        return up.CompletionResponse({{"choices": [{{"index": 0, "text": "", "finish_reason": "stop",
            "logprobs": {{"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-0.25, -0.5]}}}}]}})
class Req:
    def __init__(self, body): self.body = body
    async def json(self): return self.body

def make(cls):
    s = cls.__new__(cls)  # constructing it needs a Ray cluster and vLLM
    s.engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=16))
    s.openai_serving_completion = Serving()
    return s

def call(cls, body):
    r = asyncio.run(make(cls).completions(Req(body)))
    return r.status_code, json.loads(r.body)

body = {{"prompt": [1, 2, 3], "max_tokens": 4, "logprobs": 0, "return_tokens_as_token_ids": True}}
code, data = call(up_cls, body)
assert code == 200 and data["choices"][0]["logprobs"]["token_logprobs"] == []  # the fork's defect
code, data = call(ov_cls, body)
res = parse_completion(data)
assert code == 200 and res.response_ids == [5, 6] and res.logprobs == [-0.25, -0.5]

n = len(seen)
code, data = call(ov_cls, {{"prompt": list(range(16)), "max_tokens": 4}})
assert code == 400 and data["type"] == "PromptTooLongError" and data["prompt_tokens"] == 16, data
assert len(seen) == n and _prompt_too_long(data)  # never sampled from a substitute prompt

code, data = call(ov_cls, {{"prompt": list(range(10)), "max_tokens": 10}})
assert code == 200 and seen[-1]["max_tokens"] == 6 and seen[-1]["prompt"] == list(range(10))
print("SERVER OK")
"""


def test_verl_fork_server_override(tmp_path):
    pytest.importorskip("ray")
    pytest.importorskip("starlette")
    site = tmp_path / "site"
    fakes.install(site, fakes.FAKE_VERL_SERVER, REPO)
    script = tmp_path / "check_server.py"
    script.write_text(SERVER_CHECK.format(site=str(site), repo=str(REPO), tests=str(Path(fakes.__file__).parent)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0 and "SERVER OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


def test_prompt_too_long_ends_the_episode_truncated(smollm2_path):
    """The server override's answer reaches the episode as status ``truncated``."""
    from aiohttp import web
    from transformers import AutoTokenizer

    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.integrations.rllm.fork_server import check_completion_request
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.http_sampler import HttpSampler
    from agentboost.sampling.protocol import SamplingParams

    async def main():
        async def completions(request):
            _, error = check_completion_request(await request.json(), max_model_len=8)
            return web.json_response(error, status=400)

        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        async with serve_app(app) as url:
            sampler = HttpSampler(url, model="m")
            try:
                tok = AutoTokenizer.from_pretrained(str(smollm2_path))
                return await run_episode(StrandsAgentSpec(), {"task_id": "t", "question": "What is 2 + 2?"}, sampler,
                                         ChatRenderer(tok), SamplingParams(max_new_tokens=8))
            finally:
                await sampler.close()

    ep = asyncio.run(main())
    assert ep.status == "truncated" and "context" in ep.error and not ep.calls
