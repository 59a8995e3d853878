"""The code-task schema shared by the code tool, the code reward and the data preparers.

A code task row carries ``tests`` = ``{"public": [...], "hidden": [...]}`` (a dict, or the same as
JSON text, as parquet stores it), ``fn_name`` for call-based tests, ``starter_code``, and may set
``grade_public`` (grade the public examples too), ``time_limit_s`` (per test) and ``float_tol``
(how real numbers in outputs compare: see ``sandbox.judge.tolerance``), and ``has_image``.
"""

from __future__ import annotations

import json
from typing import Any

from ..sandbox.judge import Tolerance, tolerance, validate_test
from ..sandbox.runner import SandboxLimits


def task_tests(task: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    raw = task.get("tests")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"task {task.get('task_id')!r}: 'tests' is not valid JSON: {e.msg}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"task {task.get('task_id')!r}: 'tests' must be an object with 'public' and 'hidden' lists")
    out = []
    for part in ("public", "hidden"):
        tests = raw.get(part) or []
        if not isinstance(tests, list):
            raise ValueError(f"task {task.get('task_id')!r}: tests.{part} must be a list")
        out.append([validate_test(t, f"task {task.get('task_id')!r} tests.{part}[{i}]") for i, t in enumerate(tests)])
    return out[0], out[1]


def task_limits(task: dict[str, Any], default_s: float = 4.0) -> SandboxLimits:
    cpu = float(task.get("time_limit_s") or default_s)
    return SandboxLimits(cpu_s=cpu, wall_s=cpu * 2 + 1)


def task_tolerance(task: dict[str, Any]) -> Tolerance | None:
    """The task's ``float_tol``: a ``Tolerance``, or None for exact comparison; unset: the judge's default."""
    return tolerance(task.get("float_tol"), f"task {task.get('task_id')!r} float_tol")
