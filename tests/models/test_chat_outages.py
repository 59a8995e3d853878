"""Chat models we do not train (``agentboost.models.chat``): their spec as Strands' providers take it,
and outages of any serving side (``is_outage``: the ``aborted`` status) told from everything else:
with the real exception types of openai and Strands, and a real HTTP sampler against a closed
port. Aborted episodes get no reward and leave their GRPO group; text-level episodes are never RL rows."""

from __future__ import annotations

import asyncio
import inspect
import socket

import httpx
import openai
import pytest
from strands.types.exceptions import ModelThrottledException

from agentboost.episodes.record import Episode, Status
from agentboost.models.chat import ChatModelSpec, is_outage
from agentboost.rewards.groups import apply_group_policy
from agentboost.run import health
from agentboost.trainer.batch import rows_from_episodes


def test_outages_are_told_from_answers_and_bugs():
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    down = openai.APIConnectionError(request=req)
    err500 = openai.InternalServerError("boom", response=httpx.Response(503, request=req), body=None)
    bad = openai.BadRequestError("no", response=httpx.Response(400, request=req), body=None)
    wrapped = RuntimeError("strands event loop")
    wrapped.__cause__ = down
    assert is_outage(down) and is_outage(err500) and is_outage(wrapped)
    assert is_outage(ModelThrottledException("429")) and is_outage(openai.APITimeoutError(request=req))
    assert not is_outage(bad) and not is_outage(ValueError("a tool's bug")) and not is_outage(KeyError("x"))


def test_a_policy_server_that_is_down_aborts_the_episode(smollm2_path):
    from transformers import AutoTokenizer

    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.http_sampler import HttpSampler
    from agentboost.sampling.protocol import SamplingParams

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tok = AutoTokenizer.from_pretrained(str(smollm2_path))

    async def go():
        sampler = HttpSampler(f"http://127.0.0.1:{port}", model="m", max_retries=1)
        try:
            return await run_episode(StrandsAgentSpec(), {"task_id": "t", "question": "1+1?", "answer": "2"},
                                     sampler, ChatRenderer(tok), SamplingParams(max_new_tokens=8), env=StrandsEnv())
        finally:
            await sampler.close()

    ep = asyncio.run(go())
    assert ep.status == Status.ABORTED and "serving side unavailable" in ep.error and ep.reward is None


def _ep(i: int, status: Status, reward: float | None = 1.0) -> Episode:
    return Episode(episode_id=f"e{i}", task_id="t", group_id="g", status=status, reward=reward,
                   reward_components={"outcome": reward} if reward is not None else {})


def test_an_aborted_episode_is_no_wrong_answer_in_training():
    eps = [_ep(0, Status.OK, 1.0), _ep(1, Status.ABORTED, None), _ep(2, Status.ERROR, None), _ep(3, Status.OK, 0.0)]
    kept, report = apply_group_policy(eps, "keep", group_size=4, failed_reward=-1.0)
    assert [e.episode_id for e in kept] == ["e0", "e2", "e3"] and eps[1].reward is None
    assert eps[2].reward == -1.0  # a failure still is one
    assert report.aborted_episodes == 1 and report.failed_episodes == 1 and report.uneven_groups == 1
    kept, report = apply_group_policy([_ep(0, Status.ABORTED, None)], "drop")
    assert kept == [] and report.aborted_episodes == 1 and report.dropped_groups == 0
    # a step whose episodes the server aborted cannot learn: the run stops, saying so
    with pytest.raises(health.EpisodesFailed, match="aborted: serving side"):
        down = [_ep(i, Status.ABORTED, None) for i in range(4)]
        for e in down:
            e.error = "serving side unavailable: ConnectionRefusedError"
        health.check_episode_failures(down, 0.5, 1)


def test_text_level_episodes_are_never_rl_rows():
    ep = _ep(0, Status.OK, 1.0)
    ep.metadata["text_level"] = {"provider": "openai", "model_id": "m"}
    with pytest.raises(ValueError, match="text-level.*export it for sft"):
        rows_from_episodes([ep])


def test_the_spec_builds_strands_own_provider_with_the_key_from_the_environment(monkeypatch):
    from strands.models.openai import OpenAIModel

    monkeypatch.setenv("AB_TEST_KEY", "sk-from-env")
    spec = ChatModelSpec(provider="openai", model_id="m", base_url="http://127.0.0.1:9/v1", api_key_env="AB_TEST_KEY",
                         params={"temperature": 0.1})
    model = spec.build(temperature=0.7, max_tokens=16, seed=3)
    assert isinstance(model, OpenAIModel)
    assert model.config["params"] == {"temperature": 0.1, "max_tokens": 16, "seed": 3}  # the spec's params win
    assert model.client_args["api_key"] == "sk-from-env" and "sk-from-env" not in str(spec.as_dict())
    # the keyword arguments given are those of the installed provider
    assert {"client_args", "model_id", "params"} <= set(inspect.signature(OpenAIModel.__init__).parameters) | \
        set(OpenAIModel.OpenAIConfig.__annotations__)
