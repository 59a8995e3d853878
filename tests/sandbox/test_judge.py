"""The judge as the field grades: one sandboxed harness per problem, per-test verdicts and limits,
a harness that survives (or is restarted after) hostile tests, the import preamble for call-based
tasks, float tolerance, and the same verdicts as one sandbox per test."""

import json

import pytest
from helpers import answer_episode

from agentboost.rewards.code import code_reward
from agentboost.sandbox.judge import (
    DEFAULT_TOLERANCE,
    Tolerance,
    outputs_match,
    run_tests,
    run_tests_per_process,
    tolerance,
    values_match,
)
from agentboost.sandbox.runner import SandboxLimits, protections

LIMITS = SandboxLimits(cpu_s=1, wall_s=3, memory_mb=256, processes=16)
FULL = protections()["drop_user"] and protections()["network_namespace"]


def answer(code):
    return answer_episode(f"```python\n{code}\n```")


def square_tests(n):
    return [{"kind": "stdio", "input": f"{i}\n", "output": f"{i * i}\n"} for i in range(n)]


SQUARE = "n = int(input())\nprint(n * n)\n"


def test_starter_code_completed_verbatim_passes():
    # the starter code LeetCode shows, completed without adding imports: List comes from the preamble
    starter = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    body = ("        seen = {}\n        for i, n in enumerate(nums):\n            if target - n in seen:\n"
            "                return [seen[target - n], i]\n            seen[n] = i\n")
    task = {"task_id": "two-sum", "fn_name": "twoSum", "starter_code": starter, "tests": {"public": [], "hidden": [
        {"kind": "call", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
        {"kind": "call", "args": [[3, 2, 4], 6], "expected": [1, 2]},
        {"kind": "call", "args": [[3, 3], 6], "expected": [0, 1]}]}}
    r = code_reward(task, answer(starter + body))
    assert r.score == 1.0, r.metadata
    assert r.metadata["test_verdicts"] == {"passed": 3} and [t["verdict"] for t in r.metadata["tests"]] == ["passed"] * 3
    # the other names the common judges provide, used without importing them
    uses = ("class Solution:\n    def f(self, xs: List[int]) -> Optional[int]:\n"
            "        h = list(xs); heapify(h); c = Counter(xs); d = deque(sorted(xs)); q = defaultdict(int)\n"
            "        return heappop(h) + len(c) + d[-1] + bisect_left(d, d[-1]) + reduce(lambda a, b: a + b, xs)"
            " + floor(sqrt(16)) + len(list(permutations([1, 2]))) + (1 if lru_cache else 0) + q[0]"
            " + pow(2, 10, 1000)\n")
    # heappop 1 + 3 distinct + max 5 + index 2 + sum 9 + 4 + 2 + 1 + 0 + builtin pow 24 (math.pow takes 2 args)
    task = {"task_id": "names", "fn_name": "f", "tests": {"public": [], "hidden": [
        {"kind": "call", "args": [[5, 1, 3]], "expected": 1 + 3 + 5 + 2 + 9 + 4 + 2 + 1 + 0 + 24}]}}
    assert code_reward(task, answer(uses)).score == 1.0


def test_stdin_programs_run_as_written():
    # no preamble for stdin programs
    o = run_tests("print(List)\n", square_tests(1), limits=LIMITS)
    assert o[0].verdict == "runtime_error" and "NameError" in o[0].detail
    # __name__ is __main__, sys.stdin / input / open(0) read the test's input, sys.exit(0) is a clean exit
    code = ("import sys\nif __name__ == '__main__':\n    n = int(sys.stdin.readline())\n"
            "    print(n * n)\n    sys.exit(0)\nprint('never')\n")
    assert [o.verdict for o in run_tests(code, square_tests(3), limits=LIMITS)] == ["passed"] * 3
    code = "n = int(open(0).read())\nimport threading\nt = threading.Thread(target=lambda: print(n * n))\nt.start()\n"
    assert [o.verdict for o in run_tests(code, square_tests(3), limits=LIMITS)] == ["passed"] * 3


def test_a_top_level_return_ends_a_stdin_program_as_in_apps():
    # APPS's harness runs a program's body in a function: a top-level return ends the program
    o = run_tests("n = int(input())\nprint(n * n)\nreturn\n", square_tests(3), limits=LIMITS)
    assert [t.verdict for t in o] == ["passed"] * 3, [t.detail for t in o]
    # the code after the return would print a wrong answer: the return ends it first
    code = "n = int(input())\nprint(n * n)\nreturn\nprint('wrong')\n"
    assert [t.verdict for t in run_tests(code, square_tests(3), limits=LIMITS)] == ["passed"] * 3
    # a return inside an if (and a for, a try with finally) at module level ends the program there;
    # the names stay module globals: a function rebinds one with `global`, another reads it
    code = ("import sys\nfrom math import *\ncount: int = 0\n"
            "def bump():\n    global count\n    count += 1\n"
            "def square():\n    return count * count\n"
            "n = int(sys.stdin.readline())\n"
            "for _ in range(n):\n    bump()\n"
            "if n == 2:\n    try:\n        print(square())\n        return\n    finally:\n        sys.stdout.flush()\n"
            "print(int(sqrt(square())) ** 2)\n")
    assert [t.verdict for t in run_tests(code, square_tests(4), limits=LIMITS)] == ["passed"] * 4
    # without the return the same program printing twice is wrong: the return is what ends it
    broken = code.replace("        return\n", "        pass\n")
    assert [t.verdict for t in run_tests(broken, square_tests(4), limits=LIMITS)] == [
        "passed", "passed", "wrong_output", "passed"]
    # a multi-line string keeps its text (the rewrite is by syntax tree, not by indenting lines)
    code = 's = """a\n  b"""\nn = int(input())\nif n >= 0:\n    print(n * n if s == "a\\n  b" else -1)\n    return\n'
    assert [t.verdict for t in run_tests(code, square_tests(2), limits=LIMITS)] == ["passed"] * 2
    # a return not taken: the program goes on, and its error is its runtime error
    o = run_tests("n = int(input())\nprint(n * n)\nif n == 0:\n    return\nraise ValueError(n)\n", square_tests(2),
                  limits=LIMITS)
    assert o[0].verdict == "passed" and o[1].verdict == "runtime_error" and "ValueError: 1" in o[1].detail
    # what cannot be a function body keeps its SyntaxError; so does a call-based or script solution
    for bad in ("x = 1\nyield x\nreturn\n", "n = 1\nfrom math import *\nreturn\n"):
        o = run_tests(bad, square_tests(1), limits=LIMITS)
        assert o[0].verdict == "runtime_error" and "SyntaxError" in o[0].detail, o[0].detail
    o = run_tests("def f(x):\n    return x\nreturn\n", [{"kind": "call", "args": [1], "expected": 1}], fn_name="f",
                  limits=LIMITS)
    assert o[0].verdict == "runtime_error" and "SyntaxError" in o[0].detail


def test_a_program_whose_returns_are_inside_functions_runs_as_before():
    # the rewrite applies only when the module does not compile because of a top-level return:
    # module-level names, locals() at top level and a star import after code behave as a module's
    code = ("n = int(input())\nfrom math import *\ndef sq(k):\n    return k * k\n"
            "print(sq(n) if 'n' in locals() and floor(1.5) == 1 else -1)\n")
    assert [t.verdict for t in run_tests(code, square_tests(3), limits=LIMITS)] == ["passed"] * 3


def test_wrong_only_on_the_last_of_15_tests_fails():
    tests = square_tests(15)
    code = "n = int(input())\nprint(n * n if n != 14 else 0)\n"
    task = {"task_id": "sq", "tests": {"public": [], "hidden": tests}}
    r = code_reward(task, answer(code))
    assert r.score == 0.0 and r.metadata["verdict"] == "wrong_output" and r.metadata["passed"] == 14
    assert r.metadata["test_verdicts"] == {"passed": 14, "wrong_output": 1}
    assert r.metadata["tests"][14]["verdict"] == "wrong_output" and "expected '196', got '0'" in r.metadata["tests"][14]["detail"]
    r = code_reward(task, answer(code), partial_credit=True)
    assert r.score == pytest.approx(14 / 15)


def test_code_stops_at_the_first_failure_code_partial_runs_all():
    tests = square_tests(15)
    code = "n = int(input())\nprint(n * n if n != 2 else -1)\n"
    stop = run_tests(code, tests, limits=LIMITS, stop_on_failure=True)
    assert [o.verdict for o in stop] == ["passed", "passed", "wrong_output"]
    every = run_tests(code, tests, limits=LIMITS)
    assert len(every) == 15 and sum(o.passed for o in every) == 14


def test_per_test_limits_and_verdicts():
    # test 1 loops, test 2 floods stdout, test 3 allocates too much, test 4 raises: each is its own verdict
    code = ("import sys\nn = int(input())\n"
            "if n == 1:\n    while True:\n        pass\n"
            "if n == 2:\n    sys.stdout.write('x' * 50_000)\n"
            "if n == 3:\n    x = bytearray(2 * 1024**3)\n"
            "if n == 4:\n    raise ValueError('four')\n"
            "print(n * n)\n")
    limits = SandboxLimits(cpu_s=1, wall_s=3, memory_mb=256, processes=16, output_bytes=10_000)
    out = run_tests(code, square_tests(6), limits=limits)
    assert [o.verdict for o in out] == ["passed", "timeout", "output_limit", "memory_limit", "runtime_error", "passed"]
    assert out[1].time_s < LIMITS.wall_s + 1 and "ValueError: four" in out[4].detail


def test_an_input_larger_than_the_file_size_limit_reaches_the_program():
    # the harness writes each input to a file; the test's own files stay under file_bytes
    limits = SandboxLimits(cpu_s=2, wall_s=5, memory_mb=512, processes=16, file_bytes=1_000_000)
    big = "7 " * 1_000_000  # 2 MB
    code = ("import sys\ndata = sys.stdin.read().split()\nprint(len(data), sum(map(int, data)))\n"
            "if len(data) == 1:\n    open('f', 'w').write('x' * 2_000_000)\n")
    tests = [{"kind": "stdio", "input": big, "output": "1000000 7000000\n"},
             {"kind": "stdio", "input": "5", "output": "1 5\n"}]
    out = run_tests(code, tests, limits=limits)
    assert [o.verdict for o in out] == ["passed", "runtime_error"], [o.detail for o in out]


def test_a_test_that_kills_the_harness_does_not_lose_the_other_verdicts():
    # tests 1..4 end their process in four ways; test 5 kills the harness itself (the test
    # process's parent); test 7 stops it. Every other test must still get its own verdict.
    code = ("import os, signal, ctypes\nn = int(input())\n"
            "if n == 1:\n    print(1)\n    os._exit(0)\n"
            "if n == 2:\n    ctypes.string_at(0)\n"
            "if n == 3:\n    x = [0] * (10**9)\n"
            "if n == 4:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "if n == 5:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
            "if n == 7:\n    os.kill(os.getppid(), signal.SIGSTOP)\n"
            "print(n * n)\n")
    out = run_tests(code, square_tests(10), limits=LIMITS)
    verdicts = [o.verdict for o in out]
    # os._exit(0) skips flushing stdout, as in a plain `python -I` run with its output to a pipe
    assert verdicts[0] == "passed" and verdicts[1] == "wrong_output" and "got ''" in out[1].detail
    assert verdicts[2] == "runtime_error"  # segfault
    assert verdicts[3] == "memory_limit"
    assert verdicts[4] == "runtime_error"  # killed itself
    assert verdicts[5] == "runtime_error" and "harness ended" in out[5].detail
    assert verdicts[6] == "passed"  # in a new harness
    assert verdicts[7] == "timeout" and "stopped answering" in out[7].detail
    assert verdicts[8:] == ["passed", "passed"]
    # as code grades: the first failure ends it, nothing after it runs
    assert [o.verdict for o in run_tests(code, square_tests(10), limits=LIMITS, stop_on_failure=True)] == [
        "passed", "wrong_output"]


@pytest.mark.skipif(not FULL, reason="the channel is out of reach only with the sandbox's own uid (Linux, root)")
def test_the_harness_channel_is_out_of_the_tests_reach():
    # test 1 writes into every descriptor of the harness it can open. The harness is not dumpable:
    # its descriptors cannot even be listed (before, with the judge's pipes out of reach, the test
    # only garbled its own output); every test passes and the harness serves all four
    code = ("import os\nn = int(input())\nopened = []\n"
            "if n == 1:\n    d = '/proc/%d/fd' % os.getppid()\n"
            "    try:\n        names = os.listdir(d)\n    except PermissionError:\n        names = []\n"
            "    for name in names:\n"
            "        try:\n            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_NONBLOCK)\n"
            "        except OSError:\n            continue\n"
            "        opened.append(os.readlink(os.path.join(d, name)))\n"
            "        os.write(fd, b'garbage\\n')\n"
            "print(n * n, *[p for p in opened if 'pipe' in p])\n")
    out = run_tests(code, square_tests(4), limits=LIMITS)
    assert [o.verdict for o in out] == ["passed"] * 4, [o.detail for o in out]


def test_expected_outputs_never_enter_the_sandbox():
    # the program looks everywhere it can for the answer of the test it is in
    code = ("import os, sys\nsys.stdin.read()\nseen = []\n"
            "for root in ('.', '..', '/proc/self/fd', '/proc/%d/fd' % os.getppid(), os.environ.get('TMPDIR', '.')):\n"
            "    try:\n        names = os.listdir(root)\n    except OSError:\n        continue\n"
            "    for n in names:\n        p = os.path.join(root, n)\n"
            "        try:\n            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
            "            seen.append(os.pread(fd, 100000, 0) if os.path.isfile(p) else os.read(fd, 100000))\n"
            "        except OSError:\n            pass\n"
            "secret = 'SECRET-' + 'ANSWER-7'  # not in this source as one string\n"
            "print(secret if any(secret.encode() in s for s in seen) else 'not found', len(seen) > 3)\n")
    tests = [{"kind": "stdio", "input": "1\n", "output": "SECRET-ANSWER-7\n"}] * 2
    out = run_tests(code, tests, limits=LIMITS)
    assert [o.verdict for o in out] == ["wrong_output"] * 2 and "got 'not found True'" in out[0].detail


def test_each_test_starts_in_an_empty_directory():
    code = "import os\ninput()\nprint(sorted(os.listdir('.')))\nopen('left.txt', 'w').write('x')\n"
    tests = [{"kind": "stdio", "input": "1\n", "output": "[]\n"}] * 3
    assert [o.verdict for o in run_tests(code, tests, limits=LIMITS)] == ["passed"] * 3


@pytest.mark.skipif(not FULL, reason="the uid sweep needs the sandbox's own uid (Linux, root)")
def test_what_a_test_leaves_running_is_killed_before_the_next():
    # test 0 starts a process outside its process group; test 1 looks for it among the processes of
    # its uid (the harness's own processes are there too: the zygote and the problem processes)
    code = ("import os, subprocess, sys, time\nn = int(input())\n"
            "if n == 0:\n    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'LEFT-BEHIND'],"
            " start_new_session=True)\n    time.sleep(0.2)\n"
            "mine = [p for p in os.listdir('/proc') if p.isdigit() and os.stat('/proc/' + p).st_uid == os.getuid()]\n"
            "alive = [p for p in mine if open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z']\n"
            "print(sum(b'LEFT-BEHIND' in open(f'/proc/{p}/cmdline', 'rb').read() for p in alive))\n")
    tests = [{"kind": "stdio", "input": "0\n", "output": "1\n"},  # the sleeper runs
             {"kind": "stdio", "input": "1\n", "output": "0\n"}]  # the sleeper is gone
    out = run_tests(code, tests, limits=LIMITS)
    assert [o.verdict for o in out] == ["passed", "passed"], [o.detail for o in out]


def test_same_verdicts_as_one_sandbox_per_test():
    programs = {
        "right": SQUARE,
        "wrong": "n = int(input())\nprint(n * n + (n == 3))\n",
        "raises": "n = int(input())\nassert n != 2\nprint(n * n)\n",
        "loops": "n = int(input())\nwhile n == 1:\n    pass\nprint(n * n)\n",
        "syntax": "def f(:\n",
        "exit3": "import sys\nn = int(input())\nprint(n * n)\nsys.exit(3 if n == 2 else 0)\n",
        "stderr": "import sys\nn = int(input())\nprint('note', file=sys.stderr)\nprint(n * n)\n",
    }
    for name, code in programs.items():
        for stop in (True, False):
            old = run_tests_per_process(code, square_tests(5), limits=LIMITS, stop_on_failure=stop)
            new = run_tests(code, square_tests(5), limits=LIMITS, stop_on_failure=stop)
            assert [o.verdict for o in old] == [o.verdict for o in new], (name, stop)
            assert [o.detail for o in old if o.verdict == "wrong_output"] == [
                o.detail for o in new if o.verdict == "wrong_output"]
    call_tests = [{"kind": "call", "args": [i], "expected": i * 2} for i in range(4)]
    for code in ("def dbl(x):\n    return x * 2\n", "def dbl(x):\n    return x * 2 if x != 3 else 0\n",
                 "def dbl(x):\n    return 1 / (x - 1)\n", "def other(x):\n    return x\n",
                 "import sys\ndef dbl(x):\n    sys.exit(0)\n", "def dbl(x):\n    return float(x * 2) + 1e-12\n"):
        old = run_tests_per_process(code, call_tests, fn_name="dbl", limits=LIMITS)
        new = run_tests(code, call_tests, fn_name="dbl", limits=LIMITS)
        assert [o.verdict for o in old] == [o.verdict for o in new], code
    script = [{"kind": "script", "code": "assert f(2) == 4\n"}]
    for code in ("def f(x):\n    return x * x\n", "def f(x):\n    return x\n", "def f(x:\n"):
        assert ([o.verdict for o in run_tests_per_process(code, script, limits=LIMITS)]
                == [o.verdict for o in run_tests(code, script, limits=LIMITS)])


def test_tolerance_values_and_comparison():
    assert tolerance(None) == DEFAULT_TOLERANCE and tolerance("exact") is None
    assert tolerance(1e-3) == Tolerance(1e-3, 1e-3) and tolerance('{"abs": 1e-9}') == Tolerance(1e-9, 0.0)
    assert tolerance('"exact"') is None
    for bad in ("loose", -1, {"abs": "x"}, {"tol": 1}, True):
        with pytest.raises(ValueError, match="float_tol"):
            tolerance(bad)
    # the default: real numbers within 1e-6, integers exact, words exact
    assert outputs_match("2.50\n", "2.5")
    assert outputs_match("0.333333333", "0.3333333")
    assert not outputs_match("0.3333", "0.3334")
    assert not outputs_match("1000000", "1000001") and not outputs_match("007", "7")
    assert not outputs_match("yes", "Yes")
    assert outputs_match("  1 2\n", "1   2  \n\n")
    # exact: text, trailing whitespace ignored
    assert not outputs_match("2.50", "2.5", "exact") and outputs_match("2.50", "2.50  ", "exact")
    # absolute only / relative only
    assert outputs_match("1000.0", "1000.5", {"rel": 1e-3}) and not outputs_match("1000.0", "1000.5", {"abs": 1e-3})
    assert outputs_match("0.000001", "0.000002", {"abs": 1e-6})
    assert values_match(0.1 + 0.2, 0.3) and not values_match(0.1 + 0.2, 0.3, "exact")
    assert values_match([1, [2.0000000001]], [1, [2.0]]) and not values_match({"a": 1}, {"a": 2})


def test_a_stated_tolerance_is_honoured(tmp_path):
    import pyarrow.parquet as pq

    from agentboost.data.prepare import PrepareOptions, prepare

    statement = ("Print the area of the circle of radius r. Your answer will be considered correct if its "
                 "absolute or relative error does not exceed $10^{-3}$.")
    rows = [{"problem": statement, "tests": json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["3.14159265\n", "12.56637061\n"]})}]
    src = tmp_path / "circle.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prepare("deepcoder", tmp_path / "out", source=str(src), opts=PrepareOptions(test_fraction=0.0))
    task = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()[0]
    assert json.loads(task["float_tol"]) == {"abs": 1e-3, "rel": 1e-3}
    task["grade_public"] = True
    rough = "r = int(input())\nprint(round(3.1416 * r * r, 4))\n"  # within 1e-3, not within the default 1e-6
    assert code_reward(task, answer(rough)).score == 1.0
    assert code_reward({**task, "float_tol": None}, answer(rough)).score == 0.0
    assert code_reward(task, answer("r = int(input())\nprint(3 * r * r)\n")).score == 0.0
    # the preparer option sets it for every row
    prepare("deepcoder", tmp_path / "exact", source=str(src), opts=PrepareOptions(test_fraction=0.0, float_tol="exact"))
    task = pq.read_table(tmp_path / "exact" / "train.parquet").to_pylist()[0]
    assert task["float_tol"] == "exact"
    exact_print = "r = int(input())\nprint(f'{3.14159265 * r * r:.8f}')\n"
    assert code_reward({**task, "grade_public": True}, answer(exact_print)).score == 1.0
    assert code_reward({**task, "grade_public": True}, answer(rough)).score == 0.0


