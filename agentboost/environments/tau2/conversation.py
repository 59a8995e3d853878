"""A tau2 conversation: what turns one Strands agent run into a tau2 simulation.

The episode runner asks the environment for a conversation per episode (``StrandsEnv.conversation``
names ``tau2_conversation``), lets it set the agent up, then alternates: the user simulator's next
message is handed to ``agent.invoke_async`` (a user turn: rendered and appended by the trainable
model, loss mask 0), the agent works with its tools until it answers in text, and so on until the
conversation ends. tau2's rules, as its orchestrator applies them:

- the trajectory opens with tau2's agent greeting; every message is a step (an assistant message,
  the results of one turn's tool calls, a user message); tool calls of a turn run in order
  (Strands' sequential executor), each on the episode's tau2 environment;
- the user sees the agent's content only, never its reasoning (``reasoningContent`` blocks, or a
  ``<think>`` block a text still holds), and a stop token counts only in content;
- the conversation ends when the user sends ``###STOP###``, ``###TRANSFER###`` or
  ``###OUT-OF-SCOPE###`` (termination ``user_stop``; which one is kept as ``user_signal``), when
  ``max_steps`` (tau2: 200) is reached, or when ``max_errors`` (tau2: 10) tool calls have failed;
  the limits are checked where tau2 checks them (not between a tool call and its result) and
  override a stop in the same step, as in tau2;
- a tool call with arguments that do not fit the tool's schema, or to a tool that does not exist,
  goes to tau2's environment like any other, which answers with its ``Error: ...`` result (the
  model sees it; it counts as a tool error), instead of Strands' own error text.

The termination and counts go into ``episode.metadata["conversation"]``; ``evaluator.tau2_reward``
scores the trajectory with that termination (anything but a user or agent stop scores 0)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...reasoning import block_content
from ..strands_env import ConversationEnded
from .domain import _AGENT_SESSIONS, Tau2Error, Tau2Session, new_environment
from .users import UserView, make_user, tau2_text, user_signal

SYSTEM_PROMPTS = ("tau2", "compact", "agent")
DEFAULT_MAX_STEPS = 200  # tau2's defaults (tau2.config)
DEFAULT_MAX_ERRORS = 10


@lru_cache(maxsize=None)
def domain_policy(domain: str) -> str:
    return new_environment(domain).policy


def greeting() -> str:
    """tau2's first agent message, read from the installed orchestrator."""
    import ast
    from pathlib import Path

    import tau2

    src = Path(tau2.__file__).parent / "orchestrator" / "orchestrator.py"
    for node in ast.walk(ast.parse(src.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULT_FIRST_AGENT_MESSAGE" for t in node.targets):
            for kw in node.value.keywords:
                if kw.arg == "content":
                    return kw.value.value
    raise Tau2Error("the installed tau2 has no DEFAULT_FIRST_AGENT_MESSAGE (another tau2 version?)")


def system_prompt(domain: str, style: str = "tau2", compact_chars: int = 1200) -> str:
    """The agent's system prompt. ``tau2``: tau2's own (its agent instruction and the domain policy,
    ~5.4k tokens for airline with the tools). ``compact``: NOT tau2's: the instruction and the
    policy abridged to ``compact_chars`` characters at a paragraph boundary, for small models with
    short contexts (scores under it are not comparable with tau2's)."""
    instruction = tau2_text("agent/llm_agent.py", "AGENT_INSTRUCTION")
    policy = domain_policy(domain)
    if style == "compact":
        paras = [p.strip() for p in policy.split("\n\n") if p.strip()]
        kept, size = [], 0
        for p in paras:
            if size + len(p) > compact_chars and kept:
                break
            kept.append(p)
            size += len(p) + 2
        policy = "\n\n".join(kept) + ("\n\n(The policy is abridged.)" if len(kept) < len(paras) else "")
        return f"{instruction}\n\nPolicy:\n{policy}"
    if style != "tau2":
        raise Tau2Error(f"unknown system prompt style {style!r}; expected one of {', '.join(SYSTEM_PROMPTS)}")
    return tau2_text("agent/llm_agent.py", "SYSTEM_PROMPT").format(agent_instruction=instruction, domain_policy=policy)


STOP_TOKEN = "###STOP###"


def solo_system_prompt(row: dict, style: str = "tau2", compact_chars: int = 1200) -> str:
    """tau2's solo-mode system prompt (its solo instruction, the policy, the task's ticket); ``compact``
    abridges the policy as ``system_prompt`` does (not tau2's)."""
    instruction = tau2_text("agent/llm_agent.py", "AGENT_SOLO_INSTRUCTION").format(
        stop_function_name="done", stop_token=STOP_TOKEN)
    if style == "compact":
        policy = system_prompt(row["domain"], "compact", compact_chars).split("Policy:\n", 1)[1]
        return f"{instruction}\n\nPolicy:\n{policy}\n\nTicket:\n{row['ticket']}"
    if style != "tau2":
        raise Tau2Error(f"unknown system prompt style {style!r}; expected one of {', '.join(SYSTEM_PROMPTS)}")
    return tau2_text("agent/llm_agent.py", "SYSTEM_PROMPT_SOLO").format(
        agent_instruction=instruction, domain_policy=domain_policy(row["domain"]), ticket=row["ticket"])


def _called_done(messages: list[dict]) -> bool:
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    return last is not None and any(b.get("toolUse", {}).get("name") == "done" for b in last.get("content") or [])


@dataclass
class Tau2Conversation:
    row: dict
    user: str = "scripted"
    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    system_prompt: str = "tau2"  # "tau2", "compact" (non-official) or "agent" (the agent spec's own)
    compact_chars: int = 1200
    user_options: dict | None = None
    # tau2's solo mode (telecom's official one): no user; the agent gets the ticket, the user's tools
    # too and a ``done`` tool that ends the episode (agent_stop); answering in text is an agent_error
    solo: bool = False
    policy: tuple | None = None  # (sampler, tokenizer) of the episode's policy, for a user on the policy
    # the NL_ASSERTION judge: a chat model (agentboost.models.chat spec: provider, model_id, ...)
    # that tau2_reward asks with tau2's own judge prompt; None: NL_ASSERTION is left out of the basis
    judge: dict | None = None
    # "basis": the judge scores NL assertions where the task's reward basis names them (tau2's
    # score); "all": also on every task that has some (a stricter, non-official metric, named so)
    nl_assertions: str = "basis"

    def __post_init__(self):
        if self.max_steps < 1 or self.max_errors < 1:
            raise Tau2Error(f"max_steps and max_errors must be >= 1, got {self.max_steps} and {self.max_errors}")
        if self.nl_assertions not in ("basis", "all"):
            raise Tau2Error(f"nl_assertions must be 'basis' or 'all', got {self.nl_assertions!r}")
        if self.judge is not None:
            from ...models.chat import chat_model_spec

            self.judge = chat_model_spec(self.judge, "tau2 judge (env.conversation_options.judge)").as_dict()
        if (self.row.get("initial_state") or {}).get("message_history"):
            raise Tau2Error(f"task {self.row.get('task_id')}: tasks that start with a message history are not "
                            "supported by the conversation driver yet")
        if self.solo:
            if not self.row.get("ticket"):
                raise Tau2Error(f"task {self.row.get('task_id')}: solo mode needs a task with a ticket "
                                "(tau2's telecom tasks have one)")
            self.user, self.simulator = "none (solo)", None
        else:
            self.simulator = make_user(self.user, self.row, policy=self.policy, **(self.user_options or {}))
        self.session = Tau2Session(self.row, solo_mode=self.solo)
        self.termination: str | None = None
        self.user_signal: str | None = None
        self._n_initial = 0
        self._user_turns = 0

    # -- the agent --------------------------------------------------------------------------
    def setup(self, agent) -> None:
        """Sequential tool execution, tau2's greeting as the first message, the system prompt (unless
        ``agent``), this episode's environment for the domain tools, and the limit hooks."""
        from strands.hooks import BeforeModelCallEvent, BeforeToolCallEvent
        from strands.tools.executors import SequentialToolExecutor

        agent.tool_executor = SequentialToolExecutor()
        if self.system_prompt != "agent":
            agent.system_prompt = (solo_system_prompt(self.row, self.system_prompt, self.compact_chars) if self.solo
                                   else system_prompt(self.row["domain"], self.system_prompt, self.compact_chars))
        if self.solo:
            have = set(agent.tool_names)
            extra = [t for t in self.session.strands_tools("assistant", kit="user") if t.tool_name not in have]
            agent.tool_registry.process_tools(extra + [self._done_tool()])
        else:
            agent.messages.append({"role": "assistant", "content": [{"text": greeting()}]})
        self._n_initial = len(agent.messages)
        _AGENT_SESSIONS[agent] = self.session  # the domain tools act on this session's environment
        agent.hooks.add_callback(BeforeModelCallEvent, self._before_model_call)
        agent.hooks.add_callback(BeforeToolCallEvent, self._before_tool_call)

    def _done_tool(self):
        from strands.tools.tools import PythonAgentTool

        def done(tool_use, **_):
            return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": STOP_TOKEN}]}

        spec = {"name": "done", "description": "Call this function when you are done with the task.",
                "inputSchema": {"json": {"type": "object", "properties": {}, "required": []}}}
        return PythonAgentTool("done", spec, done)

    def _before_model_call(self, event) -> None:
        if self.solo and _called_done(event.agent.messages):
            # tau2: a message calling ``done`` is the agent's stop (its limits still checked after it;
            # the ``done`` result Strands added is no step of tau2's)
            self.termination = self._limit(self.steps(event.agent) - 1, event.agent) or "agent_stop"
            raise ConversationEnded(self.termination)
        # the step before was a user message or the results of tool calls: tau2 checks its limits here
        reason = self._limit(self.steps(event.agent), event.agent)
        if reason is not None:
            self.termination = reason
            raise ConversationEnded(reason)

    def _before_tool_call(self, event) -> None:
        if event.selected_tool is None:  # a tool that does not exist: tau2's environment answers it
            event.selected_tool = self._passthrough(event.tool_use["name"])

    def _passthrough(self, name: str):
        from strands.tools.tools import PythonAgentTool

        def run(tool_use, **_):
            text = self.session.call(tool_use["toolUseId"], name, dict(tool_use.get("input") or {}))
            return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

        return PythonAgentTool(name, {"name": name, "description": "", "inputSchema": {"json": {"type": "object"}}}, run)

    # -- counting ---------------------------------------------------------------------------
    def steps(self, agent) -> int:
        return len(agent.messages) - self._n_initial

    def tool_errors(self, agent) -> int:
        """tau2's error results plus tool failures Strands reported itself (a tool that raised)."""
        strands_errors = sum(1 for m in agent.messages for b in m.get("content") or []
                             if "toolResult" in b and b["toolResult"].get("status") == "error")
        return self.session.tool_errors + strands_errors

    def _limit(self, steps: int, agent) -> str | None:
        reason = None
        if steps >= self.max_steps:
            reason = "max_steps"
        if self.tool_errors(agent) >= self.max_errors:
            reason = "too_many_errors"  # checked after max_steps in tau2, so it wins
        return reason

    # -- the user ---------------------------------------------------------------------------
    def view(self, agent) -> UserView:
        msgs, called = [], []
        for m in agent.messages:
            blocks = m.get("content") or []
            uses = [b["toolUse"]["name"] for b in blocks if "toolUse" in b]
            text = "".join(b["text"] for b in blocks if "text" in b)
            if m["role"] == "assistant":
                text = block_content(blocks)  # the agent's reasoning is never shown to the user
                called = called + uses
                if not uses and text:
                    msgs.append({"role": "assistant", "content": text})
            elif text and not any("toolResult" in b for b in blocks):
                msgs.append({"role": "user", "content": text})
                called = []
        return UserView(msgs, called)

    async def next_user_message(self, agent) -> str | None:
        """The user's reply to the agent's last message, or None when the conversation has ended
        (a final stop message is added to the agent's messages for the record, never sampled on)."""
        if self.termination is not None:
            return None
        if self.solo:
            if not any(m["role"] == "assistant" for m in agent.messages):
                return ""  # the agent starts from its system prompt (the ticket) alone
            # the agent answered in text: only a stop token ends a solo run well (tau2); in its content,
            # never in its reasoning
            last = block_content(agent.messages[-1].get("content") or [])
            self.termination = "agent_stop" if STOP_TOKEN in last else "agent_error"
            return None
        steps = self.steps(agent)
        reason = self._limit(steps, agent)
        if reason is not None:
            self.termination = reason
            return None
        text = await self.simulator.reply(self.view(agent))
        if not text or not text.strip():
            self.termination = "user_error"  # tau2 refuses an empty user message
            return None
        self._user_turns += 1
        signal = user_signal(text)
        if signal is not None:
            self.termination, self.user_signal = "user_stop", signal
        reason = self._limit(steps + 1, agent)
        if reason is not None:
            self.termination = reason
        if self.termination is not None:
            agent.messages.append({"role": "user", "content": [{"text": text}]})
            return None
        return text

    def record(self, agent) -> dict[str, Any]:
        return {
            "kind": "tau2", "user": self.user, "solo": self.solo, "user_official": self.solo or self.simulator.official,
            "system_prompt": self.system_prompt, "official_prompt": self.system_prompt == "tau2",
            "termination": self.termination or "agent_error", "user_signal": self.user_signal,
            "steps": self.steps(agent) if agent is not None else 0,
            "tool_errors": self.tool_errors(agent) if agent is not None else self.session.tool_errors,
            "user_turns": self._user_turns, "max_steps": self.max_steps, "max_errors": self.max_errors,
            # the judge's spec (no key: only the name of its variable), for tau2_reward
            "judge": self.judge, "nl_assertions": self.nl_assertions,
        }


def tau2_conversation(task: dict, policy: tuple | None = None, **options: Any) -> Tau2Conversation:
    """The conversation factory for ``StrandsEnv(conversation="agentboost.environments.tau2.conversation:
    tau2_conversation", conversation_options={...})``: options are ``Tau2Conversation``'s fields
    (``user``, ``max_steps``, ``max_errors``, ``system_prompt``, ``compact_chars``, ``user_options``, ``solo``)."""
    known = set(Tau2Conversation.__dataclass_fields__) - {"row", "policy"}
    bad = sorted(set(options) - known)
    if bad:
        raise Tau2Error(f"unknown tau2 conversation option(s) {', '.join(bad)}; expected {', '.join(sorted(known))}")
    return Tau2Conversation(task, policy=policy, **options)
