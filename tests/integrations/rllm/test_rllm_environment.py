"""The rLLM path against a real rLLM@1fc3c4b and its veRL fork, from the suite's own interpreter.

rLLM's veRL fork is a veRL of its own (0.3.1.dev, transformers 4.57) where .venv has veRL 0.9.1, so
the two live in separate environments: ``bash setup.sh --rllm`` builds .venv-rllm (from
``../shared/upstream``, or the sources ``--rllm=PATH`` names). Run from .venv with that
environment present (CI: ``.ci/run``), this file runs each of ``helpers.RLLM_ENV_TESTS`` there, one
pytest each, and requires every test in it to pass: none may skip. conftest.py collects this file
only then, and those files only where they run directly (so nothing is collected twice, and nothing
skips for want of rLLM in the wrong interpreter)."""

import contextlib
import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, RLLM_ENV_TESTS, one_ray_smoke_at_a_time, rllm_python

HERE = Path(__file__).resolve().parent


def outcomes(output: str) -> dict[str, int]:
    """pytest's summary, its last line (``12 passed, 5 warnings in 100.94s (0:01:40)``), as
    {outcome: count}; {} where there is none."""
    lines = [line for line in output.splitlines()
             if re.search(r"\d+ (passed|failed|skipped|errors?)\b.* in [0-9.]+s", line)]
    if not lines:
        return {}
    return {k.rstrip("s"): int(n) for n, k in
            re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)", lines[-1])}


def profile_lines(output: str) -> list[str]:
    """The lines of pytest's "profiles" section (tests/conftest.py) in a run's output."""
    if "= profiles =" not in output:
        return []
    lines = output.split("= profiles =", 1)[1].splitlines()[1:]
    return [line for line in itertools.takewhile(lambda x: not x.startswith("="), lines) if "::" in line]


def test_outcomes_reads_pytests_summary_line():
    assert outcomes("...\n12 passed, 5 warnings in 100.94s (0:01:40)\n") == {"passed": 12}
    assert outcomes("x\n1 failed, 5 passed, 1 skipped, 2 errors in 9.1s\n") == {
        "failed": 1, "passed": 5, "skipped": 1, "error": 2}
    assert outcomes("7 passed in 3.2s\n") == {"passed": 7} and outcomes("no summary\n") == {}
    run = ("==== slowest ====\n1.0s call a\n===== profiles =====\ntests/x.py::t: step 1 done 9 s\n"
           "================== short test summary ==\n1 passed in 3.0s\n")
    assert profile_lines(run) == ["tests/x.py::t: step 1 done 9 s"] and profile_lines("1 passed in 3s") == []


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("name", RLLM_ENV_TESTS)
def test_the_rllm_tests_pass_in_the_rllm_environment(name, record_property):
    python = rllm_python()
    # the inner pytest is a plain run, not an xdist worker; it inherits this worker's one OpenMP thread
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST") and k != "PYTEST_CURRENT_TEST"}
    with one_ray_smoke_at_a_time() if "smoke" in name else contextlib.nullcontext():
        r = subprocess.run([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(HERE / name)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    for line in profile_lines(out):
        record_property("profile", line)  # the inner run's: where the smoke's minutes went
    found = outcomes(out)
    assert r.returncode == 0 and set(found) == {"passed"}, out[-8000:]  # none failed, none skipped
    print(f"{python} -m pytest {name}: {found['passed']} passed")
    print(out[out.rfind("slowest"):][:2500])
