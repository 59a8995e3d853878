"""Reasoning is recorded, never acted on: one notion of a model's reasoning, and one way to split a
sampled turn into reasoning and content.

A ``ReasoningFormat`` is a model family's markers (``<think>``/``</think>`` for Qwen3, DeepSeek-R1
and its distills, GLM-4.5, QwQ; none for models that do not think). ``split_reasoning`` is the one
function that splits a turn, the way a serving stack's reasoning parser does (vLLM's
``deepseek_r1``/``qwen3`` parsers, SGLang's):

- the first end marker closes the reasoning: everything before it (a leading start marker
  removed) is reasoning, what follows is content;
- no end marker, but a start marker or a prompt that already opened the block (R1 distills'
  templates end the generation prompt with ``<think>\\n``): the reasoning never closed: the whole
  turn is reasoning and there is no content (``terminated`` is False);
- neither: the whole turn is content.

Another complete block later in the content (a model that thinks again before a second call) is
reasoning too; one that opens there and never closes makes the rest of the turn reasoning and the
turn unterminated.

The trainable model hands Strands the split as a ``reasoningContent`` block and a ``text`` block;
everything that reads an answer (tool-call parsing, the final answer, rewards, a simulated user,
exports) reads the content only. The sampled tokens are never touched: the split is of the decoded
text, for readers. Text that still holds its reasoning (an answer given as plain text, a message
from a model provider without a reasoning parser) is split with the default format, ``THINK``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InputError


@dataclass(frozen=True)
class ReasoningFormat:
    """A model family's reasoning markers; ``none`` (no markers) for models that do not think."""

    name: str
    start: str = ""
    end: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.end)


NONE = ReasoningFormat("none")
THINK = ReasoningFormat("think", "<think>", "</think>")

# name -> format; family names are aliases of the format their templates use
_FORMATS: dict[str, ReasoningFormat] = {
    "none": NONE,
    "think": THINK,
    "mistral": ReasoningFormat("mistral", "[THINK]", "[/THINK]"),  # Magistral
    "seed_oss": ReasoningFormat("seed_oss", "<seed:think>", "</seed:think>"),
}
_FAMILIES = {"qwen3": "think", "deepseek_r1": "think", "deepseek-r1": "think", "qwq": "think", "glm45": "think",
             "glm-4.5": "think", "magistral": "mistral"}
SETTINGS_HELP = "auto (from the chat template), none, or a format or family name"

# the named status of a turn whose reasoning never closed: it has no content
UNTERMINATED_REASONING = "unterminated_reasoning"


class ReasoningFormatError(InputError):
    pass


def register_reasoning_format(fmt: ReasoningFormat) -> None:
    """Adds a format (for a family whose markers are not in the table); a name holds one format."""
    taken = _FORMATS.get(fmt.name) or _FORMATS.get(_FAMILIES.get(fmt.name, ""))
    if taken is not None and taken != fmt:
        raise ReasoningFormatError(f"reasoning format {fmt.name!r} is already registered as {taken}")
    if not fmt.end:
        raise ReasoningFormatError(f"reasoning format {fmt.name!r} needs an end marker")
    _FORMATS[fmt.name] = fmt


def reasoning_formats() -> list[str]:
    return sorted({*_FORMATS, *_FAMILIES})


def get_reasoning_format(name: str) -> ReasoningFormat:
    """A format by its name or a family's (``think``, ``qwen3``, ``deepseek_r1``, ``none``, ...)."""
    key = name.strip().lower()
    fmt = _FORMATS.get(key) or _FORMATS.get(_FAMILIES.get(key, ""))
    if fmt is None:
        raise ReasoningFormatError(f"unknown reasoning format {name!r}; expected auto or one of "
                                   f"{', '.join(reasoning_formats())}")
    return fmt


def detect_reasoning_format(chat_template: str | None) -> ReasoningFormat:
    """The format whose end marker the chat template mentions (the most specific one when several
    do), else ``NONE``: a template that knows reasoning splits or writes its markers."""
    if not chat_template:
        return NONE
    if isinstance(chat_template, dict):  # tokenizers with several named templates
        chat_template = "\n".join(str(v) for v in chat_template.values())
    found = [f for f in _FORMATS.values() if f.enabled and f.end in chat_template]
    return max(found, key=lambda f: len(f.end)) if found else NONE


def resolve_reasoning_format(setting: str | ReasoningFormat | None, tokenizer: Any = None) -> ReasoningFormat:
    """``setting`` as configured (``agent.reasoning``): ``auto``/None detects it from the
    tokenizer's chat template; a name picks it; a ``ReasoningFormat`` is taken as it is."""
    if isinstance(setting, ReasoningFormat):
        return setting
    if setting is None or str(setting).strip().lower() == "auto":
        return detect_reasoning_format(getattr(tokenizer, "chat_template", None))
    return get_reasoning_format(str(setting))


