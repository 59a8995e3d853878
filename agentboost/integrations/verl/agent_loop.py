"""Strands agents as a veRL agent loop (``verl.trainer.main_ppo``, stock, no patching).

veRL builds one loop instance per sample from an entry of the YAML list named by
``actor_rollout_ref.rollout.agent.agent_loop_config_path``; the entry's keys besides ``name`` and
``_target_`` reach ``__init__``. This loop's keys:

    - name: strands_agent                       # the dataset's agent_name column selects it
      _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
      agent: {tools: [...], system_prompt: ..., max_model_calls: 6, max_response_tokens: 1024,
              timeout_s: 300, factory: null, tool_parser: hermes, reasoning: auto, agent_type: calculator}
      env: {reward: exact_answer, prompt_field: question, prompt_template: null,
            failed_reward: 0.0, shaping: null}
      max_new_tokens: null        # per model turn; default: rollout.response_length
      stop_token_ids: []          # besides the end-of-turn and end-of-text tokens
      template_kwargs: {}         # besides data.apply_chat_template_kwargs (e.g. enable_thinking)
      score_timeout_s: 120        # the reward's own limit, after the episode's timeout_s
      episodes_dir: null          # a directory: every episode appended there as a token-exact record
                                  # (episodes-<host>-<pid>.jsonl per worker; `agentboost check` reads it)

(``tools`` is nested under ``agent`` because veRL passes its own ``tools=`` to every loop.)

The module registers nothing when imported. veRL's ``@register`` decorator writes
``{"_target_": ...}`` under its name when the module is first imported, which happens while the
worker instantiates the first loop, *after* the worker loaded the YAML list: a decorator under the
YAML entry's name would replace that entry, and every later instance would lose its YAML keys.
The YAML list is therefore the one registration.

One episode -> one ``AgentLoopOutput``, honestly:
- the trainable model runs in always-extend mode (the conversation stays one token sequence even
  where the template would re-render; each such place is counted) with the sequence budget
  ``(rollout.prompt_length, rollout.response_length)``, so an episode that would not fit veRL's
  padded row ends ``truncated`` instead of being cut;
- tokens under ``response_mask`` 1 are the sampled ones, with their log-probs (given to veRL as
  ``rollout_log_probs`` when ``rollout.calculate_log_probs`` is set);
- ``reward_score`` is the agentboost reward (veRL puts it on the last token of ``rm_scores``);
- a failed episode (timeout, crash, error) still yields a row, one pad token with mask 1 and the
  failed reward, because veRL rejects all-zero masks and a GRPO group must stay whole;
- an episode the serving side aborted (an outage of a model it calls: a tau2 user, a judge; status
  ``aborted``) is no answer of the policy's, never a wrong one: its row is one pad token with
  mask 0, so no token of it is trained (veRL 0.9.1's ``agg_loss`` leaves fully masked rows out in
  every loss mode; the row's advantage is multiplied by its mask), its episode record keeps no
  reward, and ``reward_extra_info.aborted`` counts it (veRL's per-data-source metrics). What veRL's
  interface does not allow: leaving the row out of its group. Every row must carry a score, veRL's
  GRPO takes each ``uid`` group's mean and standard deviation over all its rows, and a loop sees
  neither its siblings nor may change its ``uid``; the row's score is the failed reward, which the
  other members' baseline still includes (the local trainer and the rLLM path, which see whole
  groups, leave it out);
- status, error, tool statistics and always-extend counts go to ``extra_fields``.
Nothing raises into veRL: an exception in a worker's agent loop fails the whole group there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from functools import lru_cache
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
)

from ...agents.chat_rendering import ChatRenderer
from ...agents.config import spec_from_keys
from ...agents.http_agent import HttpAgentSpec
from ...agents.strands_agent import StrandsAgentSpec
from ...environments.strands_env import StrandsEnv
from ...episodes.record import Episode, EpisodeWriter, Status
from ...errors import InputError
from ...rewards.groups import GroupPolicy, apply_group_policy
from ...rewards.registry import default_reward
from ...rewards.shaping import ShapingConfig
from ...rollout.episode_runner import run_episode
from ...sampling.protocol import SamplingParams
from ..episode_rows import episode_row
from .sampler import VerlServerSampler

TASK_KEY = "agentboost_task"  # extra_info field holding the agentboost task as JSON


class AgentLoopConfigError(InputError):
    pass


class RowTaskError(InputError):
    pass


@lru_cache(maxsize=64)
def _configured(agent_json: str, env_json: str) -> tuple[StrandsAgentSpec | HttpAgentSpec, StrandsEnv]:
    """The agent specification and environment of a YAML entry, validated once per worker."""
    agent, env = json.loads(agent_json), json.loads(env_json)
    try:
        # the configuration's agent schema and defaults: agent.kind strands (built here) or http (its own process)
        spec = spec_from_keys(agent, "agent loop YAML").validate()
        shaping = env.pop("shaping", None)
        environment = StrandsEnv(**env, shaping=ShapingConfig(**shaping) if shaping else None)
    except TypeError as e:
        raise AgentLoopConfigError(f"agent loop YAML: {e} (agent keys: {sorted(agent)}, env keys: {sorted(env)})") from None
    if environment.reward is None:
        environment.reward = default_reward(spec.agent_type)
    if environment.reward is None:
        raise AgentLoopConfigError(f"agent loop YAML: env.reward is not set and agent type {spec.agent_type!r} "
                                   "has no default reward")
    from ...run.assembly import check_sandbox

    # a code reward or tool refuses to run unisolated here too (AGENTBOOST_SANDBOX_ALLOW_WEAK=1 in
    # the workers' environment accepts it)
    check_sandbox(environment.reward, list(spec.tools), None)
    return spec, environment.validate()


_RENDERERS: dict[tuple[int, str], ChatRenderer] = {}


def _renderer(tokenizer, template_kwargs: dict[str, Any]) -> ChatRenderer:
    key = (id(tokenizer), json.dumps(template_kwargs, sort_keys=True))
    if key not in _RENDERERS:
        _RENDERERS[key] = ChatRenderer(tokenizer, template_kwargs=template_kwargs)
    return _RENDERERS[key]


def _plain(value: Any) -> Any:
    """OmegaConf containers (what Hydra hands over) -> plain Python."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with veRL
        pass
    return value


