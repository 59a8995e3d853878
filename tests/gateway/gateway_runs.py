"""What the gateway tests share: one scripted policy run in-process (Strands around the trainable
model) and through the gateway (a stock Strands model provider pointed at it over a real socket, in
any of the three protocols: ``OpenAIModel`` for chat completions, ``OpenAIResponsesModel`` for
Responses, ``AnthropicModel`` for Messages), the parts of two records that must be byte-identical,
and the three chat templates (SmolLM2, Qwen3, Kimi K2)."""

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


def openai_model(gateway: Gateway, session, stream: bool, by: str = "path", api: str = "chat", **params):
    """A stock Strands model provider pointed at the gateway's session, in protocol ``api``: chat
    (``OpenAIModel``), responses (``OpenAIResponsesModel``; ``stateful=True`` in ``params`` continues
    by ``previous_response_id``) or anthropic (``AnthropicModel``, which always streams)."""
    if api == "chat":
        from strands.models.openai import OpenAIModel

        return OpenAIModel(client_args={"base_url": gateway.base_url(session, by=by), "api_key": session.key,
                                        "max_retries": 0},
                           model_id="agentboost-policy", params=params, stream=stream)
    if api == "responses":
        from strands.models.openai_responses import OpenAIResponsesModel

        stateful = params.pop("stateful", False)
        return OpenAIResponsesModel(client_args={"base_url": gateway.base_url(session, by=by), "api_key": session.key,
                                                 "max_retries": 0},
                                    model_id="agentboost-policy", params=params, stateful=stateful)
    from strands.models.anthropic import AnthropicModel

    return AnthropicModel(client_args={"base_url": gateway.base_url(session, by=by, api="anthropic"),
                                       "api_key": session.key, "max_retries": 0},
                          model_id="agentboost-policy", max_tokens=params.pop("max_tokens", 1024), params=params)


def through_gateway(tok, script, stream: bool, agent_spec=None, prompts=None, build=None, between=None,
                    api: str = "chat", **params):
    """The same agent, built with a stock Strands model provider (protocol ``api``) pointed at a
    gateway; returns the episode record, the sampler (what the policy was asked) and the session.
    ``build(model)`` builds another agent; ``between(agent)`` runs between two prompts."""
    sampler = ScriptedSampler(script, tok)
    with Gateway(sampler, ChatRenderer(tok), PARAMS) as gw:
        session = gw.open_session(TASK, sampling=PARAMS)
        model = openai_model(gw, session, stream, api=api, **params)
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


KIMI_K2_TOKENS = ["<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|tool_calls_section_begin|>",
                  "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                  "<|tool_call_end|>"]


@pytest.fixture(scope="session")
def kimi_k2_tokenizer(qwen3_tokenizer):
    """Kimi K2's official chat template (tests/fixtures/kimi_k2, its source named there) over the
    Qwen3 vocabulary with Kimi K2's special tokens added: the third family's markup and tool-call
    format (``kimi_k2``), with ids that are not Kimi's (its tokenizer is not available here)."""
    from helpers import QWEN3_DIR, REPO
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(QWEN3_DIR))
    tok.add_tokens(KIMI_K2_TOKENS, special_tokens=True)
    tok.chat_template = (REPO / "tests" / "fixtures" / "kimi_k2" / "chat_template.jinja").read_text(encoding="utf-8")
    assert tok.eos_token == "<|im_end|>"  # Kimi K2's end of turn, as Qwen3's
    return tok


TEMPLATES = ["smollm2_tokenizer", "qwen3_tokenizer", "kimi_k2_tokenizer"]


@pytest.fixture(params=TEMPLATES, ids=["smollm2", "qwen3", "kimi_k2"])
def tok(request):
    """Three families: SmolLM2's template (knows no tools: Hermes tools in the system prompt),
    Qwen3's (renders tools itself, thinks) and Kimi K2's (its own markup and call format)."""
    return request.getfixturevalue(request.param)


def calls_text(tok, *calls) -> str:
    """Tool calls ``(name, arguments)`` as the template's family writes them (one turn)."""
    from agentboost.agents.tool_parsers import AUTO, get_tool_formatter, resolve_tool_parser

    family = resolve_tool_parser(AUTO, tok.chat_template, ChatRenderer(tok).supports_tools)
    return get_tool_formatter(family)(list(calls))


def script(tok) -> list[str]:
    """Parallel calls, then one more call, then the answer: three calls that extend one another,
    each in the template's own call format."""
    return [calls_text(tok, ("add", {"a": 17, "b": 25}), ("mul", {"a": 3, "b": 4})),
            "Let me check.\n" + calls_text(tok, ("add", {"a": 42, "b": 12})),
            "17 + 25 = 42 and 3 * 4 = 12."]
