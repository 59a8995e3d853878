"""Every command in ``docs/`` runs: each ```bash block of ``docs/*.md`` runs as one script
(``bash -e``), from the repository root, with the project's environment first on PATH
(``agentboost``, ``python``), and must exit 0 without printing a traceback or an ERROR line."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def commands(path: Path) -> list[str]:
    """The page's bash blocks, each one script."""
    return [block for block in _BLOCK.findall(path.read_text(encoding="utf-8")) if block.strip()]


def test_docs_have_commands():
    assert DOCS and all(commands(p) for p in DOCS), "every page of docs/ shows at least one command"


@pytest.mark.slow
@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_command_in_docs_runs(page, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in commands(page):
        r = subprocess.run(["bash", "-e", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, (page.name, command, r.stderr[-3000:])
        out = r.stdout + r.stderr
        assert "Traceback (most recent call last)" not in out and not re.search(r"^ERROR", out, re.M), (command, out[-3000:])
