"""One episode of an agent in its own process (``agents/http_agent.py``), through a gateway session.

The host starts a gateway on its event loop in front of the episode's sampler, opens a session,
starts the agent with the session's base URL and key, waits for it (within the spec's
``timeout_s``, then its whole process group is killed), and records the session as the episode: the
same record, the same reward and the same statuses as an agent built in-process. Run as
``python -m agentboost.gateway.http_episode module:function``, it is the process an entry point
runs in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
import uuid
from typing import Any

from ..agents.chat_rendering import ChatRenderer
from ..agents.http_agent import HttpAgentSpec
from ..environments.strands_env import StrandsEnv
from ..episodes.record import Episode, Status
from ..sampling.protocol import Sampler, SamplingParams, derive_seed
from .server import Gateway

STDERR_TAIL = 2000  # characters of a failed agent's standard error kept in the episode's error


def agent_environment(spec: HttpAgentSpec, base_url: str, key: str, finish_url: str, task: dict[str, Any],
                      prompt: str, anthropic_base_url: str | None = None) -> dict[str, str]:
    """What the agent is given: the OpenAI and Anthropic clients' own variables (an unchanged
    ``OpenAI()`` or ``Anthropic()`` client reads them), the task and its prompt, and where to post
    its output."""
    env = dict(os.environ)
    env.update(spec.env)
    env.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key, "AGENTBOOST_FINISH_URL": finish_url,
                "AGENTBOOST_TASK": json.dumps(task, default=str), "AGENTBOOST_PROMPT": prompt})
    if anthropic_base_url is not None:
        env.update({"ANTHROPIC_BASE_URL": anthropic_base_url, "ANTHROPIC_API_KEY": key})
    return env


async def _run_agent(spec: HttpAgentSpec, env: dict[str, str], stdin: bytes) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr); exit code None: past ``timeout_s``, its process group killed."""
    proc = await asyncio.create_subprocess_exec(*spec.argv(), env=env, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                start_new_session=True)  # its own group: killed with its children
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=spec.timeout_s)
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    except asyncio.TimeoutError:
        await _kill(proc)
        return None, "", ""
    except asyncio.CancelledError:  # the episode was cancelled (the pool's soft deadline): no orphan
        await _kill(proc)
        raise


async def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    await proc.wait()


async def run_http_episode(spec: HttpAgentSpec, task: dict[str, Any], sampler: Sampler, renderer: ChatRenderer,
                           sampling: SamplingParams, env: StrandsEnv | None = None, group_id: str | None = None,
                           episode_id: str | None = None, always_extend: bool = False,
                           sequence_budget: tuple[int, int] | None = None, score: bool = True,
                           sample: int = 0) -> Episode:
    """``run_episode`` for an http agent (the same arguments and the same promise: one record,
    whatever happens)."""
    if sampling.seed is not None:
        sampling = dataclasses.replace(sampling, seed=derive_seed(sampling.seed, str(task["task_id"]), sample))
    if env is not None and env.conversation is not None:
        return Episode(episode_id=episode_id or uuid.uuid4().hex, task_id=str(task["task_id"]),
                       group_id=group_id or str(task["task_id"]),
                       status=Status.ERROR, error="env.conversation needs an agent agentboost builds "
                                                  "(agent.kind strands): an http agent runs its own conversation")
    t0 = time.perf_counter()
    gw = Gateway(sampler, renderer, sampling, tool_parser=spec.tool_parser, reasoning=spec.reasoning,
                 max_model_calls=spec.max_model_calls, max_response_tokens=spec.max_response_tokens,
                 always_extend=always_extend, sequence_budget=sequence_budget,
                 max_request_bytes=spec.max_request_bytes)
    await gw.start()  # on this event loop, beside the episode's other work: the sampler is async
    try:
        s = gw.open_session(task, episode_id=episode_id, group_id=group_id or str(task["task_id"]))
        status: tuple[Status, str] | None = None
        out = ""
        try:
            prompt = env.first_message(task) if env is not None else task["question"]
            agent_env = agent_environment(spec, gw.base_url(s), s.key, f"{gw.url}/s/{s.id}/finish", task, prompt,
                                          anthropic_base_url=gw.base_url(s, api="anthropic"))
            code, out, err = await _run_agent(spec, agent_env, json.dumps(task, default=str).encode())
        except Exception as e:  # a command that cannot start, a task without its prompt: recorded
            status = (Status.ERROR, f"agent: {type(e).__name__}: {e}")
        else:
            if code is None:
                status = (Status.TIMEOUT, f"episode exceeded its {spec.timeout_s:g} s limit (the agent was killed)")
            elif code != 0:
                status = (Status.ERROR, f"the agent exited with code {code}: {err[-STDERR_TAIL:].strip()}")
    finally:
        # after the agent: a call still in flight (its client gone) is cancelled here, which marks
        # the session incomplete before it becomes the record
        await gw.stop()
    output = s.output if s.output is not None else (out.strip() or None)
    ep = gw.finish(s)
    # a limit the gateway met (truncated) or a client gone mid-call (incomplete) is the cause of
    # an agent's failing exit: the session's status stands; a timeout is the host's own verdict
    if status is not None and status[0] == Status.ERROR and ep.calls and ep.calls[-1].finish_reason == "length":
        # the client's own reaction to a turn cut at max_new_tokens (Strands raises on it): as in-process
        status = (Status.TRUNCATED, f"a model turn hit its max_new_tokens limit ({status[1][:200]})")
    if status is not None and (ep.status == Status.OK or status[0] == Status.TIMEOUT):
        ep.status, ep.error = status
    if ep.status == Status.OK and not ep.calls:
        ep.status, ep.error = Status.ERROR, ("the agent made no model call through the gateway (does it read "
                                             "OPENAI_BASE_URL and OPENAI_API_KEY, or ANTHROPIC_BASE_URL and "
                                             "ANTHROPIC_API_KEY?)")
    if output is not None:
        ep.metadata["agent_output"] = output
        # what the agent returned is its answer (it may post-process the model's last turn)
        ep.final_answer = output if isinstance(output, str) else json.dumps(output, default=str)
    ep.metadata["agent_kind"] = "http"
    ep.timings["wall_s"] = time.perf_counter() - t0
    if env is not None and score:
        t1 = time.perf_counter()
        env.score(task, ep)
        ep.timings["reward_s"] = time.perf_counter() - t1
    return ep


def main(argv: list[str] | None = None) -> int:
    """The process an entry point runs in: ``function(prompt, task)`` (awaited when it is a
    coroutine function), its return value posted to the session's finish endpoint."""
    import inspect
    import urllib.request

    from ..imports import import_object

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agentboost.gateway.http_episode module:function", file=sys.stderr)
        return 2
    fn = import_object(args[0], "agent entry point")
    task = json.loads(os.environ["AGENTBOOST_TASK"])
    result = fn(os.environ["AGENTBOOST_PROMPT"], task)
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    body = json.dumps({"output": result if isinstance(result, (str, int, float, bool, list, dict)) or result is None
                       else str(result)}).encode()
    req = urllib.request.Request(os.environ["AGENTBOOST_FINISH_URL"], data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
