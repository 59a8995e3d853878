"""What the gateway tests share: one scripted policy run in-process (Strands around the trainable
model) and through the gateway (a stock Strands ``OpenAIModel`` pointed at it over a real socket),
and the parts of two records that must be byte-identical."""

from __future__ import annotations

import asyncio
import json

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.gateway.server import Gateway
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add, mul

SYSTEM = "You are a calculator agent."
PARAMS = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=200, seed=3)
TASK = {"task_id": "t1", "question": "What is 17 + 25, and 3 * 4?"}


def spec(**kw) -> StrandsAgentSpec:
    kw.setdefault("tools", [add, mul])
    kw.setdefault("system_prompt", SYSTEM)
    return StrandsAgentSpec(**kw)


def in_process(tok, script, agent_spec=None):
    sampler = ScriptedSampler(script, tok)
    return asyncio.run(run_episode(agent_spec or spec(), TASK, sampler, ChatRenderer(tok), PARAMS))


def openai_model(gateway: Gateway, session, stream: bool, by: str = "path", **params):
    from strands.models.openai import OpenAIModel

    return OpenAIModel(client_args={"base_url": gateway.base_url(session, by=by), "api_key": session.key,
                                    "max_retries": 0},
                       model_id="agentboost-policy", params=params, stream=stream)


def through_gateway(tok, script, stream: bool, agent_spec=None, prompts=None, build=None, between=None,
                    **params):
    """The same agent, built with a stock Strands OpenAIModel pointed at a gateway; returns the
    episode record, the sampler (what the policy was asked) and the session. ``build(model)``
    builds another agent; ``between(agent)`` runs between two prompts."""
    sampler = ScriptedSampler(script, tok)
    with Gateway(sampler, ChatRenderer(tok), PARAMS) as gw:
        session = gw.open_session(TASK, sampling=PARAMS)
        model = openai_model(gw, session, stream, **params)
        agent = build(model) if build else (agent_spec or spec()).build(model)

        async def go():
            for i, p in enumerate(prompts or [TASK["question"]]):
                if i and between:
                    between(agent)
                await agent.invoke_async(p)

        asyncio.run(go())
        ep = gw.finish(session)
    return ep, sampler, session


def record_bytes(ep) -> bytes:
    """Everything training reads from a record, as bytes: calls (token ids, log-probs, finish,
    re-render flag and reason, weight version, reasoning), segments (ids, masks, call indices),
    splits and their reasons, tool calls, the final answer. Times are left out."""
    calls = [{k: v for k, v in vars(c).items() if k not in ("started_at", "latency_s")} for c in ep.calls]
    return json.dumps({"calls": calls, "segments": [vars(s) for s in ep.segments], "num_splits": ep.num_splits,
                       "split_reasons": ep.split_reasons, "tool_calls": [vars(t) for t in ep.tool_calls],
                       "final_answer": ep.final_answer, "malformed": ep.malformed_tool_calls},
                      sort_keys=True).encode()


def rerendered_reasons(ep) -> list[str | None]:
    return [c.rerender_reason for c in ep.calls if c.rerendered]


# fixtures (imported by the test modules: a conftest.py here would shadow tests/conftest.py, which
# spawned workers import as `conftest`)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


@pytest.fixture(params=["smollm2_tokenizer", "qwen3_tokenizer"])
def tok(request):
    """Both templates: SmolLM2's (knows no tools: Hermes tools in the system prompt) and Qwen3's
    (renders tools itself)."""
    return request.getfixturevalue(request.param)