def task_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """The agentboost task of a veRL dataset row: ``extra_info.agentboost_task`` (JSON, as
    ``agentboost data verl`` writes it), else ``extra_info`` itself when it has a question, else
    the last user message of ``raw_prompt``."""
    extra = _plain(row.get("extra_info")) or {}
    if isinstance(extra, dict) and extra.get(TASK_KEY):
        raw = extra[TASK_KEY]
        try:
            task = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError) as e:
            raise RowTaskError(f"row extra_info.{TASK_KEY}: not a JSON object ({e})") from None
    elif isinstance(extra, dict) and isinstance(extra.get("question"), str):
        task = dict(extra)
    else:
        prompt = _plain(row.get("raw_prompt"))
        users = [m for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1].get("content"), str):
            raise RowTaskError("row has neither extra_info.agentboost_task, extra_info.question nor a user "
                               "message in its prompt")
        task = {"question": users[-1]["content"]}
    if not isinstance(task, dict):
        raise RowTaskError(f"row extra_info.{TASK_KEY}: expected an object, got {type(task).__name__}")
    task.setdefault("task_id", str(extra.get("task_id", extra.get("index", row.get("index", "row")))))
    task["task_id"] = str(task["task_id"])
    return task


_WRITERS: dict[str, EpisodeWriter] = {}


def _episode_writer(directory: str) -> EpisodeWriter:
    """One append-only file per worker process (loops are built per sample; the file is shared)."""
    import os
    import socket

    path = os.path.join(str(directory), f"episodes-{socket.gethostname()}-{os.getpid()}.jsonl")
    if path not in _WRITERS:
        _WRITERS[path] = EpisodeWriter(path)
    return _WRITERS[path]


class StrandsAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config,
                 agent: dict | None = None, env: dict | None = None, max_new_tokens: int | None = None,
                 stop_token_ids: list[int] | None = None, template_kwargs: dict | None = None,
                 score_timeout_s: float = 120.0, name: str | None = None, episodes_dir: str | None = None,
                 **kwargs: Any):
        kwargs.pop("tools", None)  # veRL's own tool list; this loop's tools are under ``agent``
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config, **kwargs)
        self.name = name
        self.agent_config = _plain(agent) or {}
        self.env_config = _plain(env) or {}
        self.spec, self.env = _configured(json.dumps(self.agent_config, sort_keys=True),
                                          json.dumps(self.env_config, sort_keys=True))
        kw = {**(_plain(self.apply_chat_template_kwargs) or {}), **(_plain(template_kwargs) or {})}
        self.renderer = _renderer(tokenizer, kw)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.max_new_tokens = int(max_new_tokens or self.response_length)
        stops = {self.renderer.turn_end_id, *(int(t) for t in (_plain(stop_token_ids) or []))}
        if tokenizer.eos_token_id is not None:
            stops.add(int(tokenizer.eos_token_id))
        self.stop_token_ids = tuple(sorted(stops))
        self.score_timeout_s = float(score_timeout_s)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.episodes = _episode_writer(episodes_dir) if episodes_dir else None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        t0 = time.perf_counter()
        want_logprobs = bool(sampling_params.get("logprobs"))
        try:
            task = task_from_row(kwargs)
        except RowTaskError as e:
            ep = Episode(episode_id=uuid.uuid4().hex, task_id=str(kwargs.get("index", "?")),
                         group_id=str(kwargs.get("uid", "?")), status=Status.ERROR, error=str(e))
            return self._output(ep, want_logprobs, t0)
        ep = await self.run_episode(task, sampling_params, group_id=str(kwargs.get("uid", task["task_id"])))
        out = self._output(ep, want_logprobs, t0)
        if self.episodes is not None:
            self.episodes.write(ep)  # after _output: a failed episode is kept with its reason
        return out

    async def run_episode(self, task: dict[str, Any], sampling_params: dict[str, Any], group_id: str) -> Episode:
        """One scored episode (never raises): run with the rollout's parameters, scored off the
        event loop, failed reward applied where the group policy applies it."""
        episode_id = uuid.uuid4().hex  # also the request id: every turn goes to the same server
        sampler = VerlServerSampler(self.server_manager, episode_id, sampling_params, self.stop_token_ids)
        sampling = SamplingParams(temperature=float(sampling_params.get("temperature", 1.0)),
                                  top_p=float(sampling_params.get("top_p", 1.0)),
                                  max_new_tokens=self.max_new_tokens, stop_token_ids=self.stop_token_ids)
        try:
            # run_episode enforces the agent's timeout_s; this outer guard catches what hangs
            # outside the agent (e.g. a tool thread that never yields back)
            ep = await asyncio.wait_for(
                # the environment gives the first message (or the conversation, e.g. tau2's user
                # simulator); the reward is applied below, off the event loop
                run_episode(self.spec, task, sampler, self.renderer, sampling, env=self.env, group_id=group_id,
                            episode_id=episode_id, always_extend=True,
                            sequence_budget=(self.prompt_length, self.response_length), score=False),
                timeout=self.spec.timeout_s + 30.0)
        except TimeoutError:
            ep = Episode(episode_id=episode_id, task_id=task["task_id"], group_id=group_id, status=Status.TIMEOUT,
                         error=f"episode exceeded its {self.spec.timeout_s:g} s limit (outer guard)")
        except Exception as e:  # noqa: BLE001 - recorded on the row, never raised into veRL
            ep = Episode(episode_id=episode_id, task_id=task["task_id"], group_id=group_id, status=Status.ERROR,
                         error=f"{type(e).__name__}: {e}")
        if not ep.failed and len(ep.segments) != 1:
            ep.status, ep.error = Status.ERROR, f"always-extend mode produced {len(ep.segments)} segments"
        if not ep.failed:
            t1 = time.perf_counter()
            # the reward may run code in the sandbox: off the worker's event loop, on a copy, so that
            # a reward still running after its time limit cannot change the row afterwards
            scored = dataclasses.replace(ep)
            try:
                await asyncio.wait_for(asyncio.to_thread(self.env.score, task, scored), timeout=self.score_timeout_s)
            except TimeoutError:
                ep.status, ep.error = Status.TIMEOUT, f"reward exceeded its {self.score_timeout_s:g} s limit"
            else:
                for name in ("status", "error", "reward", "reward_components", "reward_metadata"):
                    setattr(ep, name, getattr(scored, name))
            ep.timings["reward_s"] = time.perf_counter() - t1
        apply_group_policy([ep], GroupPolicy.KEEP, failed_reward=self.env.failed_reward)
        return ep

    def _output(self, ep: Episode, want_logprobs: bool, t0: float) -> AgentLoopOutput:
        if not ep.failed and not ep.calls:  # nothing sampled, e.g. a limit of zero: still a row, still scored
            ep.error = ep.error or "no model call was made"
        # the sequence budget already kept the episode within (prompt_length, response_length)
        row = episode_row(ep, self.pad_id, self.env.failed_reward, failed_as_placeholder=True, logprobs=True)
        reward = row.reward
        tool_errors = sum(1 for t in ep.tool_calls if not t.ok)
        forced = ep.metadata.get("forced_extensions", {})
        outcome = ep.reward_components.get("outcome", reward) if not ep.failed else reward
        # which trainer steps' weights sampled the episode: veRL's v1 trainer reads these on every
        # row (staleness metrics); an episode with no sampled call takes the newest version seen here
        versions = [c.weight_version for c in ep.calls if c.weight_version is not None]
        if not versions:
            from . import sampler as verl_sampler

            versions = [verl_sampler.LATEST_WEIGHT_VERSION or 0]
        return AgentLoopOutput(
            prompt_ids=row.prompt_ids, response_ids=row.response_ids, response_mask=row.response_mask,
            response_logprobs=row.response_logprobs if want_logprobs else None,
            reward_score=float(reward),
            num_turns=len(ep.messages),
            metrics=AgentLoopMetrics(generate_sequences=ep.timings.get("model_s", 0.0),
                                     tool_calls=max(0.0, ep.timings.get("wall_s", 0.0) - ep.timings.get("model_s", 0.0)),
                                     compute_score=ep.timings.get("reward_s", 0.0)),
            extra_fields={
                "turn_scores": [], "tool_rewards": [],
                "min_global_steps": min(versions), "max_global_steps": max(versions),
                "agentboost_status": row.status, "agentboost_reward": float(reward), "agentboost_error": row.error or "",
                "agentboost_task_id": ep.task_id, "agentboost_episode_id": ep.episode_id,
                "agentboost_model_calls": len(ep.calls), "agentboost_tool_calls": len(ep.tool_calls),
                "agentboost_tool_errors": tool_errors, "agentboost_malformed_tool_calls": ep.malformed_tool_calls,
                "agentboost_calls_in_reasoning": ep.calls_in_reasoning,
                "agentboost_unterminated_reasoning": ep.unterminated_reasoning,
                "agentboost_forced_extensions": sum(forced.values()),
                "agentboost_forced_extension_reasons": json.dumps(forced, sort_keys=True),
                "agentboost_wall_s": time.perf_counter() - t0,
                # the same keys on every row: veRL turns them into per-data-source metrics
                "reward_extra_info": {"outcome": float(outcome), "failed": float(ep.failed), "aborted": float(row.aborted),
                                      "truncated": float(ep.status == Status.TRUNCATED),
                                      "tool_calls": float(len(ep.tool_calls))},
            },
        )
