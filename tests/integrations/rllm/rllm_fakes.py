"""Minimal stand-ins for rLLM@1fc3c4b and the veRL fork's server module, written by the tests.

rLLM is not on PyPI and its dependency set needs a GPU stack, so CI cannot install it. These
modules honour the upstream interfaces as read from the upstream source (constructor arguments,
method names and signatures, trajectory and batch fields; the facts are listed below and checked
against the real classes by test_rllm_integration.py, beside this file, where rLLM is installed).
They hold no upstream code. They are written into a temporary "site-packages" and agentboost's
overrides are installed over them by the real patcher, so that each override's ``import
..._upstream`` resolves as it does in a real installation.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from agentboost.integrations.rllm import patcher as rp

# -- interface facts read from the upstream source --------------------------------------------------
# rllm/engine/agent_execution_engine.py @1fc3c4b: AgentExecutionEngine.__init__
ENGINE_INIT_PARAMS = [
    "self", "engine_name", "tokenizer", "rollout_engine", "chat_parser", "n_parallel_agents",
    "trajectory_timeout", "gamma", "api_retries", "retry_limit", "max_steps", "max_response_length",
    "max_prompt_length", "config", "agent_class", "env_class", "agent_args", "rollout_engine_args",
    "env_args", "max_workers", "enforce_max_prompt_length", "overlong_filter", "kwargs",
]
TRAJECTORY_GENERATOR_PARAMS = ["self", "reset_seed", "timing_raw", "mode", "kwargs"]
UPDATE_ENVS_AND_AGENTS_PARAMS = ["self", "envs", "agents"]
# what run_agent_trajectory_async returns in mode "Token" (and AgentPPOTrainer reads)
TOKEN_TRAJECTORY_KEYS = {"prompt_tokens", "response_tokens", "response_masks", "trajectory_reward", "idx",
                         "chat_completions", "metrics"}
# rllm/trainer/verl/agent_ppo_trainer.py @1fc3c4b
TRAINER_INIT_PARAMS = ["self", "config", "tokenizer", "role_worker_mapping", "resource_pool_manager",
                       "ray_worker_group_cls", "reward_fn", "val_reward_fn", "env_class", "agent_class",
                       "env_args", "agent_args"]
TRANSFORM_PARAMS = ["self", "trajectories"]
VISUALIZE_PARAMS = ["self", "tensor_batch", "sample_idx", "max_samples", "mask_key"]
TRAJECTORY_BATCH_KEYS = {"input_ids", "attention_mask", "position_ids", "responses", "prompts",
                         "token_level_scores", "traj_mask"}
# rllm/agents/agent.py and rllm/environments/base/base_env.py @1fc3c4b
BASE_AGENT_ABSTRACT = {"update_from_env", "update_from_model", "reset"}
BASE_ENV_ABSTRACT = {"reset", "step", "from_dict"}
# verl/workers/rollout/vllm_rollout/vllm_async_server.py @777704a: AsyncvLLMServer (a Ray actor)
SERVER_INIT_PARAMS = ["self", "config", "vllm_dp_size", "vllm_dp_rank", "wg_prefix"]
SERVER_COMPLETIONS_PARAMS = ["self", "raw_request"]


FAKE_RLLM = {
    "rllm/__init__.py": "",
    "rllm/agents/__init__.py": "",
    "rllm/agents/agent.py": '''
        from abc import ABC, abstractmethod
        from dataclasses import dataclass, field
        from typing import Any


        @dataclass
        class Step:
            chat_completions: list = field(default_factory=list)
            reward: float = 0.0
            done: bool = False


        @dataclass
        class Action:
            action: Any = None


        @dataclass
        class Trajectory:
            task: Any = None
            steps: list = field(default_factory=list)
            reward: float = 0.0


        class BaseAgent(ABC):
            @property
            def chat_completions(self):
                return []

            @property
            def trajectory(self):
                return Trajectory()

            @abstractmethod
            def update_from_env(self, observation, reward, done, info, **kwargs): ...

            @abstractmethod
            def update_from_model(self, response, **kwargs): ...

            @abstractmethod
            def reset(self): ...
    ''',
    "rllm/environments/__init__.py": "",
    "rllm/environments/base/__init__.py": "",
    "rllm/environments/base/base_env.py": '''
        from abc import ABC, abstractmethod


        class BaseEnv(ABC):
            @property
            def idx(self):
                return getattr(self, "_idx", None)

            @idx.setter
            def idx(self, value):
                self._idx = value

            @abstractmethod
            def reset(self): ...

            @abstractmethod
            def step(self, action): ...

            def close(self):
                return

            @staticmethod
            @abstractmethod
            def from_dict(info): ...

            @staticmethod
            def is_multithread_safe():
                return True
    ''',
    "rllm/engine/__init__.py": "",
    # The stand-in engine runs a deterministic "agent" (it answers each env with a fixed token
    # trajectory) and, like rLLM, calls wake_up/sleep only when engine_name == "verl".
    "rllm/engine/agent_execution_engine.py": '''
        import torch


        class AgentExecutionEngine:
            def __init__(self, engine_name="openai", tokenizer=None, rollout_engine=None, chat_parser=None,
                         n_parallel_agents=1, trajectory_timeout=None, gamma=0.2, api_retries=3, retry_limit=3,
                         max_steps=5, max_response_length=8192, max_prompt_length=1024, config=None,
                         agent_class=None, env_class=None, agent_args=None, rollout_engine_args=None,
                         env_args=None, max_workers=64, enforce_max_prompt_length=False, overlong_filter=False,
                         **kwargs):
                self.config = config
                self.rollout_engine = rollout_engine
                self.tokenizer = tokenizer
                self.engine_name = engine_name
                self.n_parallel_agents = n_parallel_agents
                self.max_response_length = max_response_length
                self.max_prompt_length = max_prompt_length
                self.agent_class, self.env_class = agent_class, env_class
                self.agents = [None for _ in range(n_parallel_agents)]
                self.envs = [None for _ in range(n_parallel_agents)]
                self.trajectory_timeout = trajectory_timeout or int(1e9)
                self.sampling_params = kwargs.get("sampling_params", {})
                self.unknown_kwargs = kwargs
                if engine_name == "verl":
                    self.server_addresses = getattr(self.rollout_engine, "server_addresses", [])

            def update_envs_and_agents(self, envs, agents):
                self.envs = envs
                for idx, env in enumerate(envs):
                    env.idx = idx
                self.agents = agents
                self.n_parallel_agents = len(envs)

            async def trajectory_generator(self, reset_seed=0, timing_raw=None, mode="Text", **kwargs):
                if self.engine_name == "verl":
                    self.rollout_engine.wake_up()
                for i, (agent, env) in enumerate(zip(self.agents, self.envs)):
                    out = agent.act(env, mode=mode, meta_info=kwargs.get("meta_info"))
                    out["idx"] = env.idx
                    yield out
                if self.engine_name == "verl":
                    self.rollout_engine.sleep()


        class AsyncAgentExecutionEngine(AgentExecutionEngine):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
    ''',
    "rllm/trainer/__init__.py": "",
    "rllm/trainer/verl/__init__.py": "",
    "rllm/trainer/verl/agent_ppo_trainer.py": '''
        from rllm.engine.agent_execution_engine import AsyncAgentExecutionEngine


        class AgentPPOTrainer:
            def __init__(self, config, tokenizer, role_worker_mapping, resource_pool_manager,
                         ray_worker_group_cls=None, reward_fn=None, val_reward_fn=None, env_class=None,
                         agent_class=None, env_args=None, agent_args=None):
                self.config = config
                self.tokenizer = tokenizer
                self.global_steps = 0
                self.visualized = []
                self.engine_class = AsyncAgentExecutionEngine

            def _transform_agent_trajectories(self, trajectories):
                raise AssertionError("the stand-in upstream transform must not run once patched")

            def visualize_trajectory(self, tensor_batch, sample_idx=0, max_samples=1, mask_key="traj_mask"):
                self.visualized.append(tensor_batch)
    ''',
}

# The fork's server module: a Ray actor class behind a FastAPI app, whose completions route empties
# the log-probabilities. vLLM cannot run here, so its request/response types are stand-ins with the
# fields the route uses; Ray and Starlette are the real packages.
FAKE_VERL_SERVER = {
    "verl/__init__.py": "",
    "verl/workers/__init__.py": "",
    "verl/workers/rollout/__init__.py": "",
    "verl/workers/rollout/vllm_rollout/__init__.py": "",
    "verl/workers/rollout/vllm_rollout/vllm_async_server.py": '''
        import ray
        from starlette.responses import JSONResponse, StreamingResponse


        class CompletionRequest:
            def __init__(self, **fields):
                self.fields = fields
                self.stream = bool(fields.get("stream", False))


        class CompletionResponse:
            def __init__(self, data):
                self.data = data

            def model_dump(self):
                return self.data


        class ErrorResponse:
            def __init__(self, message, code=400):
                self.message, self.code = message, code

            def model_dump(self):
                return {"object": "error", "message": self.message, "code": self.code}


        @ray.remote(num_cpus=1)
        class AsyncvLLMServer:
            def __init__(self, config, vllm_dp_size, vllm_dp_rank, wg_prefix):
                self.config = config
                self.engine = None

            async def completions(self, raw_request):
                request_json = await raw_request.json()
                request = CompletionRequest(**request_json)
                generator = await self.openai_serving_completion.create_completion(request, raw_request)
                if isinstance(generator, ErrorResponse):
                    return JSONResponse(content=generator.model_dump(), status_code=generator.code)
                data = generator.model_dump()
                data["choices"][0]["logprobs"]["token_logprobs"] = []  # what the fork does
                return JSONResponse(content=data)

            async def wake_up(self):
                pass

            async def sleep(self):
                pass
    ''',
}


def write_tree(root: Path, files: dict[str, str]) -> dict[str, bytes]:
    written = {}
    for rel, src in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data = textwrap.dedent(src).lstrip("\n").encode()
        p.write_bytes(data)
        written[rel] = data
    return written


def install(site: Path, files: dict[str, str], repo: Path, targets=rp.TARGETS) -> None:
    """Write the stand-ins and install agentboost's overrides over them with the real patcher."""
    written = write_tree(site, files)
    known = {t.relpath: {rp.sha256_bytes(written[t.relpath]): "test stand-in"} for t in targets
             if t.relpath in written}
    chosen = tuple(t for t in targets if t.relpath in written)
    roots = rp.Roots(rllm=site, verl=site)
    patcher = rp.Patcher(roots, source_root=repo, known=known, targets=chosen, out=lambda s: None)
    assert patcher.apply() == 0
    for t in chosen:
        assert patcher.status_of(t).state == rp.PATCHED
