"""``test_code``: the agent tests its latest code against the problem's public examples.

The result's first line is the status: ``STATUS: VALIDATION_SUCCESS``, ``STATUS: TOOL_ERROR``
(wrong output, runtime error, timeout: the first failing case shown compactly) or
``STATUS: NO_VALIDATION`` (no public examples; the code was compiled). The code is the tool's
argument or, when none is given, the last fenced code block of the agent's latest message. Every
run goes through the sandbox. The outcome (``verified``, ``wrong_output``, ``runtime_error``,
``timeout``, ``no_validation``, ``other``) goes to the episode's tool statistics.
"""

from __future__ import annotations

from typing import Any

from strands import ToolContext, tool

from ..rewards.code_tasks import task_limits, task_tests, task_tolerance
from ..sandbox.judge import latest_code, run_tests
from ..sandbox.runner import SandboxLimits, run_python

OUTCOMES = ("verified", "wrong_output", "runtime_error", "timeout", "no_validation", "other")
_OUTCOME_OF_VERDICT = {"wrong_output": "wrong_output", "runtime_error": "runtime_error", "memory_limit": "runtime_error",
                       "output_limit": "runtime_error", "timeout": "timeout", "sandbox_error": "other"}
_COMPILE = "import sys\ncompile(open('solution.py').read(), 'solution.py', 'exec')\n"


def check_code(code: str | None, task: dict[str, Any]) -> tuple[str, str]:
    """(outcome, text for the agent)."""
    if not code or not code.strip():
        return "other", "STATUS: TOOL_ERROR\nno code: pass it as `code` or put it in a ```python block first"
    try:
        public, _ = task_tests(task)
        tol = task_tolerance(task)
    except ValueError as e:
        return "other", f"STATUS: TOOL_ERROR\nthe task's tests are unusable: {e}"
    if not public:
        r = run_python(_COMPILE, limits=SandboxLimits(cpu_s=5, wall_s=10), files={"solution.py": code})
        if r.ok:
            return "no_validation", "STATUS: NO_VALIDATION\nno public examples to test against; the code compiles"
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.verdict
        return "runtime_error", f"STATUS: TOOL_ERROR\nthe code does not compile: {last}"
    outcomes = run_tests(code, public, fn_name=task.get("fn_name"), limits=task_limits(task),
                         float_tol=tol, stop_on_failure=True)
    failed = [o for o in outcomes if not o.passed]
    if not failed:
        return "verified", f"STATUS: VALIDATION_SUCCESS\nall {len(public)} public examples passed"
    f = failed[0]
    detail = f"{f.verdict.replace('_', ' ')} on example {f.index + 1} of {len(public)}"
    return _OUTCOME_OF_VERDICT.get(f.verdict, "other"), f"STATUS: TOOL_ERROR\n{detail}: {f.detail}".rstrip(": ")


@tool(context=True)
def test_code(code: str = "", tool_context: ToolContext = None) -> str:
    """Test your Python solution against the problem's public examples before you answer.

    Args:
        code: the complete solution; leave empty to test the last ```python block of your latest message.
    """
    state = tool_context.invocation_state
    if not code.strip():
        code = latest_code(tool_context.agent.messages)
    outcome, text = check_code(code, state.get("task") or {})
    state.setdefault("tool_outcomes", {})[tool_context.tool_use["toolUseId"]] = outcome
    return text


test_code.runs_model_code = True  # the trainer refuses to run it without an isolating sandbox
