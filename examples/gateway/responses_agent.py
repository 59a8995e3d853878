"""An agent agentboost did not build: the `openai` SDK's Responses client with its own tool loop, in
its own process. It knows only OPENAI_BASE_URL and OPENAI_API_KEY (in a run: the gateway's
per-episode URL and key) and its question (AGENTBOOST_PROMPT, or the command line). It relies on the
server to keep the conversation: each turn after the first sends only the tool results and the
`previous_response_id`. It prints the answer. `agent.kind: http` with `command: python
examples/gateway/responses_agent.py` trains it."""

import json
import os
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "name": "calculator", "description": "Evaluate an arithmetic expression such as '8 + 7'.",
          "parameters": {"type": "object", "properties": {"expression": {
    "type": "string", "description": "The expression, with numbers and + - * / ( ) only."}},
                         "required": ["expression"]}}]
INSTRUCTIONS = ("You are a helpful assistant with a calculator tool. Solve the problem and end with the final answer "
                "as a number.")


def calculator(expression: str) -> str:
    if not set(expression) <= set("0123456789+-*/(). "):
        return "error: only numbers and + - * / ( ) are allowed"
    try:
        return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - the characters are checked above
    except Exception as e:  # noqa: BLE001 - the model reads the error and tries again
        return f"error: {e}"


def main() -> None:
    client = OpenAI(max_retries=0)  # reads OPENAI_BASE_URL and OPENAI_API_KEY
    question = os.environ.get("AGENTBOOST_PROMPT") or " ".join(sys.argv[1:])
    response = client.responses.create(model="policy", instructions=INSTRUCTIONS, input=question, tools=TOOLS)
    for _ in range(3):
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            break
        results = [{"type": "function_call_output", "call_id": c.call_id,
                    "output": calculator(str(json.loads(c.arguments or "{}").get("expression", "")))} for c in calls]
        response = client.responses.create(model="policy", instructions=INSTRUCTIONS, input=results, tools=TOOLS,
                                           previous_response_id=response.id)
    print(response.output_text.strip())


if __name__ == "__main__":
    main()
