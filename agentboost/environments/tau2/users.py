"""User simulators for tau2 conversations, behind one small interface: ``await user.reply(view)``
gives the user's next message as text (which may carry tau2's ``###STOP###``, ``###TRANSFER###``
or ``###OUT-OF-SCOPE###``).

- ``scripted``: deterministic, from the task's user scenario (reason for call, then the known
  information, then a confirmation, then ``###STOP###``; ``###TRANSFER###`` right after the agent
  transfers to a human). For tests, CI and CPU smoke runs: its scores are a training proxy, not
  tau2's protocol.
- ``completions``: an LLM user, as tau2 runs it: tau2's user-simulator guidelines and the task's
  scenario as the system prompt (read from the installed tau2 package), the conversation with the
  roles flipped, rendered with the simulator model's own chat template and sampled from any
  OpenAI-compatible ``/v1/completions`` endpoint that takes token ids (vLLM, ``agentboost serve``),
  or from the policy itself (``url="policy"``).
- ``chat``: the same LLM user (tau2's system prompt, the roles flipped, tau2's stop tokens) on any
  chat model through Strands' own providers (``agentboost.models.chat``: a hosted frontier model,
  as tau2's published runs use, or any OpenAI-compatible chat endpoint). Options: the chat
  model's spec (``provider``, ``model_id``, ``base_url``, ``api_key_env``, ``params``, ...).

Telecom's user-side tools (dual control) are not driven by these simulators yet: telecom runs in
tau2's solo mode (``Tau2Conversation(solo=True)``), which needs no user."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...reasoning import opens_reasoning, resolve_reasoning_format, split_reasoning
from .domain import Tau2Error, _tau2

STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
USER_SIGNALS = {STOP: "stop", TRANSFER: "transfer", OUT_OF_SCOPE: "out_of_scope"}
USER_KINDS = ("scripted", "completions", "chat")


def user_signal(text: str) -> str | None:
    """Which of tau2's user stop tokens ``text`` carries ("stop", "transfer", "out_of_scope"), if any."""
    for token, name in USER_SIGNALS.items():
        if token in text:
            return name
    return None


@dataclass
class UserView:
    """What the user sees: the text turns so far (``{"role": "assistant"|"user", "content"}``,
    the agent's tool calls and results excluded, as in tau2) and the names of the tools the agent
    called since the user's last message."""
    messages: list[dict[str, str]]
    agent_tool_calls: list[str] = field(default_factory=list)


def _scenario(row: dict) -> dict[str, Any]:
    instr = (row.get("user_scenario") or {}).get("instructions")
    if isinstance(instr, str):
        return {"reason_for_call": instr}
    return dict(instr or {})


class ScriptedUser:
    """A deterministic user from the task's scenario. Not tau2's protocol: a training proxy."""
    kind = "scripted"
    official = False

    def __init__(self, row: dict, confirm: str = "Yes, please go ahead.",
                 goodbye: str = "Thank you, that is all. " + STOP, turns: int | None = None):
        """``turns``: how many of the scripted messages (reason, known info, confirmation) to say
        before the goodbye (default: all); 1 makes the cheapest conversation (CPU smoke runs)."""
        s = _scenario(row)
        reason = (s.get("reason_for_call") or "").strip()
        if not reason:
            raise Tau2Error(f"task {row.get('task_id')}: the user scenario has no reason_for_call for the scripted user")
        self.turns = [reason] + [t.strip() for t in (s.get("known_info"),) if t and t.strip()] + [confirm]
        if turns is not None:
            if turns < 1:
                raise Tau2Error(f"the scripted user's turns must be >= 1, got {turns}")
            self.turns = self.turns[:turns]
        self.goodbye = goodbye

    async def reply(self, view: UserView) -> str:
        if any("transfer" in name for name in view.agent_tool_calls):
            return TRANSFER
        said = sum(1 for m in view.messages if m["role"] == "user")
        return self.turns[said] if said < len(self.turns) else self.goodbye