@dataclass(frozen=True)
class ReasoningSplit:
    reasoning: str  # "" when the turn has none
    content: str  # what the model said or did: the only part anything acts on
    terminated: bool = True  # False: a reasoning block opened and never closed

    @property
    def status(self) -> str | None:
        """``unterminated_reasoning`` when the reasoning never closed, else None."""
        return None if self.terminated else UNTERMINATED_REASONING


def opens_reasoning(prompt_text: str, fmt: ReasoningFormat) -> bool:
    """Whether the prompt's generation prompt already opened a reasoning block: the prompt ends
    with the start marker (whitespace aside), as R1 distills' templates do."""
    if not fmt.enabled or not fmt.start:
        return False
    return prompt_text.rstrip().endswith(fmt.start)


def split_reasoning(text: str, fmt: ReasoningFormat = THINK, opened: bool = False) -> ReasoningSplit:
    """Splits a sampled turn (decoded text) into reasoning and content by ``fmt``'s markers;
    ``opened``: the prompt already opened the block (see ``opens_reasoning``)."""
    if not fmt.enabled:
        return ReasoningSplit("", text or "", True)
    if not text:
        return ReasoningSplit("", "", not opened)
    start, end = fmt.start, fmt.end
    first = text.find(end)
    if first < 0:
        if opened or (start and start in text):
            return ReasoningSplit(_strip_start(text, start).strip(), "", False)
        return ReasoningSplit("", text, True)
    reasoning = [_strip_start(text[:first], start).strip()]
    content: list[str] = []
    rest = text[first + len(end):]
    terminated = True
    while start and start in rest:  # a later block: reasoning too
        s = rest.index(start)
        content.append(rest[:s])
        e = rest.find(end, s + len(start))
        if e < 0:
            reasoning.append(rest[s + len(start):].strip())
            rest, terminated = "", False
            break
        reasoning.append(rest[s + len(start):e].strip())
        rest = rest[e + len(end):]
    content.append(rest)
    return ReasoningSplit("\n\n".join(r for r in reasoning if r), "".join(content).strip(), terminated)


def _strip_start(text: str, start: str) -> str:
    if not start:
        return text
    i = text.find(start)
    return text if i < 0 else text[:i] + text[i + len(start):]


def answer_content(text: str | None, fmt: ReasoningFormat = THINK) -> str | None:
    """The content of an answer that may still hold its reasoning (given as plain text, or from a
    model provider that did not split it); None when there is no text or the reasoning never
    closed. Text without markers comes back as it is."""
    if text is None:
        return None
    split = split_reasoning(text, fmt)
    return split.content if split.terminated or split.content else None


# -- Strands messages -------------------------------------------------------------------------
def reasoning_block(text: str) -> dict[str, Any]:
    """A Strands ``reasoningContent`` content block holding ``text``."""
    return {"reasoningContent": {"reasoningText": {"text": text}}}


def split_blocks(split: ReasoningSplit) -> list[dict[str, Any]]:
    """The Strands content blocks of a split turn: its reasoning, then its content (each only when
    not empty), as the trainable model streams them."""
    return ([reasoning_block(split.reasoning)] if split.reasoning else []) + (
        [{"text": split.content}] if split.content else [])


def block_reasoning(blocks: list[dict[str, Any]]) -> str:
    """The reasoning text of a message's content blocks (its ``reasoningContent`` blocks)."""
    parts = []
    for b in blocks or []:
        r = b.get("reasoningContent") if isinstance(b, dict) else None
        if isinstance(r, dict):
            parts.append((r.get("reasoningText") or {}).get("text") or "")
    return "\n\n".join(p for p in parts if p)


def block_content(blocks: list[dict[str, Any]], fmt: ReasoningFormat = THINK, sep: str = "") -> str:
    """The content of a message's content blocks: its ``text`` blocks, joined by ``sep``, with any
    reasoning a text block still holds (a provider that did not split it) left out by ``fmt``;
    "" when the reasoning never closed."""
    text = sep.join(b["text"] for b in blocks or [] if isinstance(b, dict) and "text" in b)
    return answer_content(text, fmt) or ""


def split_message(message: dict[str, Any], fmt: ReasoningFormat = THINK) -> dict[str, Any]:
    """An assistant message whose text blocks still hold reasoning, with the reasoning moved into a
    ``reasoningContent`` block before its text (other blocks, and other messages, unchanged): what
    exports show of episodes recorded before the split, or of providers that did not split."""
    blocks = message.get("content")
    if message.get("role") != "assistant" or not isinstance(blocks, list) or not fmt.enabled:
        return message
    text = "".join(b["text"] for b in blocks if isinstance(b, dict) and "text" in b)
    if fmt.end not in text and not (fmt.start and fmt.start in text):
        return message
    split = split_reasoning(text, fmt)
    out, placed = [], False
    for b in blocks:
        if isinstance(b, dict) and "text" in b:
            if not placed:
                out.extend(split_blocks(split))
                placed = True
            continue
        out.append(b)
    return {**message, "content": out}
