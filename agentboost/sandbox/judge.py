"""Judging code against test cases, as competitive-programming judges do.

Test cases (the project's task schema, ``tests.public`` / ``tests.hidden``):

- ``{"kind": "stdio", "input": "...", "output": "..."}``: stdin in, stdout compared;
- ``{"kind": "call", "args": [...], "expected": ...}``: the task's ``fn_name`` is called (a
  module-level function, or a method of ``Solution`` as in LeetCode) and its result compared;
- ``{"kind": "script", "code": "..."}``: assertions run after the code (HumanEval's ``check``);
  passes when the program exits cleanly.

``run_tests`` runs all the tests of one answer in one sandboxed harness (``sandbox.harness``), one
forked process per test; ``run_tests_per_process`` is the judge before it, one sandbox per test,
kept as the benchmark's baseline. Both grade each run with ``_grade``, so their verdicts agree
(except that only the harness gives call-based tests the import preamble and lets a top-level
``return`` end a stdin program).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..reasoning import block_content
from . import harness
from .runner import SandboxLimits, SandboxProcess, SandboxResult, run_python, verdict_of

TEST_KINDS = ("stdio", "call", "script")
_RESULT_MARK = "@@AGENTBOOST_RESULT@@"
_CALL_HARNESS = """\
import json, runpy
_ns = runpy.run_path("solution.py", run_name="solution")
_fn = _ns.get({fn!r})
if _fn is None and isinstance(_ns.get("Solution"), type):
    _fn = getattr(_ns["Solution"](), {fn!r}, None)
if _fn is None:
    raise SystemExit("the code defines no function or Solution method named {fn}")
with open("args.json") as _f:
    _args = json.load(_f)
_result = _fn(*_args)
print("\\n{mark}" + json.dumps(_result, default=repr))
"""
# how long past a test's wall limit the judge waits for the harness before it counts it hung
_HARNESS_START_S = 10.0
_HARNESS_SLACK_S = 2.0
_HARNESS_CPU_S = 600.0  # the harness's own CPU limit (tests have theirs); it is retired at half
_POOL_IDLE = 4  # idle harnesses kept per set of limits
_HARNESS_PROCESSES = 3  # the harness's processes besides the one it had before: its zygote, this problem's and the next one's process


_pool: dict[SandboxLimits, list["_Harness"]] = {}
_pool_lock = threading.Lock()


def _take(limits: SandboxLimits, largest_input: int) -> "_Harness":
    """An idle harness for ``limits`` that can hold the problem's largest input, else a new one."""
    needed = largest_input + (1 << 20)  # the input, written to a file by the harness, and room
    with _pool_lock:
        idle = _pool.get(limits, [])
        for h in idle:
            if h.input_capacity >= needed:
                idle.remove(h)
                return h
    return _Harness(limits, max(limits.file_bytes, needed))


def _give_back(h: "_Harness") -> None:
    if h.reusable:
        with _pool_lock:
            idle = _pool.setdefault(h.limits, [])
            if len(idle) < _POOL_IDLE:
                idle.append(h)
                return
    h.close()


def close_idle_harnesses() -> None:
    """End every idle harness of this process (at exit; bwrap also ends them with this process)."""
    with _pool_lock:
        cells = [h for idle in _pool.values() for h in idle]
        _pool.clear()
    for h in cells:
        h.close()


def _forget_pool() -> None:
    # a forked child must not talk to its parent's harnesses: their channels are the parent's
    global _pool, _pool_lock
    _pool, _pool_lock = {}, threading.Lock()


atexit.register(close_idle_harnesses)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


@dataclass
class TestOutcome:
    index: int
    kind: str
    passed: bool
    verdict: str  # "passed" | "wrong_output" | "runtime_error" | "timeout" | "memory_limit" | "output_limit" | "sandbox_error"
    detail: str = ""
    time_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "verdict": self.verdict, "time_s": round(self.time_s, 4),
                **({"detail": self.detail} if self.detail else {})}


@dataclass(frozen=True)
class Tolerance:
    """Real numbers match when ``|actual - expected| <= max(abs, rel * |expected|)``."""
    abs: float = 0.0
    rel: float = 0.0


DEFAULT_TOLERANCE = Tolerance(abs=1e-6, rel=1e-6)