def _module_strings(relpath: str) -> dict[str, str]:
    """The module-level string constants of an installed tau2 source file, read without importing
    it (tau2's agent and user modules import litellm, which is not installed)."""
    import tau2

    src = Path(tau2.__file__).parent / relpath
    out = {}
    for node in ast.parse(src.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "strip":
            value = value.func.value  # """...""".strip()
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = value.value
    return out


@lru_cache(maxsize=None)
def tau2_text(relpath: str, name: str) -> str:
    """A string constant of the installed tau2 (e.g. the agent instruction or a prompt template)."""
    _tau2()
    value = _module_strings(relpath).get(name)
    if value is None:
        raise Tau2Error(f"the installed tau2 has no {name} in {relpath} (another tau2 version?)")
    return value.strip()


def user_system_prompt(row: dict) -> str:
    """tau2's user-simulator system prompt for the task: its guidelines (the installed package's
    data file; the tools variant is for telecom's dual control) and the task's scenario."""
    from tau2.utils.utils import DATA_DIR

    from .domain import task_from_row

    guidelines = (Path(DATA_DIR) / "tau2" / "user_simulator" / "simulation_guidelines.md").read_text(encoding="utf-8")
    template = tau2_text("user/user_simulator.py", "SYSTEM_PROMPT")
    return template.format(global_user_sim_guidelines=guidelines, instructions=str(task_from_row(row).user_scenario))


@lru_cache(maxsize=None)
def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@lru_cache(maxsize=None)
def _http_sampler(url: str, model: str | None):
    # one client per server and process: its HTTP sessions (one per event loop) outlive episodes
    from ...sampling.http_sampler import HttpSampler

    return HttpSampler(url, model=model)


class CompletionsUser:
    """An LLM user with tau2's guidelines, sampled from a /v1/completions endpoint (prompt as token
    ids) or from the policy's own sampler."""
    kind = "completions"
    official = True  # tau2's protocol; how good a user the model is, is the user's choice

    def __init__(self, row: dict, url: str | None = None, tokenizer: Any = None, model: str | None = None,
                 temperature: float = 0.0, max_new_tokens: int = 256, sampler: Any = None):
        from ...sampling.protocol import SamplingParams

        if sampler is None and not url:
            raise Tau2Error("the completions user simulator needs url (an OpenAI-compatible server) or the policy")
        if tokenizer is None:
            raise Tau2Error("the completions user simulator needs tokenizer (a path with a chat template)")
        if isinstance(tokenizer, str):
            tokenizer = _tokenizer(tokenizer)
        if sampler is None:
            sampler = _http_sampler(url, model)
        self.sampler, self.tokenizer = sampler, tokenizer
        # a thinking simulator's reasoning is never said to the agent (nor read for stop tokens)
        self.reasoning = resolve_reasoning_format("auto", tokenizer)
        self.system = user_system_prompt(row)
        stop = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        self.params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, stop_token_ids=stop)

    def prompt_text(self, view: UserView) -> str:
        # tau2's user sees the conversation with the roles flipped: the agent is its "user"
        flip = {"assistant": "user", "user": "assistant"}
        msgs = [{"role": "system", "content": self.system}] + [
            {"role": flip[m["role"]], "content": m["content"]} for m in view.messages]
        return self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    def prompt_ids(self, view: UserView) -> list[int]:
        return list(self.tokenizer(self.prompt_text(view), add_special_tokens=False)["input_ids"])

    async def reply(self, view: UserView) -> str:
        """The simulator's content: its reasoning left out ("" when that never closed, which the
        conversation ends as ``user_error``)."""
        prompt = self.prompt_text(view)
        ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        result = await self.sampler.sample(ids, self.params)
        text = self.tokenizer.decode(result.response_ids, skip_special_tokens=True)
        split = split_reasoning(text, self.reasoning, opened=opens_reasoning(prompt, self.reasoning))
        return split.content.strip()


class ChatUser:
    """tau2's LLM user on a chat model through its Strands provider: tau2's user system prompt, the
    conversation with the roles flipped (the agent is the simulator's "user"), the reply's text
    (a reasoning block left out). An outage of the model's service propagates: the episode is
    ``aborted`` (``models.chat.is_outage``), never scored."""
    kind = "chat"
    official = True

    def __init__(self, row: dict, temperature: float = 0.0, max_new_tokens: int = 256, **chat: Any):
        from ...models.chat import chat_model_spec

        self.chat = chat_model_spec(chat, "tau2 chat user (env.conversation_options.user_options)")
        self.chat.api_key()  # a missing key is said when the conversation starts, by name
        self.system = user_system_prompt(row)
        self.temperature, self.max_new_tokens = temperature, max_new_tokens

    def messages(self, view: UserView) -> list[dict[str, Any]]:
        """The flipped conversation as Strands messages (the last one is what the simulator answers)."""
        flip = {"assistant": "user", "user": "assistant"}
        return [{"role": flip[m["role"]], "content": [{"text": m["content"] or " "}]} for m in view.messages]

    async def reply(self, view: UserView) -> str:
        from strands import Agent
        from strands.types.exceptions import MaxTokensReachedException

        msgs = self.messages(view)
        model = self.chat.build(temperature=self.temperature, max_tokens=self.max_new_tokens, tools=False)
        agent = Agent(model=model, system_prompt=self.system, messages=msgs[:-1], callback_handler=None)
        try:
            await agent.invoke_async(msgs[-1]["content"])
        except MaxTokensReachedException:
            pass  # the reply cut at max_new_tokens is what was said (Strands keeps it in the history)
        last = agent.messages[-1] if agent.messages and agent.messages[-1]["role"] == "assistant" else {}
        return "".join(b.get("text", "") for b in last.get("content") or []).strip()


def make_user(kind: str, row: dict, policy: tuple[Any, Any] | None = None, **options: Any):
    """A user simulator of ``kind`` for the task ``row``; ``policy`` is (sampler, tokenizer) of the
    episode's policy, for ``completions`` with ``url="policy"``."""
    if kind == "scripted":
        return ScriptedUser(row, **options)
    if kind == "completions":
        if options.get("url") == "policy":
            if policy is None:
                raise Tau2Error("user url 'policy' needs the episode's sampler (run the episode through run_episode)")
            options = {k: v for k, v in options.items() if k not in ("url", "tokenizer")}
            return CompletionsUser(row, sampler=policy[0], tokenizer=policy[1], **options)
        return CompletionsUser(row, **options)
    if kind == "chat":
        return ChatUser(row, **options)
    raise Tau2Error(f"unknown user simulator {kind!r}; expected one of {', '.join(USER_KINDS)}")
