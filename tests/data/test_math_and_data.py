"""The math reward's equivalence and the dataset preparers' row handling."""

import json
import re

import pyarrow.parquet as pq
import pytest

from agentboost.data.prepare import DataSourceError, PrepareOptions, prepare, starter_function_name
from agentboost.episodes.record import Episode
from agentboost.rewards.math import extract_answer, math_reward
from agentboost.sandbox.judge import run_tests


def ep(text):
    return Episode(episode_id="e", task_id="t", group_id="g", final_answer=text)


@pytest.mark.parametrize("gold, text, ok", [
    ("\\frac{1}{2}", "So the answer is $\\boxed{0.5}$.", True),
    ("0.5", "\\boxed{\\frac{1}{2}}", True),
    ("\\frac{3}{4}", "We get \\boxed{\\dfrac{3}{4}}", True),
    ("2\\sqrt{2}", "\\boxed{\\sqrt{8}}", True),
    ("x^2 + 1", "\\boxed{1 + x^2}", True),
    ("72", "Natalia sold 48 + 24 = 72 clips.\n#### 72", True),
    ("1000", "The final answer is 1,000.", True),
    ("18", "The answer is 18 dollars.", True),
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}", False),
    ("42", "I think it is 41.", False),
    ("7", "no idea", False),
])
def test_math_equivalence(gold, text, ok):
    r = math_reward({"task_id": "t", "answer": gold}, ep(text))
    assert r.score == (1.0 if ok else 0.0), (gold, text, r.metadata)


def test_extraction_order_and_metadata():
    assert extract_answer("answer is 3, so \\boxed{4}") == ("4", "boxed")
    assert extract_answer("\\boxed{\\frac{a}{b^{2}}}")[0] == "\\frac{a}{b^{2}}"
    assert extract_answer("Final answer: 12") == ("12", "pattern")
    assert extract_answer("x = 5 then y = 7") == ("7", "last_number")
    r = math_reward({"task_id": "t", "answer": "5"}, ep("\\boxed{5}"))
    assert r.metadata == {"extracted": "5", "extracted_by": "boxed", "expected": "5"}
    with pytest.raises(KeyError, match="no 'answer'"):
        math_reward({"task_id": "t"}, ep("1"))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(d, split):
    return pq.read_table(d / f"{split}.parquet").to_pylist()


def test_deepcoder_rows_good_and_bad(tmp_path):
    rows = [
        {"problem": "Sum two numbers.", "tests": json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})},
        {"problem": "Call based.", "tests": json.dumps({"inputs": [[1, 2], [5, 5]], "outputs": [[3], [10]], "fn_name": "add"}),
         "starter_code": "def add(a, b):\n    pass"},
        {"problem": "LCB functional.", "tests": json.dumps([{"input": "[1, 2]\n3", "output": "[1, 2, 3]", "testtype": "functional"}]),
         "metadata": json.dumps({"func_name": "append"})},
        {"problem": "PrimeIntellect stdin.", "tests": json.dumps([{"input": "5\n", "output": "25\n", "type": "stdin_stdout"},
                                                                  {"input": "3\n", "output": "9\n", "type": "stdin_stdout"}])},
        {"problem": "", "tests": "{}"},
        {"problem": "Broken tests", "tests": "{not json"},
        {"problem": "No tests", "tests": "[]"},
        {"problem": "Functional without name", "tests": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])},
        {"problem": "See <image>", "tests": json.dumps({"inputs": ["1"], "outputs": ["1"]})},
        {"problem": "Weird", "tests": json.dumps([{"input": "1", "output": "1", "testtype": "carrier-pigeon"}])},
        {"problem": "Uneven", "tests": json.dumps({"inputs": ["1", "2"], "outputs": ["1"]})},
    ]
    src = write_jsonl(tmp_path / "deepcoder.jsonl", rows)
    report = prepare("deepcoder", tmp_path / "out", source=str(src), opts=PrepareOptions(test_fraction=0.0, show_example=True))
    assert (report.read, report.kept) == (11, 5)
    assert report.rejected == {"no problem text": 1, "tests is not valid JSON": 1, "no tests": 1,
                               "functional tests without a function name (no metadata.func_name, "
                               "no starter code naming one)": 1,
                               "unknown test type 'carrier-pigeon'": 1,
                               "taco tests: inputs and outputs must be lists of the same length": 1}
    assert report.with_image == 1 and report.layouts == {"taco": 3, "lcb": 1, "primeintellect": 1}
    tasks = read(tmp_path / "out", "train")
    assert read(tmp_path / "out", "test") == []
    by_q = {t["question"].split("\n")[0]: t for t in tasks}
    s = json.loads(by_q["Sum two numbers."]["tests"])
    assert s["public"] == [{"kind": "stdio", "input": "1 2\n", "output": "3\n"}] and len(s["hidden"]) == 1
    assert "Example input:" in by_q["Sum two numbers."]["question"] and by_q["Sum two numbers."]["shown_public_example"]
    call = by_q["Call based."]
    assert call["fn_name"] == "add" and json.loads(call["tests"])["hidden"] == [{"kind": "call", "args": [5, 5], "expected": 10}]
    assert "def add(a, b)" in call["question"]
    lcb = json.loads(by_q["LCB functional."]["tests"])
    assert lcb["public"] == [] and lcb["hidden"] == [{"kind": "call", "args": [[1, 2], 3], "expected": [1, 2, 3]}]
    # the converted tests run: a correct solution passes the call-based ones
    assert all(o.passed for o in run_tests("def add(a, b):\n    return a + b\n",
                                           json.loads(call["tests"])["hidden"], fn_name="add"))
    # a statement with an image is kept and flagged, or rejected with --drop-images
    assert by_q["See <image>"]["has_image"] and not by_q["Sum two numbers."]["has_image"]
    report = prepare("deepcoder", tmp_path / "noimg", source=str(src),
                     opts=PrepareOptions(test_fraction=0.0, drop_images=True))
    assert report.kept == 4 and report.rejected["the problem has an image (--drop-images)"] == 1


