"""Code tasks: HumanEval through `agentboost score`, the code reward, the test_code tool in a real
Strands episode, and `agentboost stats`."""

import asyncio
import json
from functools import partial

import pyarrow.parquet as pq
import pytest
from helpers import answer_episode as answer
from helpers import cli, qwen_call, tool_result_texts

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.episodes.record import write_episodes
from agentboost.rewards.code import code_reward
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler

tool_call = partial(qwen_call, "test_code")


@pytest.fixture(scope="module")
def humaneval(tmp_path_factory):
    d = tmp_path_factory.mktemp("humaneval")
    r = cli("data", "prepare", "humaneval", "--out", str(d), timeout=600)
    assert r.returncode == 0, r.stderr
    assert "read 164, kept 164, rejected 0" in r.stdout
    return d, pq.read_table(d / "test.parquet").to_pylist()


def write_answers(path, rows, body):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({"task_id": r["task_id"], "answer": f"```python\n{body(r)}\n```"}) + "\n")


def test_all_humaneval_canonical_solutions_pass(humaneval, tmp_path):
    d, rows = humaneval
    assert len(rows) == 164
    write_answers(tmp_path / "a.jsonl", rows, lambda r: r["starter_code"] + json.loads(r["metadata"])["canonical_solution"])
    r = cli("score", "--reward", "code", "--tasks", str(d / "test.parquet"), "--answers", str(tmp_path / "a.jsonl"),
            "--results", str(tmp_path / "results.jsonl"), timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "passed=164 total=164"
    assert "tests run: 164; passed 164" in r.stdout
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 164 and all(x["score"] == 1.0 for x in results)
    assert results[0]["metadata"]["tests"][0]["verdict"] == "passed" and results[0]["metadata"]["test_verdicts"] == {"passed": 1}


@pytest.mark.slow
def test_broken_humaneval_solutions_fail(humaneval, tmp_path):
    d, rows = humaneval
    broken = {
        "returns_none": lambda r: r["starter_code"] + "    return None\n",
        "raises": lambda r: r["starter_code"] + "    raise RuntimeError('no')\n",
        "off_by_one": lambda r: r["starter_code"] + json.loads(r["metadata"])["canonical_solution"]
        + f"\n_orig = {r['fn_name']}\ndef {r['fn_name']}(*a, **k):\n    out = _orig(*a, **k)\n"
          "    return out + 1 if isinstance(out, (int, float)) and not isinstance(out, bool) else None\n",
    }
    for name, body in broken.items():
        write_answers(tmp_path / f"{name}.jsonl", rows, body)
        r = cli("score", "--reward", "code", "--tasks", str(d / "test.parquet"), "--answers", str(tmp_path / f"{name}.jsonl"),
                timeout=600)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == "passed=0 total=164", (name, r.stdout[-300:])
        counts = next(line for line in r.stdout.splitlines() if line.startswith("tests run: 164;"))
        assert "passed" not in counts and ("wrong_output" in counts or "runtime_error" in counts), counts


def code_task(**kw):
    task = {"task_id": "sum", "question": "Read two integers and print their sum.",
            "tests": {"public": [{"kind": "stdio", "input": "1 2\n", "output": "3\n"}],
                      "hidden": [{"kind": "stdio", "input": "5 7\n", "output": "12\n"},
                                 {"kind": "stdio", "input": "-1 1\n", "output": "0\n"}]}}
    task.update(kw)
    return task


GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
HALF = "```python\na, b = map(int, input().split())\nprint(a + b if a > 0 else 99)\n```"


def test_code_reward_modes():
    assert code_reward(code_task(), answer(GOOD)).score == 1.0
    r = code_reward(code_task(), answer(HALF))
    assert r.score == 0.0 and r.metadata["verdict"] == "wrong_output" and r.metadata["passed"] == 1
    assert code_reward(code_task(), answer(HALF), partial_credit=True).score == 0.5
    r = code_reward(code_task(), answer("I don't know"), no_code_penalty=-0.2)
    assert r.score == -0.2 and r.metadata["verdict"] == "no_code"
    # public examples are graded only when the task says so
    only_public_wrong = "```python\na, b = map(int, input().split())\nprint(a + b if (a, b) != (1, 2) else 0)\n```"
    assert code_reward(code_task(), answer(only_public_wrong)).score == 1.0
    assert code_reward(code_task(grade_public=True), answer(only_public_wrong)).score == 0.0
    assert code_reward(code_task(grade_public=True, shown_public_example=True), answer(only_public_wrong)).score == 1.0
    slow = "```python\nwhile True:\n    pass\n```"
    r = code_reward(code_task(time_limit_s=1), answer(slow))
    assert r.score == 0.0 and r.metadata["verdict"] == "timeout"


def test_call_based_tests_with_a_leetcode_class():
    task = {"task_id": "two", "fn_name": "twoSum", "tests": json.dumps({"public": [], "hidden": [
        {"kind": "call", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
        {"kind": "call", "args": [[3, 2, 4], 6], "expected": [1, 2]}]})}
    code = ("```python\nclass Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
            "        for i, n in enumerate(nums):\n            if target - n in seen:\n                return [seen[target - n], i]\n"
            "            seen[n] = i\n```")
    assert code_reward(task, answer(code)).score == 1.0
    assert code_reward(task, answer(code.replace("[seen[target - n], i]", "[i, seen[target - n]]"))).score == 0.0


def run_code_agent(tok, script, task):
    spec = StrandsAgentSpec(tools=["agentboost.tools.strands_code_tool:test_code"], agent_type="code",
                        system_prompt="Solve the problem in Python.")
    return asyncio.run(run_episode(spec, task, ScriptedSampler(script, tok), ChatRenderer(tok),
                                   SamplingParams(max_new_tokens=300), env=StrandsEnv(reward="code")))


def test_code_tool_in_an_episode(qwen3_tokenizer):
    # code in a fenced block of the same message, tool called without arguments
    ep = run_code_agent(qwen3_tokenizer, [GOOD + "\n" + tool_call({}), "Done.\n" + GOOD], code_task())
    assert ep.status == "ok", ep.error
    assert tool_result_texts(ep)[0].startswith("STATUS: VALIDATION_SUCCESS")
    assert ep.tool_calls[0].outcome == "verified" and ep.reward == 1.0
    # code as the argument, wrong on the public example
    wrong = "a, b = map(int, input().split())\nprint(a - b)"
    ep = run_code_agent(qwen3_tokenizer, [tool_call({"code": wrong}), "I give up."], code_task())
    text = tool_result_texts(ep)[0]
    assert text.startswith("STATUS: TOOL_ERROR\nwrong output on example 1 of 1")
    assert "input '1 2': expected '3', got '-1'" in text
    assert ep.tool_calls[0].outcome == "wrong_output" and ep.reward == 0.0
    # no public examples: compiled only
    ep = run_code_agent(qwen3_tokenizer, [tool_call({"code": "print(1)"}), "ok"],
                        code_task(tests={"public": [], "hidden": [{"kind": "stdio", "input": "", "output": "1"}]}))
    text = tool_result_texts(ep)[0]
    assert text.startswith("STATUS: NO_VALIDATION") and ep.tool_calls[0].outcome == "no_validation"
    ep = run_code_agent(qwen3_tokenizer, [tool_call({"code": "def f(:"}), "ok"], code_task())
    assert ep.tool_calls[0].outcome == "runtime_error"


def test_stats_tables(qwen3_tokenizer, tmp_path):
    eps = [
        run_code_agent(qwen3_tokenizer, [GOOD + "\n" + tool_call({}), GOOD], code_task()),
        run_code_agent(qwen3_tokenizer, [tool_call({"code": "print(0)"}), "no idea"], code_task()),
        run_code_agent(qwen3_tokenizer, [GOOD], code_task()),
    ]
    write_episodes(tmp_path / "e.jsonl", eps)
    r = cli("stats", str(tmp_path / "e.jsonl"), timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for row, n in (("no code submitted", 1), ("submitted without testing", 1), ("submitted after testing", 1),
                   ("successful tests", 1), ("wrong output", 1)):
        line = next(line for line in out.splitlines() if row in line)
        assert f"│ {n} " in line or f" {n} │" in line, line
