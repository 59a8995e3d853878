"""The prompt policy: the agent's prompt as a versioned artifact that training changes instead of
weights (``algorithm.policy: prompt``, ``trainer/prompt/loop.py``).

It holds the base system prompt, instructions appended to it (from a user's pool or an optimizer
model's reflective edits), and demonstrations: whole episodes (Strands messages: the question, the
tool calls, their results, the answer) that the agent finds in its history before each task
(``StrandsAgentSpec.history``). Every change carries its evidence: where it came from and the
paired held-out figures that let it in; rejected candidates are kept too, with theirs.

Saved as ``prompt_policy.json`` in each checkpoint of a prompt run; ``agentboost rollout`` and
``agentboost eval`` take ``--prompt-policy PATH``, and a weights run takes ``agent.prompt_policy``
(prompt first, then GRPO from the improved prompt).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.strands_agent import AgentSpecError, StrandsAgentSpec, check_history
from ..errors import InputError
from ..files import atomic_write_text

FORMAT = 1
FILE_NAME = "prompt_policy.json"


class PromptPolicyError(InputError):
    pass


@dataclass
class Demonstration:
    task_id: str
    messages: list[dict[str, Any]]  # Strands messages, user first, ending with the assistant's answer
    source: str  # "policy" (a sampled episode of the step) or "solution" (played from the task's solution)
    reward: float | None = None
    advantage: float | None = None  # the episode's group advantage (policy source)
    episode_id: str = ""
    step: int = 0


@dataclass
class PromptPolicy:
    system_prompt: str
    instructions: list[str] = field(default_factory=list)
    demonstrations: list[Demonstration] = field(default_factory=list)
    version: int = 0  # accepted changes so far
    # every candidate tried: tier, change, evidence, the gate's paired figures, accepted or not
    history: list[dict[str, Any]] = field(default_factory=list)
    format: int = FORMAT

    def full_system_prompt(self) -> str:
        """The system prompt the agent gets: the base, then each accepted instruction on its own line."""
        return "\n".join([self.system_prompt, *self.instructions]) if self.instructions else self.system_prompt

    def history_messages(self) -> list[dict[str, Any]]:
        return [m for d in self.demonstrations for m in d.messages]

    def apply(self, spec: StrandsAgentSpec) -> StrandsAgentSpec:
        """``spec`` running with this prompt: its system prompt and demonstration turns replaced."""
        return dataclasses.replace(spec, system_prompt=self.full_system_prompt(), history=self.history_messages())

    def for_chat(self, messages: list[dict[str, Any]], system: str | None) -> tuple[list[dict[str, Any]], str]:
        """A served chat request (``agentboost serve --prompt-policy``) with this prompt: the
        client's system prompt (the artifact's base prompt when it sends none) followed by the
        accepted instructions, and the demonstration turns before the client's messages. A client's
        own system prompt is kept, not replaced: the instructions and demonstrations are what
        training added, the base prompt is the agent's own."""
        base = system if system else self.system_prompt
        return [*self.history_messages(), *messages], "\n".join([base, *self.instructions])

    def with_change(self, **changes: Any) -> "PromptPolicy":
        """A candidate: a copy with ``changes`` (instructions, demonstrations) and the next version."""
        return dataclasses.replace(self, version=self.version + 1, history=list(self.history), **changes)

    def summary(self) -> str:
        return (f"prompt policy v{self.version}: {len(self.instructions)} instructions, "
                f"{len(self.demonstrations)} demonstrations")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1))
        return path

    @classmethod
    def from_dict(cls, data: Any, where: str = "prompt policy") -> "PromptPolicy":
        if not isinstance(data, dict):
            raise PromptPolicyError(f"{where}: expected a JSON object, got {type(data).__name__}")
        if data.get("format") != FORMAT:
            raise PromptPolicyError(f"{where}: format {data.get('format')!r} is not {FORMAT} (written by another "
                                    "agentboost version?)")
        if not isinstance(data.get("system_prompt"), str):
            raise PromptPolicyError(f"{where}: system_prompt must be text")
        if not (isinstance(data.get("instructions", []), list)
                and all(isinstance(i, str) for i in data.get("instructions", []))):
            raise PromptPolicyError(f"{where}: instructions must be a list of text")
        names = {f.name for f in dataclasses.fields(Demonstration)}
        demos = []
        for i, d in enumerate(data.get("demonstrations", [])):
            if not isinstance(d, dict) or not {"task_id", "messages", "source"} <= set(d) or set(d) - names:
                raise PromptPolicyError(f"{where}: demonstrations[{i}] must hold task_id, messages and source "
                                        f"(and only {', '.join(sorted(names))})")
            try:
                check_history(d["messages"])
            except AgentSpecError as e:
                raise PromptPolicyError(f"{where}: demonstrations[{i}] ({d['task_id']}): {e}") from None
            demos.append(Demonstration(**d))
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise PromptPolicyError(f"{where}: unknown keys {sorted(unknown)}")
        return cls(system_prompt=data["system_prompt"], instructions=list(data.get("instructions", [])),
                   demonstrations=demos, version=int(data.get("version", 0)),
                   history=list(data.get("history", [])), format=FORMAT)


def policy_file(path: str | Path) -> Path:
    """The ``prompt_policy.json`` that ``path`` names: the file itself, a checkpoint directory, or a
    prompt run directory (its newest intact checkpoint)."""
    p = Path(path)
    if p.is_file():
        return p
    if (p / FILE_NAME).is_file() and not (p / "checkpoints").is_dir():
        return p / FILE_NAME
    if (p / "checkpoints").is_dir():
        from .checkpoint import CheckpointError, newest_intact

        try:
            ckpt = newest_intact(p)
        except CheckpointError as e:
            raise PromptPolicyError(f"prompt policy {p}: {e}") from None
        if not (ckpt / FILE_NAME).is_file():
            raise PromptPolicyError(f"prompt policy {p}: its checkpoint {ckpt.name} holds no {FILE_NAME} "
                                    "(a weights run, not a prompt run?)")
        return ckpt / FILE_NAME
    raise PromptPolicyError(f"prompt policy {p}: no such file, checkpoint or run directory")


def load_prompt_policy(path: str | Path) -> PromptPolicy:
    f = policy_file(path)
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise PromptPolicyError(f"prompt policy {f}: not readable JSON ({e})") from None
    return PromptPolicy.from_dict(data, str(f))