def test_upstream_code_layouts(tmp_path):
    """Rows as rLLM's DeepCoder preparation and CodeContests publish them."""
    rllm_tests = [{"input": "[2, 7, 11, 15]\n9", "output": "[0, 1]", "testtype": "functional",
                   "metadata": {"func_name": "twoSum"}},
                  {"input": "[3, 2, 4]\n6", "output": "[1, 2]", "testtype": "functional", "metadata": {"func_name": "twoSum"}}]
    rllm_stdin = [{"input": "3\n", "output": "9\n", "testtype": "stdin_stdout", "metadata": {"func_name": None}},
                  {"input": "4\n", "output": "16\n", "testtype": "stdin_stdout", "metadata": {"func_name": None}}]
    cc_desc = ("Print the square of n.\n\nNote\n\nThe picture <image> illustrates the first example.")
    rows = [
        # rLLM: tests in ground_truth, func_name inside each test's metadata, the row's metadata empty
        {"question": "Two sum (LeetCode).", "ground_truth": json.dumps(rllm_tests), "data_source": "livecodebench",
         "uid": "deepcoder_0", "starter_code": "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n",
         "metadata": json.dumps({})},
        {"question": "Square (stdin).", "ground_truth": json.dumps(rllm_stdin), "uid": "deepcoder_1", "metadata": "{}"},
        # CodeContests: tests with input/output lists
        {"problem": "Square, CodeContests tests.", "tests": json.dumps({"input": ["2\n", "5\n"], "output": ["4\n", "25\n"]})},
        # CodeContests as published: description and public/private/generated tests
        {"name": "1000_A. Square", "description": cc_desc,
         "public_tests": {"input": ["1\n"], "output": ["1\n"]}, "private_tests": {"input": ["6\n"], "output": ["36\n"]},
         "generated_tests": {"input": ["7\n", "8\n"], "output": ["49\n", "64\n"]}},
    ]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    report = prepare("deepcoder", tmp_path / "out", source=str(src), opts=PrepareOptions(test_fraction=0.0))
    assert (report.read, report.kept, dict(report.rejected)) == (4, 4, {})
    assert report.layouts == {"rllm": 2, "codecontests": 2} and report.with_image == 1
    summary = "\n".join(report.summary("deepcoder", PrepareOptions()))
    assert "layouts: rllm 2, codecontests 2" in summary or "layouts: codecontests 2, rllm 2" in summary
    assert "with an image: 1 kept, flagged has_image" in summary
    assert "public tests: the first 1 of each problem (--public-tests)" in summary and "grade_public" in summary
    tasks = {t["task_id"]: t for t in read(tmp_path / "out", "train")}
    two = tasks["deepcoder_0"]
    assert two["fn_name"] == "twoSum" and json.loads(two["tests"]) == {
        "public": [{"kind": "call", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]}],
        "hidden": [{"kind": "call", "args": [[3, 2, 4], 6], "expected": [1, 2]}]}
    assert tasks["deepcoder_1"]["fn_name"] is None and json.loads(tasks["deepcoder_1"]["tests"])["hidden"] == [
        {"kind": "stdio", "input": "4\n", "output": "16\n"}]
    cc = tasks["1000_A. Square"]
    t = json.loads(cc["tests"])
    assert [x["input"] for x in t["public"] + t["hidden"]] == ["1\n", "6\n", "7\n", "8\n"] and cc["has_image"]
    # the prepared tasks grade: the starter code completed verbatim, and the stdin squares
    from agentboost.episodes.record import Episode
    from agentboost.rewards.code import code_reward

    def ep(code):
        return Episode(episode_id="e", task_id="t", group_id="g", final_answer=f"```python\n{code}```")

    body = ("        seen = {}\n        for i, n in enumerate(nums):\n            if target - n in seen:\n"
            "                return [seen[target - n], i]\n            seen[n] = i\n")
    assert code_reward(two, ep(two["starter_code"] + body)).score == 1.0
    for tid in ("deepcoder_1", "deepcoder-2", "1000_A. Square"):
        assert code_reward(tasks[tid], ep("n = int(input())\nprint(n * n)\n")).score == 1.0, tid


