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
                          env={"PATH": os.environ["PATH"], "PYTHON": sys.executable, "HOME": "/home/user",
                               "DRY_RUN": "1", **env})


def dry_run_refused(script: str | Path, *args: str, **env: str) -> tuple[list[str], str]:
    """A DRY_RUN whose overrides veRL's config refuses: exit 1; its printed overrides and stderr."""
    res = _dry_run(script, args, env)
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    return res.stdout.splitlines(), res.stderr


def dry_run(script: str | Path, *args: str, **env: str) -> list[str]:
    """The lines an example's shell script prints with DRY_RUN=1 (its command, or its veRL overrides),
    run with a minimal environment plus ``env`` and this interpreter as the scripts' ``PYTHON`` (the
    veRL scripts validate their overrides with veRL's own config in DRY_RUN); a non-zero exit raises."""
    res = _dry_run(script, args, env)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.splitlines()


def printed_overrides(script: str | Path, *args: str, **env: str) -> list[str]:
    """What an example script's DRY_RUN=1 prints (its overrides, one a line), without the validation
    it then runs in a Python of its own (``PYTHON=true`` makes that step a no-op): for tests that
    compose the overrides here anyway; ``dry_run`` runs the script's own validation."""
    res = _dry_run(script, args, {**env, "PYTHON": "true"})
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


