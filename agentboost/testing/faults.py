"""Fault injection for the rollout engine: tools that hang, raise or kill their worker, a scripted
policy that triggers them, and a reward that raises.

A task asks for a fault by carrying ``FAULT:<kind>`` in its question (the script sees only the
prompt) and ``fault: <kind>`` in its row (for the reward). Kinds and the status each must give:
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

from strands import tool

from ..episodes.record import Episode
from ..sampling.scripted import ScriptedTurn

EXPECTED_STATUS = {
    None: "ok",
    "tool_hang": "timeout",       # soft deadline cancels the episode
    "tool_raise": "ok",           # the tool's error goes back to the agent; the episode goes on
    "worker_kill": "crashed",     # SIGKILL of the worker; identified by running it alone again
    "sampler_error": "error",
    "sampler_timeout": "timeout",
    "reward_raise": "error",
    "loop_block": "timeout",      # blocks the worker's event loop: only the hard deadline helps
}
FAULTS = [k for k in EXPECTED_STATUS if k is not None]


@tool
def hang(seconds: float) -> str:
    """Sleep for the given number of seconds.

    Args:
        seconds: how long to sleep
    """
    time.sleep(seconds)
    return "woke up"


@tool
def fail(reason: str) -> str:
    """Always raises.

    Args:
        reason: the error message
    """
    raise RuntimeError(reason)


@tool
def kill_worker() -> str:
    """Kills the process it runs in with SIGKILL."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@tool
async def block_loop(seconds: float) -> str:
    """Blocks the event loop it runs on (a badly written async tool).

    Args:
        seconds: how long to block
    """
    time.sleep(seconds)
    return "unblocked"


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first
        b: second
    """
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: first
        b: second
    """
    return a * b


FAULT_TOOLS = [f"{__name__}:{n}" for n in ("hang", "fail", "kill_worker", "block_loop", "add")]

_FAULT = re.compile(r"FAULT:(\w+)")


def _call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def fault_script(tokenizer, latency_s: float = 0.0, hang_s: float = 3600.0):
    """A policy that answers every task with one tool call and then "The answer is 42.", or
    triggers the fault its question asks for. ``latency_s`` delays every turn (a slow server)."""

    def script(prompt_ids: list[int], index: int) -> ScriptedTurn:
        if index == 0:  # the fault is the first turn's to trigger (decoding later prompts too was a cost of its own)
            m = _FAULT.search(tokenizer.decode(prompt_ids))
            fault = m.group(1) if m else None
            if fault == "sampler_error":
                return ScriptedTurn(error="injected sampler error")
            if fault == "sampler_timeout":
                return ScriptedTurn(text="too late", delay_s=hang_s)
            call = {
                "tool_hang": _call("hang", {"seconds": hang_s}),
                "tool_raise": _call("fail", {"reason": "injected tool failure"}),
                "worker_kill": _call("kill_worker", {}),
                "loop_block": _call("block_loop", {"seconds": hang_s}),
            }.get(fault, _call("add", {"a": 17, "b": 25}))
            return ScriptedTurn(text=call, delay_s=latency_s)
        return ScriptedTurn(text="The answer is 42.", delay_s=latency_s)

    return script


def fault_reward(task: dict, episode: Episode) -> float:
    if task.get("fault") == "reward_raise":
        raise RuntimeError("injected reward failure")
    return 1.0 if episode.final_answer and "42" in episode.final_answer else 0.0


def fault_tasks(n: int, rate: float = 0.05, seed: int = 0, kinds: list[str] | None = None) -> list[dict]:
    """``n`` tasks, about ``rate`` of them with a fault, cycling through ``kinds``."""
    import random

    rng = random.Random(seed)
    kinds = kinds or [k for k in FAULTS if k != "loop_block"]
    tasks, j = [], 0
    for i in range(n):
        fault = None
        if rng.random() < rate:
            fault, j = kinds[j % len(kinds)], j + 1
        q = f"What is 17 + 25? (task {i})" + (f" FAULT:{fault}" if fault else "")
        tasks.append({"task_id": f"task-{i}", "question": q, "answer": "42", "fault": fault})
    return tasks
