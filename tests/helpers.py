"""Plain helpers shared by the tests: ``from helpers import cli, REPO``.

tests/ is on sys.path under pytest (tests/conftest.py is there, and pytest's default import mode
puts a conftest's folder first), and the worker processes the trainer and the rollout pool spawn
inherit it: a reward named ``helpers:length_reward`` imports there too. Only the standard library
is imported at the top, so that such a worker pays for nothing else. The fixtures are in
tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the repository (absent in a bare clone; the tests that need it skip)
QWEN3_DIR = REPO.parent / "shared" / "fixtures" / "qwen3-tokenizer"
# the API key the ``chat_server`` fixture demands, planted in this variable; tests grep the files
# runs wrote for it (it must be in none)
CHAT_KEY_ENV = "AGENTBOOST_TEST_CHAT_KEY"
CHAT_KEY = "sk-planted-0f9e8d7c6b5a4f3e2d1c"

# `python -m agentboost.cli` with this interpreter, for a subprocess.Popen of the command line
CLI = (sys.executable, "-m", "agentboost.cli")


def cli(*args: str, timeout: float | None = 300, cwd: str | Path | None = None, env: dict | None = None,
        check: bool = False) -> subprocess.CompletedProcess:
    """``agentboost ARGS`` in a subprocess, its output captured as text. ``cwd`` and ``env`` as for
    subprocess.run (None: this process's); ``check`` asserts exit status 0, with the end of stderr
    as the message."""
    r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       cwd=None if cwd is None else str(cwd), env=env)
    if check:
        assert r.returncode == 0, r.stderr[-2000:]
    return r


def _dry_run(script: str | Path, args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=180,
                          env={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                               "HOME": "/home/user", "DRY_RUN": "1", **env})


def dry_run_refused(script: str | Path, *args: str, **env: str) -> tuple[list[str], str]:
    """A DRY_RUN whose overrides veRL's config refuses: exit 1; its printed overrides and stderr."""
    res = _dry_run(script, args, env)
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    return res.stdout.splitlines(), res.stderr


def dry_run(script: str | Path, *args: str, **env: str) -> list[str]:
    """The lines an example's shell script prints with DRY_RUN=1 (its command, or its veRL overrides),
    run with a minimal environment plus ``env`` and this interpreter's ``python3`` first on PATH (the
    veRL scripts validate their overrides with veRL's own config in DRY_RUN); a non-zero exit raises."""
    res = _dry_run(script, args, env)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.splitlines()


def qwen_call(name: str, args: dict) -> str:
    """A tool call as the Qwen3 chat template renders it."""
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"


def chat_prompt_ids(tok, text: str = "What is 2 + 3?") -> list[int]:
    """The token ids of one user message and the generation prompt, by the tokenizer's template."""
    return list(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        return_dict=True)["input_ids"])


def model_call(prompt: list[int], response: list[int], logprob: float = -0.1, **kw):
    """A finished model call whose every response token has the log-prob ``logprob``."""
    from agentboost.episodes.record import ModelCall

    return ModelCall(prompt_ids=prompt, response_ids=response, response_logprobs=[logprob] * len(response),
                     finish_reason="stop", **kw)


def tool_result_texts(ep) -> list[str]:
    """The text of each tool result in an episode's conversation, in order."""
    return [b["toolResult"]["content"][0]["text"] for m in ep.messages for b in m["content"] if "toolResult" in b]


def answer_episode(text: str):
    """An episode whose final answer (and only assistant message) is ``text``."""
    from agentboost.episodes.record import Episode

    return Episode(episode_id="e", task_id="t", group_id="g", final_answer=text,
                   messages=[{"role": "assistant", "content": [{"text": text}]}])


@contextlib.asynccontextmanager
async def serve_app(app):
    """Serves an aiohttp app on a free loopback port in the running event loop; yields its URL."""
    from aiohttp import web

    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    finally:
        await runner.cleanup()


class AppThread:
    """An aiohttp app on a free loopback port, served by its own event loop in a daemon thread (as
    `agentboost jobs serve` runs one); ``url``, and ``stop()`` when done."""

    def __init__(self, app):
        import asyncio

        from aiohttp import web

        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.run_until_complete(self.runner.cleanup())


def length_reward(task, episode):
    """A reward for the training tests (``reward.name=helpers:length_reward``): continuous, so no
    group is ever all-equal and every smoke step updates the policy."""
    return -len(episode.final_answer or "") / 100.0


def broken_reward(task, episode):
    """A reward that cannot score anything (``reward.name=helpers:broken_reward``): every episode errors."""
    raise RuntimeError("this reward is broken")


def nan_reward(task, episode):
    """A reward whose every value is NaN (``reward.name=helpers:nan_reward``): every episode errors."""
    return float("nan")


def vllm_python_or_skip() -> str:
    """The vLLM engine's interpreter (.venv-vllm, ``bash setup.sh --vllm``). Without it the test
    skips, and fails instead under CI=true: CI installs the engine, so its absence there is a
    broken setup, not a skip."""
    import pytest

    from agentboost.sampling.vllm_server import INSTALL_HINT, find_vllm_python

    python = find_vllm_python()
    if python is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true but the vLLM engine is not installed: {INSTALL_HINT}")
        pytest.skip(f"the vLLM engine is not installed: {INSTALL_HINT}")
    return python


def recording_factory(model, tools, system_prompt):
    """An agent factory for the tests (``agent.factory=helpers:recording_factory``): a plain Strands
    Agent, each build recorded as a file in ``$AGENTBOOST_TEST_FACTORY_DIR``."""
    import os
    import uuid

    from strands import Agent
    from strands.agent.conversation_manager import NullConversationManager

    if os.environ.get("AGENTBOOST_TEST_FACTORY_DIR"):
        Path(os.environ["AGENTBOOST_TEST_FACTORY_DIR"], uuid.uuid4().hex).write_text(str(len(tools)))
    return Agent(model=model, tools=tools, system_prompt=system_prompt, callback_handler=None,
                 conversation_manager=NullConversationManager())


def mentions_answer_reward(task, episode):
    """A binary reward for serving tests (``reward.name=helpers:mentions_answer_reward``): 1 when
    the final answer mentions any number, so a short greedy answer succeeds on some tasks and
    fails on others."""
    import re

    return 1.0 if re.search(r"\d", episode.final_answer or "") else 0.0
