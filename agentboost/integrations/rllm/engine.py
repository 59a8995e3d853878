"""What agentboost changes in rLLM's ``AgentExecutionEngine`` (rLLM 1fc3c4b), as a mixin.

``modified_rllm_files/agent_execution_engine.py`` puts this mixin in front of rLLM's own engine
classes (kept by ``apply_patches.py`` as ``agent_execution_engine_upstream.py``). Only
``trajectory_generator`` changes, and only for agentboost's Strands agents
(``StrandsRLLMAgent``/``StrandsRLLMEnv``); every other rLLM agent runs rLLM's code unchanged.

For Strands agents, each (agent, env) pair of the batch is one agentboost episode, run by a pool of
persistent worker processes whose trainable model samples token ids from the veRL fork's async vLLM
servers (``/v1/completions``, prompt as token ids). So:

- the training row is the episode's token sequence as sampled (no decode / re-render / re-encode);
- ``rollout_engine.wake_up()`` / ``sleep()`` bracket every rollout phase, training and validation
  (in the fork's async hybrid engine, wake-up is what pushes the FSDP weights into vLLM);
- sampling parameters come from the rLLM config: ``actor_rollout_ref.rollout.{temperature,top_p}``
  for training, ``...rollout.val_kwargs.{temperature,top_p}`` for validation (as rLLM's router
  does), ``rollout.response_length`` per call; the agent cannot change them;
- a failed episode (timeout, crash, error, truncation) comes back as a row with its status and
  the failed reward; nothing is dropped from its GRPO group. An aborted one (the serving side was
  down) comes back as a row with mask 0 and no outcome (``rllm.trainer`` neutralises its reward).

Engine options (``agent.engine_args`` in rLLM's config): ``agentboost_workers_per_server``
(worker processes per vLLM server, default 2), ``agentboost_slots`` (episodes per worker at once,
default 16), ``agentboost_template_kwargs`` (chat-template options, e.g. ``enable_thinking``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from ...agents.strands_agent import StrandsAgentSpec
from ...environments.strands_env import StrandsEnv
from ...episodes.record import Episode
from ...rewards.groups import GroupPolicy, apply_group_policy
from ...rollout.pool import StrandsProcessPool
from ...sampling.protocol import SamplingParams
from ...sampling.spec import SamplerSpec
from .episode_rows import episode_row


def sampling_from_config(config: Any, validate: bool) -> SamplingParams:
    """rLLM's router semantics: training uses the rollout's parameters, validation its val_kwargs."""
    rollout = config.actor_rollout_ref.rollout
    src = rollout.val_kwargs if validate else rollout
    where = "actor_rollout_ref.rollout" + (".val_kwargs" if validate else "")
    top_k = src.get("top_k", -1)
    if top_k not in (-1, 0, None):
        raise ValueError(f"{where}.top_k={top_k}: agentboost's sampler supports top_k=-1 (off) only")
    return SamplingParams(temperature=float(src.get("temperature", 1.0)), top_p=float(src.get("top_p", 1.0)),
                          max_new_tokens=int(rollout.response_length))


def served_model_name(model_path: str) -> str:
    # the name the fork's servers register the policy under (and rLLM's router sends)
    return "/".join(str(model_path).rstrip("/").split("/")[-2:])


class _NoChatParser:
    """Strands agents render their prompts with the policy's own chat template, token-exact; rLLM's
    chat parser is never used for them, and its factory refuses the templates it does not know
    (SmolLM2's, among others), so an engine for Strands agents gets this instead of one."""

    def __getattr__(self, name: str):
        raise RuntimeError(f"rLLM's chat parser ({name}) is not available to agentboost's Strands agents' engine")


class StrandsRolloutMixin:
    def __init__(self, *args: Any, agentboost_workers_per_server: int = 2, agentboost_slots: int = 16,
                 agentboost_template_kwargs: dict[str, Any] | None = None, **kwargs: Any):
        if getattr(kwargs.get("agent_class"), "is_agentboost_strands", False) and kwargs.get("chat_parser") is None:
            kwargs["chat_parser"] = _NoChatParser()
        super().__init__(*args, **kwargs)
        if agentboost_workers_per_server < 1 or agentboost_slots < 1:
            raise ValueError("agent.engine_args.agentboost_workers_per_server and agentboost_slots must be >= 1")
        self._ab_workers = int(agentboost_workers_per_server)
        self._ab_slots = int(agentboost_slots)
        self._ab_template_kwargs = dict(agentboost_template_kwargs or {})
        self._ab_pools: dict[tuple[str, bool], tuple[tuple, StrandsProcessPool]] = {}

    # -- which path --------------------------------------------------------------------------
    def _ab_is_strands(self) -> bool:
        flags = [bool(getattr(a, "is_agentboost_strands", False)) for a in (self.agents or [])]
        if any(flags) and not all(flags):
            raise TypeError("the batch mixes agentboost's Strands agents with other rLLM agents; "
                            "use one agent class per trainer")
        return bool(flags) and all(flags)

    async def trajectory_generator(self, reset_seed=0, timing_raw=None, mode="Text", **kwargs):
        if not self._ab_is_strands():
            async for item in super().trajectory_generator(reset_seed=reset_seed, timing_raw=timing_raw,
                                                           mode=mode, **kwargs):
                yield item
            return
        async for item in self._ab_generate(mode, kwargs.get("meta_info") or {}):
            yield item

    # -- the Strands path ----------------------------------------------------------------------
    def _ab_spec_and_env(self) -> tuple[StrandsAgentSpec, StrandsEnv]:
        specs = {repr(a.spec) for a in self.agents}
        envs = {repr(e.strands_env) for e in self.envs}
        if len(specs) != 1 or len(envs) != 1:
            raise ValueError("every agent (and env) of a batch must share one configuration; "
                             f"got {len(specs)} agent and {len(envs)} environment configurations")
        spec, env = self.agents[0].spec, self.envs[0].strands_env
        # one row per episode, as rLLM's trainer needs: never split on a template re-render
        limits: dict[str, Any] = {"max_response_tokens": min(spec.max_response_tokens, int(self.max_response_length)),
                                  "always_extend": True}
        if self.trajectory_timeout and self.trajectory_timeout < 1e9:  # rLLM's "no limit" is 1e9
            limits["timeout_s"] = float(self.trajectory_timeout)
        return dataclasses.replace(spec, **limits), env

    def _ab_server_urls(self) -> list[str]:
        if self.engine_name != "verl":
            raise ValueError(f"agentboost's Strands agents run on rLLM's 'verl' engine (the trainer's); "
                             f"got engine_name={self.engine_name!r}")
        addresses = list(getattr(self, "server_addresses", None) or [])
        if not addresses:
            raise ValueError("the rollout engine exposes no server_addresses: set "
                             "actor_rollout_ref.rollout.mode=async (the fork's async vLLM servers)")
        return [a if "://" in a else f"http://{a}" for a in addresses]

    def _ab_pools_for(self, validate: bool, spec: StrandsAgentSpec, env: StrandsEnv,
                      params: SamplingParams) -> list[StrandsProcessPool]:
        model_path = str(self.config.actor_rollout_ref.model.path)
        pools = []
        for url in self._ab_server_urls():
            sampler = SamplerSpec(tokenizer=model_path, sampling=params, kind="http", url=url,
                                  model=served_model_name(model_path), template_kwargs=self._ab_template_kwargs)
            key = (url, validate)
            fingerprint = (repr(spec), repr(env), repr(sampler))
            held = self._ab_pools.get(key)
            if held is not None and held[0] != fingerprint:
                held[1].close()
                held = None
            if held is None:
                held = (fingerprint, StrandsProcessPool(spec, sampler, env=env, workers=self._ab_workers,
                                                        slots=self._ab_slots))
                self._ab_pools[key] = held
            pools.append(held[1])
        return pools

    def close_agentboost_pools(self) -> None:
        for _, pool in self._ab_pools.values():
            pool.close()
        self._ab_pools.clear()

    async def _ab_generate(self, mode: str, meta_info: dict[str, Any]):
        if mode != "Token":
            raise ValueError(f"agentboost's Strands agents produce token rows (mode 'Token'), not {mode!r}: "
                             "set agent.use_stepwise_advantage=False")
        validate = bool(meta_info.get("validate", False))
        params = sampling_from_config(self.config, validate)
        spec, env = self._ab_spec_and_env()
        pools = self._ab_pools_for(validate, spec, env, params)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id

        async def one(i: int) -> dict[str, Any]:
            rllm_env = self.envs[i]
            ep = await pools[i % len(pools)].submit_async(rllm_env.task, group_id=str(rllm_env.task["task_id"]))
            ep.metadata["rllm_phase"] = "validation" if validate else "train"
            # rLLM needs one row per trajectory, so the group policy is always "keep": a failed
            # episode stays in its group with the failed reward (given in the one place that does)
            apply_group_policy([ep], GroupPolicy.KEEP, failed_reward=env.failed_reward)
            return self._ab_result(ep, rllm_env.idx, env.failed_reward, pad)

        # wake_up() pushes the current weights into vLLM; nothing may sample before it, and the
        # servers must sleep again (free their memory for the update) whatever happens here.
        waker = self.rollout_engine
        waker.wake_up()
        tasks: list[asyncio.Task] = []
        try:
            tasks = [asyncio.ensure_future(one(i)) for i in range(len(self.envs))]
            for fut in asyncio.as_completed(tasks):
                yield await fut
        finally:
            for t in tasks:
                t.cancel()
            waker.sleep()

    def _ab_result(self, ep: Episode, idx: int, failed_reward: float, pad_token_id: int) -> dict[str, Any]:
        import torch

        row = episode_row(ep, int(self.max_prompt_length), int(self.max_response_length), failed_reward, pad_token_id)
        wall = ep.timings.get("wall_s", 0.0)
        model_s = ep.timings.get("model_s", 0.0)
        return {
            # the keys rLLM's trainer reads from a "Token" trajectory
            "prompt_tokens": torch.tensor(row.prompt_ids, dtype=torch.long),
            "response_tokens": torch.tensor(row.response_ids, dtype=torch.long),
            "response_masks": torch.tensor(row.response_mask, dtype=torch.long),
            "trajectory_reward": row.reward,
            "idx": idx,
            "chat_completions": ep.messages,
            "metrics": {"steps": len(ep.calls), "reward_time": ep.timings.get("reward_s"),
                        "env_time": max(0.0, wall - model_s), "llm_time": model_s, "total_time": wall},
            # agentboost's: the episode record (status, error, calls, segments) and its row facts
            "episode": ep.to_dict(),
            "row": {"status": row.status, "error": row.error or "", "splits": row.splits,
                    "calls_in_row": row.calls_in_row, "calls_total": row.calls_total, "cut": row.cut,
                    "aborted": row.aborted},
        }