# LiveCodeBench functional rows (LeetCode problems) as a DeepCoder / rLLM export has them: half carry
# metadata.func_name, half only the starter code that names the method
LCB_PROBLEMS = [
    ("count-pairs", "Return the number of pairs i < j with nums[i] + nums[j] < target.",
     "class Solution:\n    def countPairs(self, nums: List[int], target: int) -> int:\n        ",
     "        return sum(1 for j in range(len(nums)) for i in range(j) if nums[i] + nums[j] < target)\n",
     [([[-1, 1, 2, 3, 1], 2], 3), ([[-6, 2, 5, -2, -7, -1, 3], -2], 10), ([[1], 5], 0)]),
    ("longest-alternating", "Return the length of the longest alternating subarray, or -1.",
     "# helper classes are commented out in LeetCode's starters\n# def helper(self): ...\n"
     "class Solution:\n    def alternatingSubarray(self, nums: List[int]) -> int:\n        ",
     "        best = -1\n        for i in range(len(nums)):\n            d = 1\n"
     "            for j in range(i + 1, len(nums)):\n                if nums[j] - nums[j - 1] != d:\n"
     "                    break\n                best = max(best, j - i + 1)\n                d = -d\n"
     "        return best\n",
     [([[2, 3, 4, 3, 4]], 4), ([[4, 5, 6]], 2), ([[1, 1]], -1)]),
    ("max-sum-pair", "Return the maximum sum of a pair whose largest digits are equal, or -1.",
     "class Solution:\n    def maxSum(self, nums: List[int]) -> int:\n",
     "        best, top = -1, {}\n        for n in nums:\n            d = max(str(n))\n"
     "            if d in top:\n                best = max(best, top[d] + n)\n"
     "            top[d] = max(top.get(d, 0), n)\n        return best\n",
     [([[51, 71, 17, 24, 42]], 88), ([[1, 2, 3, 4]], -1)]),
]


def lcb_row(task_id, statement, starter, cases, *, named, where):
    """A LiveCodeBench functional row; ``where`` the starter code is: its column, or only inside the
    statement in LiveCodeBench's prompt format (as rLLM's rows keep the question)."""
    fn = re.search(r"^class Solution:\n    def (\w+)\(self", starter, re.M).group(1)
    tests = [{"input": "\n".join(json.dumps(a) for a in args), "output": json.dumps(out), "testtype": "functional",
              "metadata": {"func_name": fn if named else None}} for args, out in cases]
    row = {"uid": f"{task_id}-{'named' if named else where}", "ground_truth": json.dumps(tests),
           "data_source": "livecodebench", "metadata": json.dumps({"func_name": fn} if named else {})}
    if where == "column":
        row.update(question=statement, starter_code=starter)
    else:
        row["question"] = (statement + "\n\n### Format: You will use the following starter code to write the "
                           "solution to the problem and enclose your code within delimiters.\n```python\n"
                           + starter + "\n```\n\n### Answer: (use the provided format with backticks)\n")
    return row


