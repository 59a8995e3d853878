"""Simulated users of a served policy: stock Strands agents (``OpenAIModel`` with the calculator)
that each bring a task to ``serve`` (or a continual loop's deployment), one conversation per
session (``X-Agentboost-Session``, a user id), and post the outcome to ``/v1/feedback`` with the
task row, so the server scores the final answer with its reward. For demos, tests and benchmarks
of a deployment; ``examples/deploy/ab_clients.py`` is its command line.

Every request that fails while the server is up is counted with its reason (a swap of the arms,
a promotion, a rollback must fail none); a server that stops answering ends the drive
(``until_down``), which is how a driver follows a loop that stops on its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Drive:
    sessions: int = 0  # sessions that ran to an answer
    feedback: int = 0  # outcomes posted
    unrewarded: int = 0  # sessions left without an outcome on purpose (feedback_every)
    failures: list[str] = field(default_factory=list)  # requests that failed while the server was up
    outcomes: list[dict[str, Any]] = field(default_factory=list)  # the server's answers to the feedback
    stopped: str = ""


def _post(url: str, token: str | None, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def _gone(e: BaseException) -> bool:
    """The server is not there (refused, reset): not a failed request but a stopped server."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, ConnectionResetError)) or type(e).__name__ in (
                "APIConnectionError", "ConnectError", "RemoteProtocolError"):
            return True
        if isinstance(e, urllib.error.URLError) and isinstance(e.reason, (ConnectionRefusedError, ConnectionResetError)):
            return True
        e = e.__cause__ or e.__context__
    return False


async def drive_users(url: str, token: str | None, tasks: list[dict[str, Any]], sessions: int | None = None,
                      concurrency: int = 8, feedback_every: int = 1, system_prompt: str | None = None,
                      stop: Callable[[], bool] | None = None, until_down: bool = False, stream: bool = True,
                      question_field: str = "question", on_session: Callable[[dict[str, Any]], None] | None = None) -> Drive:
    """Run sessions against ``url`` (``.../v1``) over ``tasks`` in turn: ``sessions`` of them, or
    until ``stop()`` is true, or (``until_down``) until the server stops answering. Every
    ``feedback_every``-th session posts no outcome (1: every session posts one)."""
    from strands import Agent
    from strands.models.openai import OpenAIModel

    from ..tools.calculator import calculator

    drive = Drive()
    counter = itertools.count()
    done = asyncio.Event()

    def finished() -> bool:
        return done.is_set() or (stop is not None and stop())

    async def one(i: int) -> None:
        task = tasks[i % len(tasks)]
        sid = f"{uuid.uuid4().hex[:8]}-{i}"
        model = OpenAIModel(client_args={"base_url": url, "api_key": token or "none", "max_retries": 0,
                                         "default_headers": {"X-Agentboost-Session": sid}},
                            model_id="agentboost", stream=stream, params={"user": f"user-{i % 1000}"})
        agent = Agent(model=model, tools=[calculator], system_prompt=system_prompt, callback_handler=None)
        try:
            await agent.invoke_async(task[question_field])
        except Exception as e:  # a turn cut at the served max tokens ends the session; its answer is scored
            if _gone(e):
                if until_down and drive.sessions:
                    drive.stopped = "the server stopped answering"
                    done.set()
                    return
                drive.failures.append(f"session {sid}: the server is not answering ({type(e).__name__})")
                done.set()
                return
            if "MaxTokensReached" not in type(e).__name__:
                drive.failures.append(f"session {sid}: {type(e).__name__}: {e}"[:500])
                return
        drive.sessions += 1
        if feedback_every > 1 and i % feedback_every == feedback_every - 1:
            drive.unrewarded += 1
            return
        try:
            out = await asyncio.to_thread(_post, url + "/feedback", token, {"session_id": sid, "task": task})
        except Exception as e:
            if _gone(e) and until_down:
                drive.stopped = "the server stopped answering"
                done.set()
                return
            drive.failures.append(f"feedback {sid}: {type(e).__name__}: {e}"[:500])
            return
        drive.feedback += 1
        drive.outcomes.append(out)
        if on_session is not None:
            on_session(out)

    async def worker() -> None:
        while not finished():
            i = next(counter)
            if sessions is not None and i >= sessions:
                return
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if not drive.stopped:
        drive.stopped = "asked to stop" if stop is not None and stop() else "ran its sessions"
    return drive
