"""A Strands agent as it would be deployed: the stock `OpenAIModel`, its own tool, its own process.
It knows only OPENAI_BASE_URL and OPENAI_API_KEY (in a run: the gateway's per-episode URL and key)
and its question (AGENTBOOST_PROMPT, or the command line); it prints its answer. Nothing in it is
agentboost's: `agent.kind: http` with `command: python examples/gateway/strands_openai_agent.py`
trains it (examples/gateway/http_agent.yaml)."""

import os
import sys

from strands import Agent, tool
from strands.models.openai import OpenAIModel


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as '8 + 7' or '(3 * 4) - 2'.

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
    question = os.environ.get("AGENTBOOST_PROMPT") or " ".join(sys.argv[1:])
    model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"],
                                     "api_key": os.environ["OPENAI_API_KEY"]}, model_id="policy")
    agent = Agent(model=model, tools=[calculator], callback_handler=None,  # nothing on stdout but the answer
                  system_prompt="You are a helpful assistant with a calculator tool. Solve the problem and end "
                                "with the final answer as a number.")
    print(str(agent(question)).strip())


if __name__ == "__main__":
    main()
