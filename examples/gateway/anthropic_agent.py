"""An agent agentboost did not build: the `anthropic` SDK with its own tool loop, in its own process.
It knows only ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (in a run: the gateway's per-episode URL and
key; an unchanged `Anthropic()` client reads them) and its question (AGENTBOOST_PROMPT, or the
command line); it calls a calculator tool until the model answers, sends every turn back as it came
(thinking blocks included), and prints the answer. `agent.kind: http` with `command: python
examples/gateway/anthropic_agent.py` trains it."""

import os
import sys

from anthropic import Anthropic

TOOLS = [{"name": "calculator", "description": "Evaluate an arithmetic expression such as '8 + 7'.",
          "input_schema": {"type": "object", "properties": {"expression": {
    "type": "string", "description": "The expression, with numbers and + - * / ( ) only."}},
                           "required": ["expression"]}}]
SYSTEM = "You are a helpful assistant with a calculator tool. Solve the problem and end with the final answer as a number."


def calculator(expression: str) -> str:
    if not set(expression) <= set("0123456789+-*/(). "):
        return "error: only numbers and + - * / ( ) are allowed"
    try:
        return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - the characters are checked above
    except Exception as e:  # noqa: BLE001 - the model reads the error and tries again
        return f"error: {e}"


def main() -> None:
    client = Anthropic(max_retries=0)  # reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
    question = os.environ.get("AGENTBOOST_PROMPT") or " ".join(sys.argv[1:])
    messages = [{"role": "user", "content": question}]
    for _ in range(4):
        reply = client.messages.create(model="policy", max_tokens=512, tools=TOOLS, messages=messages, system=SYSTEM)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": calculator(str(c.input.get("expression", "")))}
            for c in calls]})
    print("".join(b.text for b in reply.content if b.type == "text").strip())


if __name__ == "__main__":
    main()
