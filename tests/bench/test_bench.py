"""`agentboost bench`: the registry (every built-in recipe reads, a user's registers in a few lines),
one-line errors (an unknown benchmark, a missing package, a malformed recipe), and real runs on CPU
with the embedded SmolLM2: BFCL simple (BFCL's checker), HumanEval (the code judge) and tau2 airline
(tau2's scoring) report accuracy with its 95% interval; a run resumes; rescoring recomputes from the
stored episodes without inference and says what changed."""

import json
import os
from pathlib import Path

import pytest

from helpers import REPO, cli

BUILTIN = {"humaneval", "tau2-airline", "tau2-retail", "tau2-telecom", "quickstart", "tool-use", "bfcl-simple",
           "bfcl-simple-java", "bfcl-simple-javascript", "bfcl-multiple", "bfcl-parallel", "bfcl-parallel-multiple",
           "bfcl-irrelevance", "bfcl-live-simple", "bfcl-live-multiple", "bfcl-live-parallel",
           "bfcl-live-parallel-multiple", "bfcl-live-irrelevance", "bfcl-live-relevance", "bfcl-multi-turn-base",
           "bfcl-multi-turn-miss-func", "bfcl-multi-turn-miss-param", "bfcl-multi-turn-long-context"}

RECIPE = """name: my-arithmetic
version: 1
licence: CC0-1.0
source: {file: tasks.jsonl}
config: config.yaml
scorer: {name: exact_answer}
protocol: {samples: 1, temperature: 0.0, max_new_tokens: 32}
sizes: {smoke: {tasks: 3}, full: {tasks: null}}
"""


def _user_recipe(tmp_path: Path, text: str = RECIPE, folder: str = "recipes") -> Path:
    d = tmp_path / folder
    d.mkdir(exist_ok=True)
    (d / "tasks.jsonl").write_text((REPO / "examples/quickstart/data/test.jsonl").read_text())
    (d / "config.yaml").write_text((REPO / "examples/quickstart/config.yaml").read_text())
    (d / "arith.bench.yaml").write_text(text)
    return d


def test_list_shows_every_registered_benchmark_with_version_and_source(tmp_path):
    r = cli("bench", "list", "--json", check=True)
    recipes = {x["name"]: x for x in json.loads(r.stdout)}
    assert set(recipes) == BUILTIN
    assert recipes["bfcl-simple"]["source"]["package"] == "bfcl-eval" and recipes["humaneval"]["licence"] == "MIT"
    env = {**os.environ, "AGENTBOOST_BENCHMARKS": str(_user_recipe(tmp_path))}
    r = cli("bench", "list", env=env, check=True)
    line = next(x for x in r.stdout.splitlines() if x.startswith("my-arithmetic"))
    assert line.split()[1] == "1" and "CC0-1.0" in line and "tasks.jsonl" in line