def fresh_shell_env(venv: str = ".venv", **more: str) -> dict[str, str]:
    """This environment as a new shell has it (no virtual environment active or on PATH), plus
    ``more``: the launch scripts then run this checkout's environment for their path, ``venv``
    (examples/python.sh), as the docs' commands do after ``bash setup.sh``. Where this interpreter
    is not that one, it is named (PYTHON), as a user of another environment would name it."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHON", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                  if p and not Path(p, "activate").exists())
    if Path(sys.executable).parent != REPO / venv / "bin":
        env["PYTHON"] = sys.executable
    return {**env, **more}


def run_logged(cmd: list[str], env: dict, cwd: str | Path, timeout: float) -> tuple[int, list[tuple[float, str]]]:
    """Runs ``cmd`` (stdout and stderr merged) and notes when each line of its log came, in seconds
    from the start: a long run's log with the times that say where its minutes went. A run past
    ``timeout`` is killed, and that is an assertion error quoting the end of its log."""
    import time

    proc = subprocess.Popen(cmd, env=env, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    t0, lines = time.monotonic(), []
    try:
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
        code = proc.wait()
    finally:
        timer.cancel()
    tail = "\n".join(line for _, line in lines[-60:])
    assert time.monotonic() - t0 < timeout, f"{cmd[:3]} ran past {timeout} s and was killed:\n{tail}"
    return code, lines


def when(lines: list[tuple[float, str]], pattern: str) -> float | None:
    """The time of the first line of a ``run_logged`` log that matches ``pattern``."""
    import re

    return next((t for t, line in lines if re.search(pattern, line)), None)


RAY_PROCESS = ("raylet", "gcs_server", "ray::", "site-packages/ray/")  # a local Ray cluster's processes


class RayWatch:
    """The processes of one run that starts a local Ray cluster, and only of it (another test's
    cluster may run beside it): the run's environment carries ``marker`` (``env()``), which Ray's
    processes inherit from the driver that starts the cluster, and a thread notes every Ray process
    that carries it. ``seen``: the Ray command lines noted (so a test knows the watch saw the
    cluster at all); ``left()``: whatever of the run still runs (Ray's or not)."""

    def __init__(self):
        import uuid

        self.marker = f"agentboost-ray-run-{uuid.uuid4().hex}"
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def env(self) -> dict[str, str]:
        return {"AGENTBOOST_TEST_RAY_RUN": self.marker}

    def _running(self) -> dict[int, str]:
        from agentboost.testing.processes import processes_with_marker

        found = {}
        for pid in processes_with_marker(self.marker):
            try:
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
        return found

    def _watch(self) -> None:
        while not self._stop.wait(2.0):
            self.seen.update(a for a in self._running().values() if any(name in a for name in RAY_PROCESS))

    def __enter__(self) -> "RayWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def left(self, timeout: float = 30.0) -> list[str]:
        import time

        deadline = time.monotonic() + timeout
        while (left := list(self._running().values())) and time.monotonic() < deadline:
            time.sleep(1)
        return left


@contextlib.contextmanager
def one_ray_smoke_at_a_time():
    """Held while a CPU smoke runs a Ray cluster (veRL's main_ppo, rLLM's AgentTrainer): two at once,
    on two xdist workers, once left the second with "Total available GPUs 0" (a cluster's one logical
    GPU taken by the other run); they wait for each other instead. A file lock: it is released if
    the holder dies."""
    import fcntl
    import tempfile

    with open(Path(tempfile.gettempdir()) / "agentboost-ray-smoke.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared_by_workers(directory: Path, start, stop):
    """A server that the processes of one test run share (its xdist workers, or the one process
    without xdist): the first to ask starts it (``start()`` -> (handle, url)) and owns it; the
    others get its URL. Every user registers its pid in ``directory``; at its end the owner waits
    until no other user is left (or alive) before ``stop(handle)``, so no worker loses the server
    in the middle of a test, and a worker that needs it only after that starts its own."""
    import fcntl
    import time

    directory.mkdir(parents=True, exist_ok=True)
    users, url_file, owner_file = directory / "users", directory / "url", directory / "owner"
    users.mkdir(exist_ok=True)
    me, handle = os.getpid(), None

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False

    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held while the first user starts it: the others wait for it
        try:
            if url_file.exists() and alive(int(owner_file.read_text())):
                url = url_file.read_text()
            else:
                handle, url = start()
                owner_file.write_text(str(me))
                url_file.write_text(url)
            (users / str(me)).touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        try:
            yield url
        finally:
            (users / str(me)).unlink(missing_ok=True)
            while handle is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    if not [p for p in users.iterdir() if alive(int(p.name))]:
                        url_file.unlink()  # from here on, a new user starts a server of its own
                        break
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
                time.sleep(1)
    if handle is not None:
        stop(handle)


def length_reward(task, episode):
    """A reward for the training tests (``reward.name=helpers:length_reward``): continuous, so no
    group is ever all-equal and every smoke step updates the policy."""
    return -len(episode.final_answer or "") / 100.0


def constant_reward(task, episode):
    """A reward that is the same for every episode (``reward.name=helpers:constant_reward``): every
    group is all-equal, so no step trains on anything (the parity gate's recomputed sample is tested with it)."""
    return 0.5


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


# The rLLM path's tests against a real rLLM@1fc3c4b and its veRL fork. The fork is a veRL of its own,
# so they live in an environment of their own (.venv-rllm, `bash setup.sh --rllm`): run from there
# they run directly; run from another interpreter with that environment present, conftest.py leaves
# them out and integrations/rllm/test_rllm_environment.py runs each file there (nothing skips).
RLLM_ENV_TESTS = ("test_rllm_integration.py", "test_rllm_cpu_smoke.py")
RLLM_INSTALL = "bash setup.sh --rllm (rLLM and its veRL fork from ../shared/upstream; docs/rllm.md)"


def rllm_here() -> bool:
    """Whether this interpreter imports rLLM (and so its veRL fork)."""
    import importlib.util

    return importlib.util.find_spec("rllm") is not None


def rllm_python() -> str | None:
    """The rLLM path's interpreter: ``$AGENTBOOST_RLLM_PYTHON``, else this checkout's .venv-rllm."""
    named = os.environ.get("AGENTBOOST_RLLM_PYTHON")
    if named:
        return named
    venv = REPO / ".venv-rllm" / "bin" / "python"
    return str(venv) if venv.is_file() else None


def rllm_or_skip() -> None:
    """For the tests that need rLLM in this interpreter: skip naming the way to run them, and fail
    under CI=true, which builds the rLLM environment (its absence there is a broken setup)."""
    import pytest

    if rllm_here():
        return
    if rllm_python():
        why = (f"rLLM is installed in {rllm_python()}, not in this interpreter: run this file with it "
               "(the whole suite runs it there: integrations/rllm/test_rllm_environment.py)")
    else:
        why = f"rLLM@1fc3c4b and its veRL fork are not installed: {RLLM_INSTALL}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but {why}")
    pytest.skip(why)


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
