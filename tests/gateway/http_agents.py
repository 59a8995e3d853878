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
