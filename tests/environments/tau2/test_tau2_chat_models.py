"""tau2 with chat models we do not train (``agentboost.models.chat``), on the real vLLM CPU server's
chat route serving the embedded model through Strands' OpenAI provider: tau2's LLM user (its own
user prompt and protocol) in airline conversations, and the NL-assertion judge (tau2's own judge
prompt) scoring a task that has assertions."""

from __future__ import annotations

import asyncio
import json

import pytest
from helpers import CHAT_KEY, CHAT_KEY_ENV

import agentboost.environments.tau2.domain as td
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.environments.tau2.evaluator import NLAssertionJudge, nl_judge_system_prompt, score, tau2_reward
from agentboost.environments.tau2.users import make_user, user_system_prompt
from agentboost.models.chat import chat_model_spec
from agentboost.rollout.episode_runner import run_chat_episode
from agentboost.sampling.protocol import SamplingParams

pytestmark = pytest.mark.vllm


def _chat(server, **more) -> dict:
    return {"provider": "openai", "model_id": "base", "base_url": server.url + "/v1", "api_key_env": CHAT_KEY_ENV,
            "max_retries": 1, **more}


def _judge(server, assertions: int) -> dict:
    """A 135M judge keeps to tau2's JSON only when the server enforces it: a structured-output
    schema (the spec's ``params``, passed through Strands' provider as any OpenAI parameter)."""
    item = {"type": "object", "required": ["expectedOutcome", "reasoning", "metExpectation"],
            "properties": {"expectedOutcome": {"type": "string", "maxLength": 60},
                           "reasoning": {"type": "string", "maxLength": 60}, "metExpectation": {"type": "boolean"}}}
    schema = {"type": "object", "required": ["results"],
              "properties": {"results": {"type": "array", "items": item, "minItems": assertions, "maxItems": assertions}}}
    return _chat(server, params={"response_format": {"type": "json_schema",
                                                     "json_schema": {"name": "nl_assertions", "schema": schema}}})


@pytest.mark.slow
def test_tau2_llm_user_and_nl_assertion_judge_on_a_chat_model(chat_server):
    rows = td.task_rows("airline", "base")[:2]
    assert all(r["evaluation_criteria"]["nl_assertions"] for r in rows)
    chat = _chat(chat_server)
    user = make_user("chat", rows[0], **chat)
    assert user.official and user.system == user_system_prompt(rows[0])  # tau2's own user prompt
    env = StrandsEnv(reward="agentboost.environments.tau2.evaluator:tau2_reward",
                     conversation="agentboost.environments.tau2.conversation:tau2_conversation",
                     conversation_options={"user": "chat", "user_options": {**chat, "max_new_tokens": 24},
                                           "system_prompt": "compact", "max_steps": 4,
                                           "judge": _judge(chat_server, 1), "nl_assertions": "all"})
    agent = StrandsAgentSpec(tools=["agentboost.environments.tau2.tools.airline"], max_response_tokens=24,
                             system_prompt=None)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=24, seed=0)

    async def both():
        return await asyncio.gather(*(run_chat_episode(agent, r, chat_model_spec(chat), sampling, env=env)
                                      for r in rows))

    episodes = asyncio.run(both())
    for ep in episodes:
        assert ep.status in ("ok", "truncated"), ep.error
        conv = ep.metadata["conversation"]
        assert conv["user"] == "chat" and conv["user_official"] and conv["user_turns"] >= 1
        said = [b["text"] for m in ep.messages[1:] if m["role"] == "user" for b in m["content"] if "text" in b]
        assert said and all(s.strip() for s in said)  # the simulator's own words, after tau2's greeting
        assert ep.text_level and ep.reward is not None and ep.reward_metadata["metric"] == "tau2_airline_db_comm_nl"
        assert CHAT_KEY not in json.dumps(ep.to_dict())
    # the judge: tau2's prompt, on the first episode's conversation as if the user had stopped
    ep, row = episodes[0], rows[0]
    ep.metadata["conversation"]["termination"] = "user_stop"
    result = tau2_reward(row, ep)
    (check,) = result.metadata["nl_assertions"]
    assert isinstance(check["met"], bool) and isinstance(check["reasoning"], str)
    assert result.metadata["judge"]["calls"] == 1 and not result.metadata["official"]
    assert result.components["nl_assertion"] == float(check["met"])
    judge = NLAssertionJudge(_judge(chat_server, 1))
    system, prompt = judge.prompt(row, [{"role": "assistant", "content": "Hi!"}])
    assert system == nl_judge_system_prompt() and "expectedOutcomes" in prompt and row["evaluation_criteria"][
        "nl_assertions"][0] in prompt
    # without a judge, or with one where the task's basis has no NL_ASSERTION, the official basis
    assert score(row, [], "user_stop", judge=judge).metric == "tau2_airline"
    assert judge.calls == 0
