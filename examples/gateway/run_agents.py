"""Three agents agentboost did not build, recorded token for token through the gateway:

1. a Strands agent with the stock `OpenAIModel`, given only the gateway's base URL and key;
2. `plain_openai_agent.py`, the `openai` client in a plain script, run as its own process with
   OPENAI_BASE_URL and OPENAI_API_KEY in its environment;
3. `langchain_agent.py`, LangChain's `ChatOpenAI` with a bound tool, the same way.

The policy here is a scripted one with SmolLM2's tokenizer (no model weights, seconds on a CPU);
in a run it is the policy server. Each episode is checked and printed as one line.

    python examples/gateway/run_agents.py
"""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from strands import Agent
from strands.models.openai import OpenAIModel
from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.episodes.record import check_episode
from agentboost.gateway.server import Gateway
from agentboost.models.embedded import prepare_embedded
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.testing.faults import add

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>'
TASK = {"task_id": "add-1", "question": "What is 17 + 25?"}


def show(name, ep):
    assert check_episode(ep) == [], check_episode(ep)
    print(f"{name}: status={ep.status} calls={len(ep.calls)} segments={len(ep.segments)} "
          f"splits={ep.split_reasons} sampled_tokens={sum(map(sum, (s.loss_mask for s in ep.segments)))} "
          f"answer={ep.final_answer!r}")


def main():
    tok = AutoTokenizer.from_pretrained(str(prepare_embedded("smollm2-135m-instruct")))
    sampler = ScriptedSampler(lambda prompt, i: CALL if i % 2 == 0 else "17 + 25 = 42.", tok)
    with Gateway(sampler, ChatRenderer(tok), SamplingParams(temperature=1.0, max_new_tokens=128)) as gw:
        # 1. a Strands agent with OpenAIModel: the base URL and the key are all it is given
        s = gw.open_session(TASK)
        model = OpenAIModel(client_args={"base_url": gw.base_url(s), "api_key": s.key}, model_id="policy")
        agent = Agent(model=model, tools=[add], system_prompt="You are a calculator agent.", callback_handler=None)
        asyncio.run(agent.invoke_async(TASK["question"]))
        show("strands OpenAIModel", gw.finish(s))

        # 2. and 3. scripts in their own processes (the `openai` client; LangChain's ChatOpenAI):
        # OPENAI_BASE_URL and OPENAI_API_KEY, and the task
        for name, script in (("openai client, own process", "plain_openai_agent.py"),
                             ("LangChain ChatOpenAI, own process", "langchain_agent.py")):
            s = gw.open_session(TASK)
            env = {**os.environ, "OPENAI_BASE_URL": gw.base_url(s, by="key"), "OPENAI_API_KEY": s.key}
            out = subprocess.run([sys.executable, str(Path(__file__).with_name(script)), TASK["question"]], env=env,
                                 capture_output=True, text=True, check=True, timeout=120)
            ep = gw.finish(s)
            ep.metadata["agent_output"] = out.stdout.strip()
            show(name, ep)


if __name__ == "__main__":
    main()