@pytest.mark.parametrize("case", ["unknown", "missing-package", "malformed", "bad-field", "clash"])
def test_bad_input_is_one_line_naming_what_to_do(tmp_path, case):
    d = _user_recipe(tmp_path)
    env = {**os.environ, "AGENTBOOST_BENCHMARKS": str(d)}
    if case == "unknown":
        r = cli("bench", "run", "no-such-bench", env=env)
        want = "unknown benchmark 'no-such-bench'; `agentboost bench list`"
    elif case == "missing-package":
        (d / "arith.bench.yaml").write_text(RECIPE.replace("source: {file: tasks.jsonl}", "source: {file: tasks.jsonl, "
                                      "package: not-a-real-pkg, module: not_a_real_pkg_xyz, install: pip install not-a-real-pkg}"))
        r = cli("bench", "run", "my-arithmetic", env=env)
        want = "benchmark my-arithmetic needs the package not-a-real-pkg, which is not installed: pip install not-a-real-pkg"
    elif case == "malformed":
        (d / "arith.bench.yaml").write_text(RECIPE.replace("version: 1\n", ""))
        r = cli("bench", "list", env=env)
        want = f"{d / 'arith.bench.yaml'}: recipe field 'version' is missing"
    elif case == "bad-field":
        (d / "arith.bench.yaml").write_text(RECIPE.replace("sizes: {smoke: {tasks: 3}", "sizes: {smoke: {tasks: -3}"))
        r = cli("bench", "run", str(d / "arith.bench.yaml"))
        want = "sizes.smoke.tasks: expected tasks or samples, an integer >= 1"
    else:
        (d / "arith.bench.yaml").write_text(RECIPE.replace("my-arithmetic", "humaneval"))
        r = cli("bench", "list", env=env)
        want = "benchmark 'humaneval' is already registered by"
    assert r.returncode == 2, r.stdout + r.stderr
    assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_bfcl_simple_runs_on_cpu_and_resumes(tmp_path):
    out = tmp_path / "bfcl"
    r = cli("bench", "run", "bfcl-simple", "--model", "smollm2-135m-instruct", "--max-tasks", "4", "--out", str(out),
            timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = _report(out)
    m = rep["model"]
    assert rep["benchmark"] == "bfcl-simple" and rep["scorer"]["version"].startswith("bfcl-eval ")
    assert m["episodes"] == 4 and m["tasks"] == 4 and 0 <= m["accuracy"] <= 1
    assert m["ci95"] is not None and m["ci95"][0] <= m["accuracy"] <= m["ci95"][1]
    assert "smoke size: 4 of 400 tasks" in rep["deviations"]
    assert "accuracy" in r.stdout and "95% CI" in r.stdout and "not the full protocol: smoke size" in r.stdout
    eps = [json.loads(x) for x in (out / "model_episodes.jsonl").read_text().splitlines()]
    assert len(eps) == 4 and all(e["reward_metadata"].get("scorer", "").startswith("bfcl-eval") for e in eps
                                 if e["status"] == "ok")
    again = cli("bench", "run", "bfcl-simple", "--model", "smollm2-135m-instruct", "--max-tasks", "4", "--out", str(out),
                timeout=900)
    assert again.returncode == 0 and "4 of 4 episodes already finished" in again.stdout, again.stdout + again.stderr
    assert len((out / "model_episodes.jsonl").read_text().splitlines()) == 4
    other = cli("bench", "run", "bfcl-simple", "--max-tasks", "5", "--out", str(out))
    assert other.returncode == 2 and "other arguments" in other.stderr


@pytest.mark.slow
def test_rescore_recomputes_from_the_stored_episodes_and_says_what_changed(tmp_path):
    d = _user_recipe(tmp_path)
    env = {**os.environ, "AGENTBOOST_BENCHMARKS": str(d)}
    out = tmp_path / "run"
    r = cli("bench", "run", "my-arithmetic", "--out", str(out), env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    before = _report(out)
    calls = [json.loads(x)["calls"] for x in (out / "model_episodes.jsonl").read_text().splitlines()]
    # a new scorer beside the config (as a user's reward.py): every episode that ran to an end scores 1
    d2 = _user_recipe(tmp_path, RECIPE.replace("scorer: {name: exact_answer}", "scorer: {name: always_one, version: 2}")
                      .replace("config: config.yaml", "config: config.yaml\noverrides: {reward.name: 'myreward:always_one'}"),
                      folder="v2")
    (d2 / "myreward.py").write_text("def always_one(task, episode):\n    return 1.0\n")
    r = cli("bench", "rescore", str(out), "--recipe", str(d2 / "arith.bench.yaml"), env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    after = _report(out)
    ok = [json.loads(x) for x in (out / "model_episodes.jsonl").read_text().splitlines()]
    assert [e["calls"] for e in ok] == calls  # no inference: the same sampled calls
    finished = [e for e in ok if e["status"] in ("ok", "truncated")]  # ran to an end: scored
    assert finished and all(e["reward"] == 1.0 for e in finished)
    flipped = after["rescored"]["changes"]["model"]["flipped"]
    assert flipped == sum(1 for e in finished) - round(before["model"]["accuracy"] * before["model"]["episodes"])
    assert f"{flipped} episodes changed outcome" in r.stdout and "always_one 2 (was exact_answer" in r.stdout
    assert list(out.glob("model_episodes.before-rescore-*.jsonl"))


@pytest.mark.slow
def test_humaneval_and_tau2_airline_run_on_cpu(tmp_path):
    # overrides right after the benchmark's name (argparse takes the positionals together)
    r = cli("bench", "run", "humaneval", "validation.max_new_tokens=96", "--max-tasks", "2", "--out", str(tmp_path / "he"),
            timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    he = _report(tmp_path / "he")
    assert he["model"]["episodes"] == 2 and he["scorer"]["name"] == "code" and he["model"]["accuracy"] is not None
    assert "override validation.max_new_tokens=96" in he["deviations"]
    r = cli("bench", "run", "tau2-airline",
            "env.conversation_options.user=scripted", "env.conversation_options.user_options={turns: 1}",
            "env.conversation_options.system_prompt=compact", "env.conversation_options.max_steps=6",
            "validation.max_new_tokens=24", "--max-tasks", "1", "--out", str(tmp_path / "tau2"), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    t = _report(tmp_path / "tau2")
    assert t["model"]["episodes"] == 1 and "tau2" in t["model"] and t["protocol"]["samples"] == 1
    ep = json.loads((tmp_path / "tau2" / "model_episodes.jsonl").read_text().splitlines()[0])
    assert ep["metadata"]["conversation"]["user"] == "scripted"
    if ep["status"] == "ok":  # scored by tau2's scoring, and said to be a proxy
        assert "training proxy" in ep["reward_metadata"]["protocol"]
