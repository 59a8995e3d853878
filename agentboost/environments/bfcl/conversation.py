"""A BFCL episode as a conversation: what turns one Strands agent run into BFCL's inference protocol.

The episode runner asks the environment for a conversation per episode (``StrandsEnv.conversation``
names ``bfcl_conversation``); ``setup`` gives the agent the entry's functions as tools, then the
runner hands it each user turn until the conversation ends. As BFCL's function-calling inference
(``BaseHandler.inference_multi_turn_FC``, ``inference_single_turn_FC``) runs it:

- single-call categories: the entry's first turn (a system message in it becomes the system prompt,
  earlier messages the history) and one model response, whose tool calls are the output; the tools
  record and never execute (BFCL checks these calls, not results);
- multi-turn categories: the turns in order; within a turn the model calls tools (each on this
  episode's own API instances, ``tools.ApiSession``) until it answers without a call; more than
  BFCL's step limit (``MAXIMUM_STEP_LIMIT``, 20) tool-calling steps in one turn force-quits the
  episode after that turn, as BFCL does; a turn of a ``miss_func`` entry that adds held-out
  functions registers them and sends BFCL's prompt for it (the functions' docs and "I have updated
  some more functions you can choose from. What about now?": the prompting-mode text, because a
  policy's chat template renders tools once, at the start).

The record (``episode.metadata["conversation"]``) says where the agent's own messages begin
(``initial_messages``), how many turns were played and how it ended; ``scoring.bfcl_reward`` scores
the stored messages with BFCL's checkers, so a stored episode can be rescored without inference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..strands_env import ConversationEnded
from . import package
from .tools import ApiSession, strands_tool

NOT_EXECUTED = "(recorded; BFCL's single-call categories check the call itself, it is not executed)"


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


OFFERED = ("all", "ground_truth")


@dataclass
class BfclConversation:
    row: dict
    max_steps_per_turn: int | None = None  # None: BFCL's MAXIMUM_STEP_LIMIT
    # "all": the entry's functions (BFCL's protocol); "ground_truth": only those its ground truth calls
    # (NOT BFCL's protocol: a short prompt for small models in training; the scoring is unchanged)
    offered_functions: str = "all"
    entry: dict = field(init=False)
    session: ApiSession | None = field(init=False, default=None)

    def __post_init__(self):
        bfcl_id = self.row.get("bfcl_id")
        if not bfcl_id:
            raise package.BfclError(f"task {self.row.get('task_id')!r} is not a BFCL row (no bfcl_id); "
                                    "make the tasks with `agentboost data prepare bfcl`")
        self.category = package.category_of(bfcl_id)
        self.multi_turn = package.is_multi_turn(self.category)
        self.entry = package.entry(bfcl_id, hints=True)  # the docs as BFCL's inference shows them
        if self.offered_functions not in OFFERED:
            raise package.BfclError(f"BFCL conversation option offered_functions must be one of {', '.join(OFFERED)}, "
                                    f"got {self.offered_functions!r}")
        if self.offered_functions == "ground_truth":
            used = _called_names(package.ground_truth(bfcl_id), self.multi_turn)
            self.entry["function"] = [d for d in self.entry["function"] if d["name"] in used]
            self.entry["missed_function"] = {t: [d for d in docs if d["name"] in used]
                                             for t, docs in (self.entry.get("missed_function") or {}).items()}
        if self.max_steps_per_turn is None:
            self.max_steps_per_turn = package.bfcl().prompts.MAXIMUM_STEP_LIMIT
        self.turn = 0  # turns handed to the agent so far
        self.termination: str | None = None
        self._n_initial = 0
        self._turn_start = 0
        self.calls: list[tuple[str, dict]] = []  # single-call: what the model called, in order

    # -- setup ---------------------------------------------------------------------------------
    def setup(self, agent) -> None:
        from strands.hooks import BeforeModelCallEvent, BeforeToolCallEvent
        from strands.tools.executors import SequentialToolExecutor

        agent.tool_executor = SequentialToolExecutor()  # BFCL executes a step's calls in order
        if self.multi_turn:
            self.session = ApiSession(self.entry["involved_classes"], self.entry.get("initial_config") or {},
                                      long_context="long_context" in self.category)
        agent.tool_registry.process_tools([strands_tool(doc, self._run) for doc in self.entry["function"]])
        first = self.entry["question"][0] if self.entry["question"] else []
        system = [_text(m) for m in first if m["role"] == "system"]
        if system:
            agent.system_prompt = "\n\n".join(system)
        if not self.multi_turn:  # a history before the last user message (some live entries have one)
            rest = [m for m in first if m["role"] != "system"]
            last = max((i for i, m in enumerate(rest) if m["role"] == "user"), default=None)
            for m in rest[:last] if last is not None else []:
                agent.messages.append({"role": m["role"], "content": [{"text": _text(m)}]})
        self._n_initial = len(agent.messages)
        agent.hooks.add_callback(BeforeModelCallEvent, self._before_model_call)
        agent.hooks.add_callback(BeforeToolCallEvent, self._before_tool_call)

    def _run(self, name: str, arguments: dict) -> str:
        if self.session is None:
            self.calls.append((name, arguments))
            return NOT_EXECUTED
        return self.session.call(name, arguments)

    def _before_tool_call(self, event) -> None:
        if event.selected_tool is None:  # a name that is no tool: BFCL's executor answers it
            from strands.tools.tools import PythonAgentTool

            name = event.tool_use["name"]
            spec = {"name": name, "description": "", "inputSchema": {"json": {"type": "object"}}}
            event.selected_tool = PythonAgentTool(name, spec, lambda tool_use, **_: {
                "toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": self._run(name, dict(tool_use.get("input") or {}))}]})

    def _before_model_call(self, event) -> None:
        own = event.agent.messages[self._turn_start:]
        if not self.multi_turn:
            if any(m["role"] == "assistant" for m in own):  # one response is the output
                self.termination = "answered"
                raise ConversationEnded(self.termination)
            return
        steps = sum(1 for m in own if m["role"] == "assistant"
                    and any("toolUse" in b for b in m.get("content") or []))
        if steps > self.max_steps_per_turn:
            self.termination = "force_quit"
            raise ConversationEnded(f"more than {self.max_steps_per_turn} tool-calling steps in turn {self.turn - 1}")

    # -- turns ---------------------------------------------------------------------------------
    async def next_user_message(self, agent) -> str | None:
        turns = self.entry["question"]
        if self.termination is not None or self.turn >= (len(turns) if self.multi_turn else 1):
            self.termination = self.termination or ("answered" if not self.multi_turn else "done")
            return None
        i = self.turn
        held_out = (self.entry.get("missed_function") or {}).get(str(i))
        if held_out:
            agent.tool_registry.process_tools([strands_tool(doc, self._run) for doc in held_out])
            p = package.bfcl().prompts
            message = p.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=held_out)
        else:
            users = [_text(m) for m in turns[i] if m["role"] == "user"]
            if not self.multi_turn:
                users = users[-1:]  # the earlier messages are the history, set up above
            message = "\n\n".join(users)
        self.turn += 1
        self._turn_start = len(agent.messages)
        return message

    def record(self, agent) -> dict[str, Any]:
        return {"kind": "bfcl", "bfcl_id": self.entry["id"], "category": self.category,
                "initial_messages": self._n_initial, "turns": self.turn,
                "turns_total": len(self.entry["question"]) if self.multi_turn else 1,
                "termination": self.termination or "agent_error", "max_steps_per_turn": self.max_steps_per_turn,
                "offered_functions": self.offered_functions,
                "official": self.offered_functions == "all" and self.max_steps_per_turn == package.bfcl().prompts.MAXIMUM_STEP_LIMIT}


def _called_names(truth, multi_turn: bool) -> set[str]:
    if not multi_turn:
        return {name for call in truth or [] for name in call}
    import ast

    names = set()
    for turn in truth:
        for text in turn:
            names |= {n.func.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Name)}
    return names


def bfcl_conversation(task: dict, policy: tuple | None = None, **options: Any) -> BfclConversation:
    """The conversation factory for ``StrandsEnv(conversation="agentboost.environments.bfcl.conversation:
    bfcl_conversation")``; options: ``max_steps_per_turn`` (default BFCL's 20), ``offered_functions``
    (``all``, BFCL's protocol; ``ground_truth``, a training aid)."""
    bad = sorted(set(options) - {"max_steps_per_turn", "offered_functions"})
    if bad:
        raise package.BfclError(f"unknown BFCL conversation option(s) {', '.join(bad)}; expected max_steps_per_turn, "
                                "offered_functions")
    return BfclConversation(task, **options)
