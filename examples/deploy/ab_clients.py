"""Sessions of a stock Strands agent against a served policy (``agentboost serve``): each session
is one task, its own conversation id (``X-Agentboost-Session``), and, when it ends, its outcome is
posted to ``/v1/feedback`` with the task row, so the server scores the final answer with the run's
reward (host-side). Any agent does the same by base URL; this one is what the docs run.

    python examples/deploy/ab_clients.py --url http://127.0.0.1:8000/v1 --token T \
        --tasks examples/quickstart/data/test.jsonl --sessions 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request
import uuid


def _post(url: str, token: str | None, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def wait_until_up(url: str, token: str | None, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            req = urllib.request.Request(url + "/models", headers={"Authorization": f"Bearer {token}"} if token else {})
            with urllib.request.urlopen(req, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not come up within {timeout_s:g} s")
            time.sleep(0.5)


async def run_sessions(url: str, token: str | None, tasks: list[dict], sessions: int, concurrency: int = 16,
                       system_prompt: str | None = None, stream: bool = True) -> list[dict]:
    from strands import Agent
    from strands.models.openai import OpenAIModel

    from agentboost.tools.calculator import calculator

    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> dict:
        task = tasks[i % len(tasks)]
        sid = f"{uuid.uuid4().hex[:8]}-{i}"
        model = OpenAIModel(client_args={"base_url": url, "api_key": token or "none", "max_retries": 0,
                                         "default_headers": {"X-Agentboost-Session": sid}},
                            model_id="agentboost", stream=stream)
        agent = Agent(model=model, tools=[calculator], system_prompt=system_prompt, callback_handler=None)
        async with gate:
            try:
                await agent.invoke_async(task["question"])
            except Exception as e:  # a turn cut at the served max tokens ends the session; its answer is scored
                if "MaxTokensReached" not in type(e).__name__:
                    raise
            return await asyncio.to_thread(_post, url + "/feedback", token, {"session_id": sid, "task": task})

    return await asyncio.gather(*(one(i) for i in range(sessions)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the server's base URL, .../v1")
    ap.add_argument("--token", help="its bearer token")
    ap.add_argument("--tasks", required=True, help="task file (JSONL with question and answer)")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--system-prompt", help="the agent's system prompt (default: the run's, from --config)")
    ap.add_argument("--config", help="a training YAML whose agent.system_prompt the agent uses")
    args = ap.parse_args()
    from agentboost.tasks import load_tasks

    prompt = args.system_prompt
    if prompt is None and args.config:
        from agentboost.run.config import load_config

        prompt = load_config(args.config, for_training=False).agent.system_prompt
    wait_until_up(args.url, args.token)
    outcomes = asyncio.run(run_sessions(args.url, args.token, load_tasks(args.tasks), args.sessions,
                                        system_prompt=prompt))
    by_arm: dict[str, list[float]] = {}
    for o in outcomes:
        by_arm.setdefault(o["arm"], []).append(float(o["success"]))
    print(f"{len(outcomes)} sessions, scored by {outcomes[0]['source']}: " + ", ".join(
        f"{arm} {len(v)} sessions, success {sum(v) / len(v):.2f}" for arm, v in sorted(by_arm.items())))


if __name__ == "__main__":
    main()
