"""A LangChain agent agentboost did not build: `ChatOpenAI` with a bound tool and its own tool loop,
in its own process. `ChatOpenAI` reads OPENAI_BASE_URL and OPENAI_API_KEY (in a run: the gateway's
per-episode URL and key); the question is AGENTBOOST_PROMPT in a run, else the command line. It
prints its answer. `agent.kind: http` with `command: python examples/gateway/langchain_agent.py`
trains it."""

import os
import sys

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    question = os.environ.get("AGENTBOOST_PROMPT") or " ".join(sys.argv[1:])
    llm = ChatOpenAI(model="policy", max_retries=0).bind_tools([add])
    messages = [SystemMessage("You are a calculator agent."), HumanMessage(question)]
    for _ in range(4):
        reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            messages.append(ToolMessage(str(add.invoke(call["args"])), tool_call_id=call["id"]))
    print(reply.content)


if __name__ == "__main__":
    main()