@pytest.mark.parametrize("text, tol", [
    ("Your answer is considered correct if its absolute or relative error does not exceed 10^{-6}.",
     {"abs": 1e-6, "rel": 1e-6}),
    ("The answer will be accepted if the relative or absolute error doesn't exceed 10^-9", {"abs": 1e-9, "rel": 1e-9}),
    ("Your output is considered correct if the absolute or relative error from the judge's output is at most "
     "10^{\u22126}.", {"abs": 1e-6, "rel": 1e-6}),
    ("Print with an absolute error of at most 1e-4.", {"abs": 1e-4, "rel": 0.0}),
    ("A relative error not exceeding 0.000001 is allowed.", {"abs": 0.0, "rel": 1e-6}),
    ("Answers within 10^-5 of the actual answer will be accepted.", {"abs": 1e-5, "rel": 0.0}),
    ("absolute or relative error does not exceed 10 - 6.", {"abs": 1e-6, "rel": 1e-6}),
    ("if its absolute or relative error does not exceed 2 \\cdot 10^{-7}", {"abs": 2e-7, "rel": 2e-7}),
    ("Print the sum of the numbers. Note that 10^9 + 7 is prime.", None),
    ("Compute the absolute value of the difference of 10^{-6} and x.", None),
])
def test_stated_tolerance_phrasings(text, tol):
    from agentboost.data.prepare import stated_tolerance

    got = stated_tolerance(text)
    if tol is None:
        assert got is None
    else:
        assert got is not None and got == pytest.approx(tol), got


