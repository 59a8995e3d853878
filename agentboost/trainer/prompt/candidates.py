"""Where a prompt run's candidates come from (``trainer/prompt/loop.py`` gates them): tier (a)'s
demonstrations from the step's episodes, tier (c)'s contrast of high- and low-advantage episodes,
and the reflective optimizer that reads it (``strands_optimizer``, a chat model built by
``models/chat.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...agents.strands_agent import AgentSpecError, check_history
from ...episodes.record import Episode
from ...errors import InputError
from ...models.chat import chat_model_spec
from ...run.prompt_policy import Demonstration, PromptPolicy


class PromptTrainingError(InputError):
    pass


# -- candidates ----------------------------------------------------------------------------------
def demonstration_from_episode(ep: Episode, source: str, step: int, advantage: float | None = None) -> Demonstration | None:
    """The episode's turns as a demonstration (role and content only: no usage figures or ids of
    the run), or None where they are not a whole exchange (a failed or cut-off episode)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in ep.messages if isinstance(m, dict)]
    try:
        check_history(messages)
    except AgentSpecError:
        return None
    if not messages:
        return None
    return Demonstration(task_id=ep.task_id, messages=messages, source=source, reward=ep.reward,
                         advantage=advantage, episode_id=ep.episode_id, step=step)


def policy_demonstrations(episodes: list[Episode], advantages: dict[str, float], n: int, step: int,
                          exclude: set[str]) -> list[Demonstration]:
    """The ``n`` highest-advantage successful episodes of the step, one per task, none of a task in
    ``exclude``; only positive advantages (better than its group)."""
    ranked = sorted((ep for ep in episodes if ep.succeeded and advantages.get(ep.episode_id, 0.0) > 0),
                    key=lambda ep: -advantages[ep.episode_id])
    out, seen = [], set(exclude)
    for ep in ranked:
        if ep.task_id in seen:
            continue
        demo = demonstration_from_episode(ep, "policy", step, advantages[ep.episode_id])
        if demo is not None:
            out.append(demo)
            seen.add(ep.task_id)
        if len(out) == n:
            break
    return out


@dataclass
class Contrast:
    """What a reflective optimizer reads: the current prompt and the step's best and worst
    episodes (each: task_id, question, transcript, reward, advantage)."""
    system_prompt: str
    instructions: list[str]
    high: list[dict[str, Any]]
    low: list[dict[str, Any]]


def transcript(ep: Episode) -> str:
    lines = []
    for m in ep.messages:
        for b in m.get("content") or []:
            if "text" in b:
                lines.append(f"{m['role']}: {b['text']}")
            elif "toolUse" in b:
                lines.append(f"{m['role']} calls {b['toolUse']['name']}({json.dumps(b['toolUse'].get('input'))})")
            elif "toolResult" in b:
                text = " ".join(c.get("text", "") for c in b["toolResult"].get("content") or [] if isinstance(c, dict))
                lines.append(f"tool result: {text}")
    if ep.error:
        lines.append(f"[episode {ep.status}: {ep.error}]")
    return "\n".join(lines)


def contrast(policy: PromptPolicy, episodes: list[Episode], advantages: dict[str, float], tasks: dict[str, dict],
             n: int = 2) -> Contrast | None:
    """The ``n`` highest- and lowest-advantage episodes of the step; None when no group differs."""
    scored = sorted((ep for ep in episodes if abs(advantages.get(ep.episode_id, 0.0)) > 1e-9),
                    key=lambda ep: advantages[ep.episode_id])
    if not scored:
        return None

    def view(ep):
        return {"task_id": ep.task_id, "question": tasks.get(ep.task_id, {}).get("question"),
                "transcript": transcript(ep), "reward": ep.reward, "advantage": advantages[ep.episode_id]}

    high = [view(ep) for ep in reversed(scored[-n:]) if advantages[ep.episode_id] > 0]
    low = [view(ep) for ep in scored[:n] if advantages[ep.episode_id] < 0]
    if not high or not low:
        return None
    return Contrast(policy.system_prompt, list(policy.instructions), high, low)


REFLECTION_PROMPT = """You improve the system prompt of an AI agent. Below are its current system prompt, \
episodes that scored above their group (high advantage) and episodes that scored below it (low advantage). \
Find what the better episodes did that the worse ones did not, and write ONE short instruction (one sentence) \
to add to the system prompt so that the agent does it every time. Reply with the instruction only."""


def strands_optimizer(contrast: Contrast, max_tokens: int = 200, **chat_model: Any) -> str | None:
    """A reflective optimizer backed by any chat model we do not train (``prompt.optimizer:
    agentboost.trainer.prompt.candidates:strands_optimizer``; ``prompt.optimizer_options``: the chat model
    as ``models/chat.py`` takes it, e.g. ``{provider: anthropic, model_id: ..., api_key_env:
    ANTHROPIC_API_KEY}``, and ``max_tokens``), built by Strands' own provider there: the key is read
    from the environment variable ``api_key_env`` at the call and never written anywhere. The model
    is separate from the policy. A reply cut at ``max_tokens`` is an error, never a half instruction."""
    chat = chat_model_spec(chat_model, "prompt.optimizer_options")

    def block(title, items):
        return "\n\n".join(f"## {title} {i + 1} (reward {e['reward']}, advantage {e['advantage']:+.2f})\n{e['transcript']}"
                           for i, e in enumerate(items))

    text = "\n\n".join(["# Current system prompt\n" + "\n".join([contrast.system_prompt, *contrast.instructions]),
                        block("High-advantage episode", contrast.high), block("Low-advantage episode", contrast.low)])
    reply, _ = chat.ask(REFLECTION_PROMPT, text, max_tokens)
    if reply is None:
        raise PromptTrainingError(f"prompt optimizer {chat.describe()}: its reply was cut at max_tokens={max_tokens}; "
                                  "raise prompt.optimizer_options.max_tokens")
    return reply.strip() or None
