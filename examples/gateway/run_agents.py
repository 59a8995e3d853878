"""Agents agentboost did not build, in three protocols, recorded token for token through the gateway:

1. Strands agents with the stock `OpenAIModel` (chat completions), `OpenAIResponsesModel` (Responses)
   and `AnthropicModel` (Anthropic Messages), given only the gateway's base URL and key;
2. scripts in their own processes, given the clients' own environment variables (OPENAI_BASE_URL and
   OPENAI_API_KEY, ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY): `plain_openai_agent.py` (the `openai`
   client, chat completions), `responses_agent.py` (the `openai` client's Responses API, continuing by
   `previous_response_id`), `anthropic_agent.py` (the `anthropic` SDK with its own tool loop),
   `langchain_agent.py` (LangChain's `ChatOpenAI` with a bound tool) and `openai_agents_sdk_agent.py`
   (the OpenAI Agents SDK's `Runner`, over the Responses API).

The policy here is a scripted one with SmolLM2's tokenizer (no model weights, seconds on a CPU): it
calls the agent's tool (whatever its name), then answers; in a run it is the policy server. Each
episode is checked and printed as one line.

    python examples/gateway/run_agents.py
"""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from strands import Agent
from strands.models.anthropic import AnthropicModel
from strands.models.openai import OpenAIModel
from strands.models.openai_responses import OpenAIResponsesModel
from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import check_episode
from agentboost.gateway.server import Gateway
from agentboost.models.embedded import prepare_embedded
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add

TASK = {"task_id": "add-1", "question": "What is 17 + 25?"}
SCRIPTS = {"openai client, chat completions": "plain_openai_agent.py",
           "openai client, Responses": "responses_agent.py",
           "anthropic SDK, Messages": "anthropic_agent.py",
           "LangChain ChatOpenAI": "langchain_agent.py",
           "OpenAI Agents SDK": "openai_agents_sdk_agent.py"}


def policy(tok):
    """Turn 1: a call of the tool the agent offers (add or calculator, read from its prompt); turn 2:
    the answer."""
    def turn(prompt_ids, i):
        if i % 2:
            return "17 + 25 = 42."
        text = tok.decode(prompt_ids)
        if re.search(r'"name": "calculator"', text):
            call = {"name": "calculator", "arguments": {"expression": "17 + 25"}}
        else:
            call = {"name": "add", "arguments": {"a": 17, "b": 25}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return ScriptedSampler(turn, tok)


def show(name, ep):
    assert check_episode(ep) == [], check_episode(ep)
    assert ep.calls and len(ep.segments) == 1, (name, ep.status, ep.error, ep.split_reasons)
    print(f"{name}: status={ep.status} calls={len(ep.calls)} segments={len(ep.segments)} "
          f"splits={ep.split_reasons} sampled_tokens={sum(map(sum, (s.loss_mask for s in ep.segments)))} "
          f"answer={ep.final_answer!r}")


def main():
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    with Gateway(policy(tok), ChatRenderer(tok), SamplingParams(temperature=1.0, max_new_tokens=128)) as gw:
        # 1. Strands agents: the base URL and the key are all each is given
        providers = {
            "strands OpenAIModel": lambda s: OpenAIModel(client_args={"base_url": gw.base_url(s), "api_key": s.key},
                                                          model_id="policy"),
            "strands OpenAIResponsesModel": lambda s: OpenAIResponsesModel(
                client_args={"base_url": gw.base_url(s), "api_key": s.key}, model_id="policy"),
            "strands AnthropicModel": lambda s: AnthropicModel(
                client_args={"base_url": gw.base_url(s, api="anthropic"), "api_key": s.key}, model_id="policy",
                max_tokens=512),
        }
        async def in_process():
            # One event loop for the three. A stream a client SDK leaves open is closed when the loop
            # shuts down, and httpx2 then closes its inner generator twice ("aclose(): asynchronous
            # generator is already running"): cleanup noise after the episodes are recorded, which
            # asyncio prints with a traceback. Only that one message is kept quiet.
            loop = asyncio.get_running_loop()

            def handler(loop, context):
                if not (context.get("message", "").startswith("an error occurred during closing of asynchronous generator")
                        and "already running" in str(context.get("exception"))):
                    loop.default_exception_handler(context)

            loop.set_exception_handler(handler)
            for name, make in providers.items():
                gw.sampler = policy(tok)
                s = gw.open_session(TASK)
                agent = Agent(model=make(s), tools=[add], system_prompt="You are a calculator agent.",
                              callback_handler=None)
                await agent.invoke_async(TASK["question"])
                show(name, gw.finish(s))

        asyncio.run(in_process())

        # 2. scripts in their own processes, each given its client's own environment variables
        for name, script in SCRIPTS.items():
            gw.sampler = policy(tok)
            s = gw.open_session(TASK)
            env = {**os.environ, "OPENAI_BASE_URL": gw.base_url(s, by="key"), "OPENAI_API_KEY": s.key,
                   "ANTHROPIC_BASE_URL": gw.base_url(s, by="key", api="anthropic"), "ANTHROPIC_API_KEY": s.key,
                   "AGENTBOOST_PROMPT": TASK["question"]}
            out = subprocess.run([sys.executable, str(Path(__file__).with_name(script))], env=env,
                                 capture_output=True, text=True, timeout=120)
            ep = gw.finish(s)
            assert out.returncode == 0, (name, out.stderr[-2000:])
            ep.metadata["agent_output"] = out.stdout.strip()
            show(name + ", own process", ep)


if __name__ == "__main__":
    main()