def test_an_expected_integer_is_matched_exactly_whatever_the_answer_writes():
    # a tolerance is for real numbers: an expected integer matched within one let 1000001.0 pass for
    # 1000000, and an answer off by 100 on a 9-digit integer pass, printed or returned
    assert not outputs_match("1000000", "1000001.0") and not outputs_match("123456789", "123456889.0")
    assert not outputs_match("3", "3.0000000001") and not outputs_match("3", "3.0000000001", {"rel": 0.1})
    assert outputs_match("1000000", "1000000.0") and outputs_match("1000000", "1e6") and outputs_match("-0", "0.0")
    big = "123456789012345678901234567890"
    assert outputs_match(big, big + ".0") and not outputs_match(big, "1.2345678901234567e29")
    assert not values_match(1000000, 1000001.0) and not values_match(123456789, 123456889.0)
    assert values_match(1000000, 1000000.0) and values_match([1, 2.0], [1.0, 2])
    assert not values_match(10**18 + 1, 1e18) and not values_match(1, True) and not values_match(0.0, False)
    assert values_match(True, True) and not values_match([1], [True])
    # an expected real number keeps its tolerance; a zero tolerance compares decimal values exactly
    assert outputs_match("2.0", "2") and outputs_match("0.3333333", "0.33333333")
    assert outputs_match("2.5", "2.50", {"abs": 0, "rel": 0}) and not outputs_match("0.1", "0.10000000000000001",
                                                                                    {"abs": 0, "rel": 0})
    # through the judge: printed and returned
    code = "n = int(input())\nprint(float(n * 1000 + (n == 2)))\n"
    tests = [{"kind": "stdio", "input": f"{i}\n", "output": f"{i * 1000}\n"} for i in range(1, 4)]
    assert [o.verdict for o in run_tests(code, tests, limits=LIMITS)] == ["passed", "wrong_output", "passed"]
    calls = [{"kind": "call", "args": [123456789], "expected": 123456789}]
    assert not run_tests("def f(x):\n    return x + 100.0\n", calls, fn_name="f", limits=LIMITS)[0].passed
    assert run_tests("def f(x):\n    return float(x)\n", calls, fn_name="f", limits=LIMITS)[0].passed