def test_livecodebench_functional_rows_without_func_name_take_it_from_the_starter_code(tmp_path):
    rows = []
    for task_id, statement, starter, _, cases in LCB_PROBLEMS:
        rows += [lcb_row(task_id, statement, starter, cases, named=True, where="column"),
                 lcb_row(task_id, statement, starter, cases, named=False, where="column"),
                 lcb_row(task_id, statement, starter, cases, named=False, where="statement")]
    # what still names no function: no starter code at all, or a class with two public methods
    no_starter = lcb_row("x", "Sum.", "class Solution:\n    def f(self, a): ...", [([1], 1)], named=False, where="column")
    no_starter.pop("starter_code")
    two = lcb_row("y", "Two.", "class Solution:\n    def f(self, a): ...", [([1], 1)], named=False, where="column")
    two["starter_code"] = "class Solution:\n    def f(self, a):\n        pass\n    def g(self, a):\n        pass\n"
    src = write_jsonl(tmp_path / "lcb.jsonl", rows + [no_starter, two])
    report = prepare("livecodebench", tmp_path / "out", source=str(src), opts=PrepareOptions(test_fraction=0.0))
    assert (report.read, report.kept) == (11, 9)
    assert report.rejected == {"functional tests without a function name (no metadata.func_name, "
                               "no starter code naming one)": 2}
    tasks = {t["task_id"]: t for t in read(tmp_path / "out", "train")}
    for task_id, _, starter, body, _ in LCB_PROBLEMS:
        named = tasks[f"{task_id}-named"]
        for where in ("column", "statement"):
            t = tasks[f"{task_id}-{where}"]
            # the same function and the same tests as the row that carries the name
            assert t["fn_name"] == named["fn_name"] and json.loads(t["tests"]) == json.loads(named["tests"]), where
            # and the reference solution (the starter code completed) passes every test, public ones included
            tests = json.loads(t["tests"])
            outcomes = run_tests(starter.rstrip() + "\n" + body, tests["public"] + tests["hidden"], fn_name=t["fn_name"])
            assert outcomes and all(o.passed for o in outcomes), (task_id, where, [o.detail for o in outcomes])
            # a wrong solution fails them: the tests are real
            wrong = run_tests(starter.rstrip() + "\n        return 0\n", tests["public"] + tests["hidden"],
                              fn_name=t["fn_name"])
            assert not all(o.passed for o in wrong), task_id
    assert [tasks[f"{p[0]}-named"]["fn_name"] for p in LCB_PROBLEMS] == ["countPairs", "alternatingSubarray", "maxSum"]


@pytest.mark.parametrize("starter, name", [
    ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ", "twoSum"),
    ("# Definition for a binary tree node.\n# class TreeNode:\n#     def __init__(self, val=0):\n"
     "class Solution:\n    def maxDepth(self, root: Optional[TreeNode]) -> int:\n", "maxDepth"),
    ("class Solution:\n    def __init__(self):\n        pass\n    def solve(self, s: str) -> str:\n"
     "        def inner(x):\n            return x\n", "solve"),
    ("def add(a, b):\n    pass\n", "add"),
    ("class Solution:\n    def f(self): pass\n    def g(self): pass\n", None),
    ("class MinStack:\n    def push(self, x): pass\n", None),
    ("", None),
])
def test_starter_function_name(starter, name):
    assert starter_function_name(starter) == name


def test_math_rows_good_and_bad(tmp_path):
    rows = [
        {"problem": "1+1?", "answer": "2"},
        {"question": "GSM8K style", "answer": "She has 3 + 4 = 7 apples.\n#### 7"},
        {"problem": "MATH style", "solution": "Thus $x = \\boxed{\\frac{1}{2}}$."},
        {"problem": "no answer"},
        {"answer": "5"},
        {"problem": "solution without a final answer", "solution": "We compute things."},
        "not an object",
    ]
    src = write_jsonl(tmp_path / "math.jsonl", rows)
    report = prepare("math", tmp_path / "out", source=str(src), opts=PrepareOptions(test_fraction=0.5, seed=3))
    assert (report.read, report.kept, report.train, report.test) == (7, 3, 1, 2)
    assert sum(report.rejected.values()) == 4
    tasks = read(tmp_path / "out", "train") + read(tmp_path / "out", "test")
    assert sorted(t["answer"] for t in tasks) == ["2", "7", "\\frac{1}{2}"]
    assert all("\\boxed" in t["question"] for t in tasks)


def test_humaneval_bad_rows_and_unknown_sources(tmp_path):
    rows = [{"task_id": "X/0", "prompt": "def f(x):\n    \"\"\"doc\"\"\"\n", "test": "def check(c):\n    assert c(1) == 1\n",
             "entry_point": "f", "canonical_solution": "    return x\n"},
            {"task_id": "X/1", "prompt": "def g():\n", "test": "", "entry_point": "g"},
            {"task_id": "X/2", "prompt": "def h():\n", "test": "def check(c): pass", "entry_point": "nothere"}]
    src = write_jsonl(tmp_path / "he.jsonl", rows)
    report = prepare("humaneval", tmp_path / "out", source=str(src))
    assert report.kept == 1 and report.rejected == {"missing field 'test'": 1, "the prompt does not define 'nothere'": 1}
    with pytest.raises(DataSourceError, match="does not exist"):
        prepare("math", tmp_path / "o", source=str(tmp_path / "missing.jsonl"))
    with pytest.raises(DataSourceError, match="unknown dataset"):
        prepare("imagenet", tmp_path / "o", source=str(src))
    with pytest.raises(DataSourceError, match="needs --source"):
        prepare("math", tmp_path / "o")
