"""Demonstrations: a scripted policy that answers each task from the solution its row carries.

A warm start for a small model needs episodes in which the tool is used, and the model's own
samples may contain none (SmolLM2-135M never calls the calculator unprompted). This policy writes
the tool calls a task's ``solution`` names and then its final answer; the text goes through the real
Strands agent, the real tools and the trainable model like any model's would, so each
demonstration is an ordinary, token-exact episode record whose tool results the tools produced and
whose reward the task's reward computed (``agentboost rollout --demonstrations``; ``agentboost sft``
trains on them).

A task row's solution::

    "solution": {"calls": [{"name": "calculator", "arguments": {"expression": "37 * 412 - 95"}}],
                 "answer": "The answer is 15149."}

One call per model turn, in order; then the answer. Calls are written in the policy's tool-call
format (``tool_parser``, as the agent's: ``auto`` reads it from the chat template; see
``agents.tool_parsers``). The policy finds the task by its question in the prompt (the longest
question the prompt contains, so one question being part of another does not confuse it).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..sampling.scripted import ScriptedTurn
from ..tasks import load_tasks
from .chat_rendering import ChatRenderer, format_tool_call
from .tool_parsers import resolve_tool_parser


class DemonstrationError(InputError):
    """A task without a usable ``solution`` (named by task id and what is wrong)."""


def check_solution(task: dict[str, Any]) -> dict[str, Any]:
    """The task's solution, validated; raises ``DemonstrationError`` naming the task."""
    where = f"task {task.get('task_id')!r}"
    sol = task.get("solution")
    if not isinstance(sol, dict):
        raise DemonstrationError(f"{where}: no 'solution' object (expected {{'calls': [...], 'answer': text}})")
    calls = sol.get("calls", [])
    if not isinstance(calls, list):
        raise DemonstrationError(f"{where}: solution.calls must be a list of {{'name', 'arguments'}} objects")
    for i, call in enumerate(calls):
        if not (isinstance(call, dict) and isinstance(call.get("name"), str)
                and isinstance(call.get("arguments", {}), dict)):
            raise DemonstrationError(f"{where}: solution.calls[{i}] must be {{'name': str, 'arguments': object}}")
    if not isinstance(sol.get("answer"), str) or not sol["answer"].strip():
        raise DemonstrationError(f"{where}: solution.answer must be the final answer as non-empty text")
    return sol


def solution_policy(tokenizer, tasks: str, question_field: str = "question", tool_parser: str = "auto"):
    """Sampler script (see ``ScriptedSampler``) for the tasks in the file ``tasks``, its calls in the
    format of ``tool_parser``."""
    solutions = {t["question"]: check_solution(t) for t in load_tasks(tasks, question_field=question_field)}
    tool_parser = resolve_tool_parser(tool_parser, tokenizer.chat_template, ChatRenderer(tokenizer).supports_tools)
    by_length = sorted(solutions, key=len, reverse=True)

    def script(prompt_ids: list[int], index: int) -> ScriptedTurn:
        prompt = tokenizer.decode(prompt_ids)
        question = next((q for q in by_length if q in prompt), None)
        if question is None:
            return ScriptedTurn(error="demonstrations: the prompt holds none of the task file's questions")
        sol = solutions[question]
        calls = sol.get("calls", [])
        if index < len(calls):
            return ScriptedTurn(text=format_tool_call(calls[index]["name"], calls[index].get("arguments", {}),
                                                      tool_parser))
        return ScriptedTurn(text=sol["answer"])

    return script


def demonstration_sampler(tokenizer: str, tasks: str, sampling, question_field: str = "question",
                          tool_parser: str = "auto", template_kwargs: dict[str, Any] | None = None):
    """The ``SamplerSpec`` that plays the solutions of the task file ``tasks`` (``rollout
    --demonstrations`` and the trainer's warm start)."""
    from ..sampling.spec import SamplerSpec

    return SamplerSpec(tokenizer=tokenizer, sampling=sampling, kind="scripted",
                       script="agentboost.agents.demonstrations:solution_policy",
                       script_kwargs={"tasks": tasks, "question_field": question_field, "tool_parser": tool_parser},
                       template_kwargs=dict(template_kwargs or {}))
