"""The rLLM path against a real rLLM@1fc3c4b and its veRL fork, from the suite's own interpreter.

rLLM's veRL fork is a veRL of its own (0.3.1.dev, transformers 4.57) where .venv has veRL 0.9.1, so
the two live in separate environments: ``bash setup.sh --rllm`` builds .venv-rllm (from
``../shared/upstream``, or the sources ``--rllm=PATH`` names). Run from .venv with that
environment present (CI: ``.ci/run``), this file runs each of ``helpers.RLLM_ENV_TESTS`` there, one
pytest each, and requires every test in it to pass: none may skip. conftest.py collects this file
only then, and those files only where they run directly (so nothing is collected twice, and nothing
skips for want of rLLM in the wrong interpreter)."""

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, RLLM_ENV_TESTS, rllm_python

HERE = Path(__file__).resolve().parent


def _outcomes(summary: str) -> dict[str, int]:
    """pytest's last line (``7 passed, 5 warnings in 71.25s``) as {outcome: count}."""
    return {k.rstrip("s"): int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)", summary)}


def test_outcomes_reads_pytests_summary_line():
    assert _outcomes("7 passed, 5 warnings in 71.25s (0:01:11)") == {"passed": 7}
    assert _outcomes("1 failed, 5 passed, 1 skipped, 2 errors in 9.1s") == {"failed": 1, "passed": 5, "skipped": 1, "error": 2}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("name", RLLM_ENV_TESTS)
def test_the_rllm_tests_pass_in_the_rllm_environment(name):
    python = rllm_python()
    # the inner pytest is a plain run, not an xdist worker; it inherits this worker's one OpenMP thread
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST") and k != "PYTEST_CURRENT_TEST"}
    r = subprocess.run([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(HERE / name)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    lines = [line for line in out.splitlines() if re.search(r"\d+ (passed|failed|skipped|errors?) .*in [0-9.]+s", line)]
    assert r.returncode == 0 and lines, out[-8000:]
    outcomes = _outcomes(lines[-1])
    assert set(outcomes) == {"passed"} and outcomes["passed"] >= 1, out[-8000:]
    print(f"{python} -m pytest {name}:", lines[-1])
    print(out[out.rfind("slowest"):][:2500])