def test_each_dataset_states_its_judges_tolerance(tmp_path):
    import pyarrow.parquet as pq

    from agentboost.data.prepare import DATASET_TOLERANCE, PrepareOptions, prepare

    # no statement states one: the dataset's own judge's (APPS/TACO np.allclose; LiveCodeBench: decimals)
    rows = [{"problem": "Print n squared.", "tests": json.dumps({"inputs": ["2\n", "3\n"], "outputs": ["4\n", "9\n"]})}]
    src = tmp_path / "sq.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("deepcoder", "livecodebench"):
        report = prepare(name, tmp_path / name, source=str(src), opts=PrepareOptions(test_fraction=0.0))
        task = pq.read_table(tmp_path / name / "train.parquet").to_pylist()[0]
        assert task["float_tol"] == DATASET_TOLERANCE[name]
        assert f"the dataset's judge's {DATASET_TOLERANCE[name]} for the rest" in "\n".join(report.summary(name, PrepareOptions()))
    assert json.loads(DATASET_TOLERANCE["deepcoder"]) == {"abs": 1e-8, "rel": 1e-5}
    assert tolerance(DATASET_TOLERANCE["livecodebench"]) == Tolerance(0.0, 0.0)


def test_a_programs_names_never_replace_the_checks_builtins():
    # HumanEval/2's check compares with abs(); a program that defines abs() and a wrong
    # truncate_number passes where the check runs in the program's namespace (HumanEval's own
    # harness), and must fail here
    check = ("def check(candidate):\n    assert candidate(3.5) == 0.5\n"
             "    assert abs(candidate(1.33) - 0.33) < 1e-6\n    assert abs(candidate(123.456) - 0.456) < 1e-6\n")
    cheat = "def abs(x):\n    return 0\n\ndef truncate_number(number):\n    return 0.5\n"
    test = [{"kind": "script", "code": check + "\ncheck(truncate_number)\n"}]
    import subprocess
    import sys

    one_namespace = subprocess.run([sys.executable, "-c", cheat + "\n" + test[0]["code"]], capture_output=True)
    assert one_namespace.returncode == 0  # the hole, where the check shares the program's names
    o = run_tests(cheat, test, fn_name="truncate_number", limits=LIMITS)[0]
    assert o.verdict == "wrong_output", o
    # the honest solution passes; a check that uses a helper the program defines still reaches it
    assert run_tests("def truncate_number(number):\n    return number % 1.0\n", test, fn_name="truncate_number",
                     limits=LIMITS)[0].passed
    helper_check = [{"kind": "script", "code": "def check(c):\n    assert c(encode('ab')) == 'ab'\n\ncheck(decode)\n"}]
    program = "def encode(s):\n    return s[::-1]\n\ndef decode(s):\n    return s[::-1]\n"
    assert run_tests(program, helper_check, fn_name="decode", limits=LIMITS)[0].passed
    # the entry point is the program's even when it has a builtin's name
    named = [{"kind": "script", "code": "def check(c):\n    assert c([3, 4]) == 'seven'\n\ncheck(sum)\n"}]
    assert run_tests("def sum(xs):\n    return 'seven'\n", named, fn_name="sum", limits=LIMITS)[0].passed
