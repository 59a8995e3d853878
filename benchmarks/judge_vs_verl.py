"""agentboost's judge against veRL's (``verl.utils.reward_score.prime_code``, the judge rLLM and veRL
recipes grade LiveCodeBench, APPS and CodeContests with), like for like: the same problems, the
same correct solutions, the same tests, on the same machine, in one run, alternating rounds. Prints
the median and total seconds per problem for each, the ratio (agentboost / veRL: below 1.0 is
faster), and where agentboost's time goes (the sandbox and harness start, the harness's work per
problem and per test, the tests' own processes).

The set is generated here (no network, no dataset download): 119 problems, 714 tests, in the four
shapes users grade: APPS (stdin, one case per test, some accepted-style programs ending with a
top-level ``return``), CodeContests (stdin, ``t`` cases per test), LiveCodeBench and LeetCode
(functional: a ``Solution`` method called with arguments). Inputs are sized so a test runs for
milliseconds, as most published tests do. Every solution is correct: both judges must pass all.

veRL's judge is called as its reward manager calls it, ``compute_score(completion, test_cases)``
with the tests in the layout it reads ({"inputs", "outputs", "fn_name"}, a functional test's
arguments as JSON lines, LiveCodeBench's); ours as the ``code`` reward
calls it, ``run_tests(code, tests, fn_name, stop_on_failure=True)`` with the default limits, in the
isolating sandbox (bubblewrap root, PID/network/IPC namespaces, control group; veRL's runs the
program in a forked process of the trainer with rlimits and no isolation). Each judge runs in a
worker process of its own per round.

    .venv/bin/python benchmarks/judge_vs_verl.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# -- the problem set ---------------------------------------------------------------------------------

APPS_KADANE = """n = int(input())
a = list(map(int, input().split()))
if n == 0:
    print(0)
    return
best = cur = a[0]
for x in a[1:]:
    cur = max(x, cur + x)
    best = max(best, cur)
print(best)
"""
APPS_LETTERS = """import sys
s = sys.stdin.readline().strip()
counts = {}
for ch in s:
    counts[ch] = counts.get(ch, 0) + 1
for ch in sorted(counts):
    print(ch, counts[ch])
"""
APPS_FIB = """n = int(input())
a, b = 0, 1
for _ in range(n):
    a, b = b, (a + b) % 1000000007
