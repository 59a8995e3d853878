"""An agent agentboost did not build: the `openai` client in a plain script, in its own process.
It knows only OPENAI_BASE_URL and OPENAI_API_KEY (the gateway's per-episode URL and key) and the
question (AGENTBOOST_PROMPT in a run, else its command line); it runs an `add` tool loop and prints
its answer."""

import json
import os
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]

client = OpenAI()  # reads OPENAI_BASE_URL and OPENAI_API_KEY
question = os.environ.get("AGENTBOOST_PROMPT") or sys.argv[1]
messages = [{"role": "system", "content": "You are a calculator agent."}, {"role": "user", "content": question}]
for _ in range(4):
    message = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    if not message.tool_calls:
        break
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])})
print(message.content)