def tolerance(value: Any, where: str = "float_tol") -> Tolerance | None:
    """A task's ``float_tol`` as a ``Tolerance``; None means exact text comparison.

    ``None`` (not set): ``DEFAULT_TOLERANCE``; ``"exact"``: lines compared as text (trailing
    whitespace ignored); a number: that absolute and relative tolerance; ``{"abs": a, "rel": r}``;
    or the JSON text of any of these (as parquet stores it)."""
    if value is None or isinstance(value, Tolerance):
        return DEFAULT_TOLERANCE if value is None else value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "exact":
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{where}: expected a number, {{\"abs\": .., \"rel\": ..}} or \"exact\", got {text[:40]!r}") from None
        if isinstance(value, str):
            return tolerance(value, where)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return Tolerance(float(value), float(value))
    if isinstance(value, dict) and value and set(value) <= {"abs", "rel"} and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value.values()):
        return Tolerance(float(value.get("abs", 0.0)), float(value.get("rel", 0.0)))
    raise ValueError(f"{where}: expected a number >= 0, {{\"abs\": .., \"rel\": ..}} or \"exact\", got {str(value)[:40]!r}")


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def _close(expected: float, actual: float, tol: Tolerance) -> bool:
    # the 1e-15 absorbs the binary rounding of decimal text ("0.000002" - "0.000001" > 1e-6 in floats)
    return abs(actual - expected) <= max(tol.abs, tol.rel * abs(expected)) + 1e-15


def _tokens_equal(expected: str, actual: str, tol: Tolerance) -> bool:
    """One output token against the expected one. An integer is expected exactly: as written, or as a
    number of exactly its value (``1000000.0``, ``1e6``), never within a tolerance (``1000001.0``
    for ``1000000`` is wrong). A tolerance applies only where the expected token is a real number
    (it has a decimal point or an exponent); a zero tolerance compares the decimal values exactly,
    as LiveCodeBench's judge does."""
    if expected == actual:
        return True
    if not (_NUMBER.fullmatch(expected) and _NUMBER.fullmatch(actual)):
        return False
    if _INTEGER.fullmatch(expected):
        # two integers: as text, so "007" is not "7"; a real number: exactly the integer's value
        return not _INTEGER.fullmatch(actual) and Decimal(actual) == Decimal(expected)
    if tol.abs == 0 and tol.rel == 0:
        return Decimal(actual) == Decimal(expected)
    return _close(float(expected), float(actual), tol)