print(a)
"""
CC_MEDIAN = """import sys
def main():
    data = sys.stdin.read().split()
    t = int(data[0]); pos = 1; out = []
    for _ in range(t):
        n = int(data[pos]); pos += 1
        xs = sorted(map(int, data[pos:pos + n])); pos += n
        out.append(str(xs[(n - 1) // 2]))
    print("\\n".join(out))
main()
"""
CC_GCD = """import sys
from math import gcd
input = sys.stdin.readline
t = int(input())
for _ in range(t):
    a, b = map(int, input().split())
    g = gcd(a, b)
    print(g, a // g * b)
"""
LCB_LIS = """from typing import List
from bisect import bisect_left
class Solution:
    def lengthOfLIS(self, nums: List[int]) -> int:
        tails = []
        for x in nums:
            i = bisect_left(tails, x)
            if i == len(tails):
                tails.append(x)
            else:
                tails[i] = x
        return len(tails)
"""
LCB_PAIRS = """from typing import List
class Solution:
    def countPairs(self, nums: List[int], target: int) -> int:
        nums = sorted(nums)
        i, j, count = 0, len(nums) - 1, 0
        while i < j:
            if nums[i] + nums[j] < target:
                count += j - i
                i += 1
            else:
                j -= 1
        return count
"""
LC_PARENS = """class Solution:
    def isValid(self, s: str) -> bool:
        pairs = {')': '(', ']': '[', '}': '{'}
        stack = []
        for ch in s:
            if ch in pairs:
                if not stack or stack.pop() != pairs[ch]:
                    return False
            else:
                stack.append(ch)
        return not stack
"""
LC_STAIRS = """class Solution:
    def climbStairs(self, n: int) -> int:
        a, b = 1, 1
        for _ in range(n):
            a, b = b, a + b
        return a
"""


def _kadane(a):
    best = cur = a[0]
    for x in a[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return best


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1000000007
    return a


def _lis(nums):
    from bisect import bisect_left
    tails = []
    for x in nums:
        i = bisect_left(tails, x)
        tails[i:i + 1] = [x]
    return len(tails)


def _valid(s):
    depth = []
    for ch in s:
        if ch in ")]}":
            if not depth or depth.pop() != "([{"[")]}".index(ch)]:
                return False
        else:
            depth.append(ch)
    return not depth


def problem_set(seed: int = 7) -> list[dict]:
    """119 problems, 714 tests: (family, code, fn_name, tests as (input, output) or (args, expected))."""
    rng = random.Random(seed)
    out = []

    def add(family, code, fn, tests):
        out.append({"family": family, "code": code, "fn_name": fn, "tests": tests})

    def size():
        return rng.choice([10, 100, 1000, 5000, 20000])

    counts = iter([5, 6, 7, 6] * 40)  # tests per problem: 714 over 119 problems
    for k in range(119):
        n_tests = next(counts)
        kind = k % 9
        tests = []
        for _ in range(n_tests):
            if kind == 0:
                a = [rng.randint(-1000, 1000) for _ in range(size())]
                tests.append((f"{len(a)}\n{' '.join(map(str, a))}\n", f"{_kadane(a)}\n"))
            elif kind == 1:
                s = "".join(rng.choice("abcdefghij") for _ in range(size()))
                tests.append((s + "\n", "".join(f"{c} {s.count(c)}\n" for c in sorted(set(s)))))
            elif kind == 2:
                n = size() * 5
                tests.append((f"{n}\n", f"{_fib(n)}\n"))
            elif kind in (3, 4):
                t = rng.randint(1, 50)
                lines, answers = [str(t)], []
                for _ in range(t):
                    if kind == 3:
                        xs = [rng.randint(1, 10**9) for _ in range(rng.randint(1, 200))]
                        lines += [str(len(xs)), " ".join(map(str, xs))]
                        answers.append(str(sorted(xs)[(len(xs) - 1) // 2]))
                    else:
                        import math
                        a, b = rng.randint(1, 10**12), rng.randint(1, 10**12)
                        lines.append(f"{a} {b}")
                        answers.append(f"{math.gcd(a, b)} {a // math.gcd(a, b) * b}")
                tests.append(("\n".join(lines) + "\n", "\n".join(answers) + "\n"))
            elif kind == 5:
                nums = [rng.randint(-10**4, 10**4) for _ in range(size() // 4 + 1)]
                tests.append(([nums], _lis(nums)))
            elif kind == 6:
                nums = [rng.randint(-50, 50) for _ in range(rng.randint(1, 300))]
                target = rng.randint(-50, 50)
                ref = sum(1 for j in range(len(nums)) for i in range(j) if nums[i] + nums[j] < target)
                tests.append(([nums, target], ref))
            elif kind == 7:
                s = "".join(rng.choice("()[]{}") for _ in range(rng.randint(1, 2000)))
                if rng.random() < 0.5:  # a valid one
                    half = [rng.choice("([{") for _ in range(rng.randint(1, 500))]
                    s = "".join(half) + "".join(")]}"["([{".index(c)] for c in reversed(half))
                tests.append(([s], _valid(s)))
            else:
                n = rng.randint(1, 90)
                a, b = 1, 1
                for _ in range(n):
                    a, b = b, a + b
                tests.append(([n], a))
        family, code, fn = [("apps", APPS_KADANE, None), ("apps", APPS_LETTERS, None), ("apps", APPS_FIB, None),
                            ("codecontests", CC_MEDIAN, None), ("codecontests", CC_GCD, None),
                            ("livecodebench", LCB_LIS, "lengthOfLIS"), ("livecodebench", LCB_PAIRS, "countPairs"),
                            ("leetcode", LC_PARENS, "isValid"), ("leetcode", LC_STAIRS, "climbStairs")][kind]
        add(family, code, fn, tests)
    return out


# -- the two judges, each in a worker process ----------------------------------------------------------

VERL_WORKER = r'''
import json, sys, time
from verl.utils.reward_score.prime_code import compute_score
problems = json.load(open(sys.argv[1]))
compute_score("print(1)", {"inputs": ["\n"], "outputs": ["1\n"]})  # imports and first fork, untimed
times, passed = [], 0
for p in problems:
    if p["fn_name"]:
        # LiveCodeBench's functional layout, as veRL's judge reads it: one JSON value per argument line
        cases = {"inputs": ["\n".join(json.dumps(a) for a in t[0]) for t in p["tests"]],
                 "outputs": [json.dumps(t[1]) for t in p["tests"]], "fn_name": p["fn_name"]}
    else:
        cases = {"inputs": [t[0] for t in p["tests"]], "outputs": [t[1] for t in p["tests"]]}
    t0 = time.perf_counter()
    ok, _ = compute_score(p["code"], json.dumps(cases))
    times.append(time.perf_counter() - t0)
    passed += ok is True
t0 = time.perf_counter()
for _ in range(20):
    compute_score("print(1)", {"inputs": ["\n"], "outputs": ["1\n"]})
fixed = (time.perf_counter() - t0) / 20
print(json.dumps({"times": times, "passed": passed, "fixed_s": fixed}))
'''

OURS_WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[2])
from agentboost.sandbox import judge
from agentboost.sandbox.judge import run_tests, close_idle_harnesses
from agentboost.sandbox.runner import SandboxLimits, describe_protections
problems = json.load(open(sys.argv[1]))
limits = SandboxLimits()
# the sandbox and harness start, paid once per harness (a pool keeps them warm): measured cold
starts = []
for _ in range(5):
    close_idle_harnesses()
    t0 = time.perf_counter()
    run_tests("print(1)", [{"kind": "stdio", "input": "", "output": "1"}], limits=limits)
    starts.append(time.perf_counter() - t0)
close_idle_harnesses()
run_tests("print(1)", [{"kind": "stdio", "input": "", "output": "1"}], limits=limits)  # warm, untimed
times, test_s, passed, n_tests = [], 0.0, 0, 0
for p in problems:
    tests = ([{"kind": "call", "args": t[0], "expected": t[1]} for t in p["tests"]] if p["fn_name"] else
             [{"kind": "stdio", "input": t[0], "output": t[1]} for t in p["tests"]])
    t0 = time.perf_counter()
    out = run_tests(p["code"], tests, fn_name=p["fn_name"], limits=limits, stop_on_failure=True)
    times.append(time.perf_counter() - t0)
    test_s += sum(o.time_s for o in out)
    n_tests += len(out)
    passed += len(out) == len(tests) and all(o.passed for o in out)
# a warm problem of one trivial test: the judge's fixed cost per problem and per test
t0 = time.perf_counter()
for _ in range(20):
    run_tests("print(1)", [{"kind": "stdio", "input": "", "output": "1"}], limits=limits)
fixed = (time.perf_counter() - t0) / 20
print(json.dumps({"times": times, "passed": passed, "fixed_s": fixed, "test_s": test_s, "n_tests": n_tests,
                  "start_s": sorted(starts)[len(starts) // 2], "sandbox": describe_protections()}))
'''


def run_worker(source: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", source, *args], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"worker failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the first 18 problems only (a smoke run)")
    args = ap.parse_args()
    problems = problem_set()
    if args.quick:
        problems = problems[:18]
    n_tests = sum(len(p["tests"]) for p in problems)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "problems.json"
        path.write_text(json.dumps(problems))
        results: dict[str, list[dict]] = {"veRL prime_code": [], "agentboost": []}
        for r in range(args.rounds):
            order = [("veRL prime_code", VERL_WORKER, (str(path),)), ("agentboost", OURS_WORKER, (str(path), str(REPO)))]
            for name, source, wargs in (order if r % 2 == 0 else order[::-1]):  # alternate who goes first
                results[name].append(run_worker(source, *wargs))
    print(f"{len(problems)} problems, {n_tests} tests; {args.rounds} rounds, alternating; "
          f"sandbox: {results['agentboost'][0]['sandbox']}")
    summary = {}
    for name, runs in results.items():
        totals = [sum(x["times"]) for x in runs]
        medians = [statistics.median(x["times"]) for x in runs]
        passed = {x["passed"] for x in runs}
        summary[name] = statistics.median(totals)
        print(f"{name:16s} median per problem {statistics.median(medians) * 1000:7.1f} ms, total "
              f"{statistics.median(totals):6.2f} s (rounds: {', '.join(f'{t:.2f}' for t in totals)}), "
              f"fixed cost of a one-test problem {statistics.median(x['fixed_s'] for x in runs) * 1000:.1f} ms, "
              f"passed {sorted(passed)}/{len(problems)}")
    ours = results["agentboost"]
    total = statistics.median(sum(x["times"]) for x in ours)
    test_s = statistics.median(x["test_s"] for x in ours)
    start = statistics.median(x["start_s"] for x in ours)
    print(f"agentboost's time: tests' own processes (fork to exit, the program's run included) {test_s:.2f} s "
          f"({test_s / n_tests * 1000:.2f} ms a test), the harness and judge around them {total - test_s:.2f} s "
          f"({(total - test_s) / len(problems) * 1000:.2f} ms a problem); a cold sandbox and harness start "
          f"{start * 1000:.1f} ms, paid once per harness (the pool keeps it warm)")
    print(f"ratio agentboost / veRL (total time, same problems and tests): "
          f"{summary['agentboost'] / summary['veRL prime_code']:.2f}")


if __name__ == "__main__":
    main()
