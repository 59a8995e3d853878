"""Entry points for the http-agent tests (``agent.entry_point``), each run in a process of its own
with OPENAI_BASE_URL and OPENAI_API_KEY in its environment."""

import time


def answer(prompt, task):
    """The `openai` client, unchanged: one call, the model's text returned as the answer."""
    from openai import OpenAI

    reply = OpenAI().chat.completions.create(model="policy", messages=[{"role": "user", "content": prompt}])
    return reply.choices[0].message.content


def impatient(prompt, task):
    """A client that gives up on a call before its answer comes (the connection is closed mid-call)."""
    from openai import OpenAI

    try:
        OpenAI(timeout=0.5, max_retries=0).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": prompt}])
    except Exception:  # noqa: BLE001 - the timeout is the point
        time.sleep(0.3)
        return "gave up"
    return "answered"


def example(name: str):
    """A script of examples/gateway as a module (its tools and prompt), without running it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "gateway" / name
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sdk_twin(model, tools, system_prompt):
    """The in-process twin of examples/gateway/anthropic_agent.py and responses_agent.py: a Strands
    agent with the same calculator tool (the same name, description and JSON schema, the same
    results) and the same system prompt, around the trainable model."""
    from strands import Agent
    from strands.tools.tools import PythonAgentTool

    sdk = example("anthropic_agent.py")
    declared = sdk.TOOLS[0]

    def run(tool_use, **_):
        return {"toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": sdk.calculator(str(tool_use["input"].get("expression", "")))}]}

    tool = PythonAgentTool(declared["name"], {"name": declared["name"], "description": declared["description"],
                                              "inputSchema": {"json": declared["input_schema"]}}, run)
    return Agent(model=model, tools=[tool], system_prompt=system_prompt, callback_handler=None)


def forgetful(prompt, task):
    """A client that forgets its history between its two calls (the second sends a conversation the
    first does not extend): every episode splits, for the merge-rate gate."""
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    for text in (prompt, "Once more: " + prompt):
        reply = client.chat.completions.create(model="policy", messages=[{"role": "system", "content": "Be brief."},
                                                                        {"role": "user", "content": text}])
    return reply.choices[0].message.content