def outputs_match(expected: str, actual: str, float_tol: Any = None) -> bool:
    """Line by line (trailing whitespace and trailing blank lines ignored), token by token; real
    numbers within ``float_tol`` (see ``tolerance``; the default is ``DEFAULT_TOLERANCE``), so
    "2.5" matches "2.50". ``float_tol="exact"`` compares the lines as text."""
    tol = tolerance(float_tol)
    exp, act = _lines(expected), _lines(actual)
    if tol is None:
        return exp == act
    if len(exp) != len(act):
        return False
    for e, a in zip(exp, act):
        et, at = e.split(), a.split()
        if len(et) != len(at) or not all(_tokens_equal(x, y, tol) for x, y in zip(et, at)):
            return False
    return True


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def values_match(expected: Any, actual: Any, float_tol: Any = None) -> bool:
    """JSON values. An expected real number matches within ``float_tol`` (``"exact"``: ==); an
    expected integer only a number of exactly its value (``1000000.0`` for ``1000000``, never
    ``1000001.0``); a boolean only a boolean (``True`` is not ``1``)."""
    tol = tolerance(float_tol)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if _is_number(expected) and _is_number(actual):
        if isinstance(expected, float) and tol is not None and math.isfinite(expected):
            return math.isfinite(actual) and _close(expected, actual, tol)
        return expected == actual  # an int and a float compare exactly in Python
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(values_match(e, a, tol or "exact") for e, a in zip(expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(values_match(expected[k], actual[k], tol or "exact")
                                                        for k in expected)
    return expected == actual


def _short(text: str, n: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 3] + "..."


def _failure(result: SandboxResult) -> tuple[str, str]:
    if result.verdict == "ok":
        return "wrong_output", ""
    tail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit status {result.exit_status}"
    return result.verdict, _short(tail)


def validate_test(test: Any, where: str) -> dict[str, Any]:
    if not isinstance(test, dict) or test.get("kind") not in TEST_KINDS:
        raise ValueError(f"{where}: a test must be an object with kind in {TEST_KINDS}, got {str(test)[:80]}")
    need = {"stdio": ("input", "output"), "call": ("args", "expected"), "script": ("code",)}[test["kind"]]
    missing = [k for k in need if k not in test]
    if missing:
        raise ValueError(f"{where}: {test['kind']} test lacks {missing}")
    if test["kind"] == "call" and not isinstance(test["args"], list):
        raise ValueError(f"{where}: call test 'args' must be a list")
    return test


def _grade(test: dict[str, Any], index: int, fn_name: str | None, r: SandboxResult, result: str | None,
           float_tol: Any) -> TestOutcome:
    """A test's outcome from its run (``result``: a call's return value as JSON text, if it returned)."""
    kind = test["kind"]
    if kind == "stdio":
        if r.verdict == "ok" and outputs_match(test["output"], r.stdout, float_tol):
            return TestOutcome(index, kind, True, "passed", time_s=r.time_s)
        verdict, detail = _failure(r)
        if verdict == "wrong_output":
            detail = (f"input {_short(test['input'], 80)!r}: expected {_short(test['output'], 80)!r}, "
                      f"got {_short(r.stdout, 80)!r}")
        return TestOutcome(index, kind, False, verdict, detail, r.time_s)
    if kind == "call":
        if r.verdict == "ok" and result is not None:
            raw = result.strip()
            try:
                got = json.loads(raw)
            except json.JSONDecodeError:
                got = raw
            if values_match(test["expected"], got, float_tol):
                return TestOutcome(index, kind, True, "passed", time_s=r.time_s)
            return TestOutcome(index, kind, False, "wrong_output",
                               f"{fn_name}(*{_short(json.dumps(test['args']), 80)}): expected "
                               f"{_short(json.dumps(test['expected']), 80)}, got {_short(raw, 80)}", r.time_s)
        verdict, detail = _failure(r)
        return TestOutcome(index, kind, False, verdict if verdict != "wrong_output" else "runtime_error", detail,
                           r.time_s)
    if r.verdict == "ok":
        return TestOutcome(index, kind, True, "passed", time_s=r.time_s)
    verdict, detail = _failure(r)
    if "AssertionError" in r.stderr:
        verdict = "wrong_output"
    return TestOutcome(index, kind, False, verdict, detail, r.time_s)


def run_test(code: str, test: dict[str, Any], index: int, fn_name: str | None, limits: SandboxLimits,
             float_tol: Any = None) -> TestOutcome:
    """One test in a sandbox of its own (the judge before the harness; the benchmark's baseline)."""
    kind = test["kind"]
    if kind == "stdio":
        r = run_python(code, stdin=test["input"], limits=limits)
        return _grade(test, index, fn_name, r, None, float_tol)
    if kind == "call":
        if not fn_name:
            return TestOutcome(index, kind, False, "sandbox_error", "call test without the task's fn_name")
        r = run_python(_CALL_HARNESS.format(fn=fn_name, mark=_RESULT_MARK), limits=limits,
                       files={"solution.py": code, "args.json": json.dumps(test["args"])})
        result = r.stdout.rsplit(_RESULT_MARK, 1)[1] if _RESULT_MARK in r.stdout else None
        return _grade(test, index, fn_name, r, result, float_tol)
    return _grade(test, index, fn_name, run_python(code + "\n\n" + test["code"], limits=limits), None, float_tol)


def run_tests_per_process(code: str, tests: list[dict[str, Any]], fn_name: str | None = None,
                          limits: SandboxLimits = SandboxLimits(), total_time_s: float | None = None,
                          float_tol: Any = None, stop_on_failure: bool = False) -> list[TestOutcome]:
    """Each test in its own sandbox: the judge before the harness, kept as the benchmark's baseline
    only, never to grade: a script test's check runs here in the program's own process, where the
    program could read its expected values. Call-based tests get no import preamble here."""
    outcomes: list[TestOutcome] = []
    t0 = time.perf_counter()
    for i, test in enumerate(tests):
        if total_time_s is not None and time.perf_counter() - t0 > total_time_s:
            outcomes.append(TestOutcome(i, test.get("kind", "?"), False, "timeout", "total time limit reached"))
            continue
        o = run_test(code, test, i, fn_name, limits, float_tol)
        outcomes.append(o)
        if stop_on_failure and not o.passed:
            break
    return outcomes


class _Harness:
    """One sandboxed harness process (``sandbox/harness.py``), kept warm: it serves problem after
    problem (``load``, then ``run`` per test), each test in a fresh process, work directory and
    tmpfs, so a problem pays neither an interpreter start nor a sandbox set-up. The judge keeps
    idle harnesses in a pool per set of limits (``_take`` / ``_give_back``)."""

    def __init__(self, limits: SandboxLimits, input_capacity: int):
        self.limits = limits
        self.input_capacity = input_capacity
        # the harness's own CPU and file-size limits only guard the harness (which writes each input
        # to a file); each test process lowers them to the test's
        # and its process limit counts its own processes besides the tests' (its zygote and problem
        # processes: see sandbox.harness), so a test keeps the limit's room
        harness_limits = replace(limits, cpu_s=_HARNESS_CPU_S, file_bytes=input_capacity,
                                 processes=limits.processes + _HARNESS_PROCESSES)
        self.proc = SandboxProcess(_harness_source(), harness_limits)
        self.fresh = True
        self.cpu_s = 0.0
        self.config = {"cpu_s": limits.cpu_s, "wall_s": limits.wall_s, "output_bytes": limits.output_bytes,
                       "file_bytes": limits.file_bytes, "sweep": self.proc.sweep, "wipe": self.proc.wipe}
        self.max_reply = 3 * 6 * limits.output_bytes + 65536  # three capped texts, JSON-escaped

    def _cpu(self, reply: dict) -> None:
        try:
            self.cpu_s = float(reply.get("cpu_s", self.cpu_s))
        except (TypeError, ValueError):
            pass

    def load(self, code: str, fn_name: str | None) -> bool:
        """Give it the next problem's solution; False when it did not take it."""
        deadline = time.monotonic() + (_HARNESS_START_S if self.fresh else _HARNESS_SLACK_S)
        if self.fresh:
            self.fresh = False
            if not self.proc.send(self.config, deadline):
                return False
        reply = self.proc.request({"solution": code, "fn_name": fn_name}, deadline, self.max_reply)
        if reply is None or reply.get("loaded") is not True:
            self.proc.bad_reply = reply is not None
            return False
        self._cpu(reply)
        return True

    @property
    def reusable(self) -> bool:
        # retired at half its CPU limit, so no test ever meets the harness's own limit
        return not (self.proc.timed_out or self.proc.bad_reply or self.proc.proc.poll() is not None
                    or self.cpu_s > _HARNESS_CPU_S / 2)

    def run(self, index: int, test: dict[str, Any]) -> tuple[SandboxResult, str | None] | None:
        """The test's run and a call's result; None when the harness did not answer (it ended or hung)."""
        request = {"i": index, "kind": test["kind"]}
        # a script's code (its assertions: the expected values) goes only after the harness has
        # forked the program's process, to the check's process (see sandbox.harness)
        request.update({k: test[k] for k in ("input", "args") if k in test})
        deadline = time.monotonic() + self.limits.wall_s + _HARNESS_SLACK_S
        oom_before = self.proc.oom_kills()
        reply = self.proc.request(request, deadline, self.max_reply)
        if reply is not None and test["kind"] == "script":
            if reply.get("i") != index or reply.get("ready") is not True:
                self.proc.bad_reply = True
                return None
            reply = self.proc.request({"code": test["code"]}, deadline, self.max_reply)
        if reply is None:
            return None
        if reply.get("i") != index:
            self.proc.bad_reply = True
            return None
        try:
            stdout, stderr, status = str(reply["stdout"]), str(reply["stderr"]), int(reply["status"])
            elapsed, timed_out, over = float(reply["time_s"]), bool(reply["timed_out"]), bool(reply["over"])
        except (KeyError, TypeError, ValueError):
            self.proc.bad_reply = True
            return None
        self._cpu(reply)
        # the control group counts the whole run's OOM kills: this test's are the increase
        verdict = verdict_of(status, timed_out, elapsed, self.limits.wall_s, over, stderr,
                             self.proc.oom_kills() > oom_before)
        result = reply.get("result")
        return SandboxResult(verdict, status, stdout, stderr, elapsed, over), (
            result if isinstance(result, str) else None)

    def ended(self, index: int, test: dict[str, Any], started: float) -> TestOutcome:
        """The outcome of a test during which the harness ended or hung."""
        status, stderr = self.proc.close()
        elapsed = time.perf_counter() - started
        verdict = verdict_of(status, self.proc.timed_out, elapsed, self.limits.wall_s, False, stderr,
                             self.proc.oom_killed > 0)
        if verdict == "ok" or self.proc.bad_reply:
            verdict = "runtime_error"  # something wrote into the harness's channel
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        how = ("stopped answering" if self.proc.timed_out else "answered out of protocol" if self.proc.bad_reply
               else f"ended (exit status {status}{': ' + _short(last, 120) if last else ''})")
        return TestOutcome(index, test["kind"], False, verdict,
                           f"the judge harness {how} during this test; the tests after it ran in a new one", elapsed)

    def close(self) -> None:
        self.proc.close()


@lru_cache(maxsize=1)
def _harness_source() -> str:
    return Path(harness.__file__).read_text(encoding="utf-8")


def run_tests(code: str, tests: list[dict[str, Any]], fn_name: str | None = None,
              limits: SandboxLimits = SandboxLimits(), total_time_s: float | None = None,
              float_tol: Any = None, stop_on_failure: bool = False) -> list[TestOutcome]:
    """All tests of one problem in one sandboxed harness process (a warm one from the pool when
    there is one), each test in a process of its own under ``limits``, in a fresh work directory
    and tmpfs (see ``sandbox.harness``). ``stop_on_failure``: stop at the first failing test
    (pass/fail is all that is needed). Tests left when ``total_time_s`` is spent are timeouts. A test
    that ends the harness gets its verdict and the rest run in a new harness."""
    outcomes: list[TestOutcome] = []
    t0 = time.perf_counter()
    h: _Harness | None = None
    largest_input = max((len(t["input"].encode()) for t in tests if t.get("kind") == "stdio"), default=0)
    try:
        for i, test in enumerate(tests):
            if total_time_s is not None and time.perf_counter() - t0 > total_time_s:
                outcomes.append(TestOutcome(i, test.get("kind", "?"), False, "timeout", "total time limit reached"))
                continue
            started = time.perf_counter()
            if test["kind"] == "call" and not fn_name:
                o = TestOutcome(i, "call", False, "sandbox_error", "call test without the task's fn_name")
            else:
                if h is None:
                    try:
                        h = _loaded(code, fn_name, limits, largest_input)
                    except (OSError, subprocess.SubprocessError) as e:
                        o = TestOutcome(i, test["kind"], False, "sandbox_error", f"could not start the sandbox: {e}")
                        outcomes.append(o)
                        if stop_on_failure:
                            break
                        continue
                ran = h.run(i, test)
                if ran is None:
                    o = h.ended(i, test, started)
                    h = None
                else:
                    o = _grade(test, i, fn_name, ran[0], ran[1], float_tol)
            outcomes.append(o)
            if stop_on_failure and not o.passed:
                break
    finally:
        if h is not None:
            _give_back(h)
    return outcomes


def _loaded(code: str, fn_name: str | None, limits: SandboxLimits, largest_input: int) -> _Harness:
    """A harness holding this problem's solution. An idle one that fails to take it (it ended while
    idle) is dropped and the next one tried: no code of this problem has run yet, so it is not the
    answer's fault. A new one that fails raises (the pool is finite: the loop ends there)."""
    while True:
        h = _take(limits, largest_input)
        fresh = h.fresh
        if h.load(code, fn_name):
            return h
        status, stderr = h.proc.close()
        if fresh:
            raise OSError(f"the judge harness did not start (exit status {status}: {_short(stderr, 300)})")


def verdict_counts(outcomes: list[TestOutcome]) -> dict[str, int]:
    """Tests per verdict, most frequent first."""
    return dict(Counter(o.verdict for o in outcomes).most_common())


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_code(text: str | None) -> str | None:
    """The last fenced code block (python or unlabelled) of ``text``."""
    if not text:
        return None
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    python = [b for lang, b in blocks if lang in ("", "python", "py", "python3")]
    return python[-1].strip("\n") + "\n" if python else None


def latest_code(messages: list[dict[str, Any]]) -> str | None:
    """The last fenced code block of the latest assistant message (Strands messages), of its
    content only: a block inside the reasoning is never taken."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return extract_code(block_content(m.get("content") or [], sep="\n"))
    return None
