"""Every command in ``docs/`` runs: each ```bash block of ``docs/*.md`` runs as one script
(``bash -e``), from the repository root, with the project's environment first on PATH
(``agentboost``, ``python``), and must exit 0 without printing a traceback or an ERROR line.
A block that cannot run here is fenced ```bash gpu-only or ```bash not-run and says why on its
first line; those are listed, never silently passed over."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest
from helpers import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_NOT_RUN = re.compile(r"```bash (gpu-only|not-run)\n(.*?)```", re.DOTALL)
STAND_IN = "examples/hosted/local_chat_server.py --url-file"  # a page's stand-in for a hosted chat model


def commands(path: Path) -> list[str]:
    """The page's bash blocks, each one script."""
    return [block for block in _BLOCK.findall(path.read_text(encoding="utf-8")) if block.strip()]


def test_blocks_that_do_not_run_say_why():
    held = [(p.name, kind, block.splitlines()[0]) for p in DOCS for kind, block in _NOT_RUN.findall(p.read_text())]
    for page, kind, first in held:
        assert first.startswith("# not run by the docs test: "), (page, kind, first)
    print("not run here:", held)
    assert len(held) <= 5, "blocks that do not run are the exception: run new ones, or justify them"


def test_every_page_is_in_the_readme_index():
    # (reference pages, the layout or the status table, show no commands: an earlier version of this
    # test wanted a command on every page, which only holds for the task pages)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert DOCS and all(f"](docs/{p.name})" in readme for p in DOCS), [p.name for p in DOCS if f"](docs/{p.name})" not in readme]
    assert sum(bool(commands(p)) for p in DOCS) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_command_in_docs_runs(page, request):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # the pages' `mktemp -d` lands in a directory removed when the page is done (a served model copy and
    # its run are ~0.5 GB a page: left in /tmp, every suite run added gigabytes there); a short path of
    # its own, not pytest's deep tmp_path, since vLLM puts its ZMQ sockets there (108-byte path limit)
    scratch = tempfile.mkdtemp(prefix="doc")
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    env["TMPDIR"] = scratch
    if ".venv-rllm/bin/python" in page.read_text(encoding="utf-8"):
        from helpers import rllm_or_skip, rllm_python

        if not rllm_python():
            rllm_or_skip()  # the rLLM path's environment (bash setup.sh --rllm): skip without it, fail under CI=true
    if STAND_IN in page.read_text(encoding="utf-8"):
        # the page's stand-in for a hosted chat model is the suite's shared chat server (conftest.py's
        # chat_server, started once for the run): the stand-in writes its URL instead of starting
        # another, and the page's key variable holds the key that server demands
        from helpers import CHAT_KEY

        env.update(AGENTBOOST_CHAT_SERVER_URL=request.getfixturevalue("chat_server").url, LOCAL_CHAT_KEY=CHAT_KEY)
    for command in commands(page):
        r = _run_block(command, env)
        assert r.returncode == 0, (page.name, command, r.stderr[-3000:])
        out = r.stdout + r.stderr
        assert "Traceback (most recent call last)" not in out and not re.search(r"^ERROR", out, re.M), (command, out[-3000:])


def _run_block(command: str, env: dict) -> subprocess.CompletedProcess:
    """One block in a session of its own: a block that runs past its time, or leaves a background
    job behind (a server started with ``&``), has its whole process group ended, so nothing it
    started outlives the test (a killed bash does not take its background jobs with it)."""
    proc = subprocess.Popen(["bash", "-e", "-c", command], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        _end_group(proc.pid)
        proc.communicate()
        raise
    finally:
        _end_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _end_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
