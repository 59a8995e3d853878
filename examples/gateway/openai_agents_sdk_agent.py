"""An agent agentboost did not build: the OpenAI Agents SDK (`openai-agents`), in its own process. Its
default model speaks the Responses API through an `AsyncOpenAI` client given OPENAI_BASE_URL and
OPENAI_API_KEY (in a run: the gateway's per-episode URL and key); tracing is off (it would export to
OpenAI). It runs its own tool loop with a `@function_tool` and prints the final output.
`agent.kind: http` with `command: python examples/gateway/openai_agents_sdk_agent.py` trains it."""

import os
import sys

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as '8 + 7'.

    Args:
        expression: The expression, with numbers and + - * / ( ) only.
    """
    if not set(expression) <= set("0123456789+-*/(). "):
        return "error: only numbers and + - * / ( ) are allowed"
    try:
        return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - the characters are checked above
    except Exception as e:  # noqa: BLE001 - the model reads the error and tries again
        return f"error: {e}"


def main() -> None:
    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(max_retries=0))  # reads OPENAI_BASE_URL and OPENAI_API_KEY
    agent = Agent(name="calculator agent", model="policy", tools=[calculator],
                  instructions="You are a helpful assistant with a calculator tool. Solve the problem and end with "
                               "the final answer as a number.")
    question = os.environ.get("AGENTBOOST_PROMPT") or " ".join(sys.argv[1:])
    result = Runner.run_sync(agent, question, max_turns=4)
    print(str(result.final_output).strip())


if __name__ == "__main__":
    main()
