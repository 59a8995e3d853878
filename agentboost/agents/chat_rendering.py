"""Strands messages -> the policy's chat template.

The renderer only ever produces *prompt* text: what the model is shown. Sampled tokens are kept
as sampled by the trainable model and never pass through here on their way to training.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..reasoning import block_reasoning
from .tool_parsers import ParsedToolCall, get_tool_formatter

HERMES_TOOLS_PROMPT = (
    "You are a function calling AI model. You may call one or more functions to assist with the "
    "user query. You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def tool_spec_to_openai(spec: dict[str, Any]) -> dict[str, Any]:
    """Strands ``ToolSpec`` -> the OpenAI function schema that chat templates expect."""
    schema = spec.get("inputSchema", {})
    schema = schema.get("json", schema) if isinstance(schema, dict) else {}
    return {
        "type": "function",
        "function": {"name": spec["name"], "description": spec.get("description", ""), "parameters": schema},
    }


def format_tool_call(name: str, arguments: dict[str, Any], tool_parser: str = "hermes") -> str:
    """One call as the model family of ``tool_parser`` writes it (a registered parser's formatter;
    Hermes ``<tool_call>{json}</tool_call>`` by default), e.g. for demonstrations."""
    return get_tool_formatter(tool_parser)([(name, arguments)])


def turn_key(text: str, tool_use_ids: list[str], reasoning: str = "") -> str:
    """Identifies an assistant turn the trainable model produced: by its tool-use ids (unique per
    call) or, for a plain answer, by its text (its content and, when it has some, its reasoning)."""
    if tool_use_ids:
        return "tools:" + ",".join(tool_use_ids)
    return "text:" + text if not reasoning else "reasoning:" + json.dumps([reasoning, text], ensure_ascii=False)


def turn_key_of(blocks: list[dict[str, Any]]) -> str:
    ids = [b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b]
    return turn_key("".join(b["text"] for b in blocks if "text" in b), ids, reasoning=block_reasoning(blocks))


def turn_signature(blocks: list[dict[str, Any]], with_ids: bool = True) -> str:
    """Everything of an assistant message that the model wrote: its content, its reasoning and
    its calls (names and parsed arguments; their ids unless ``with_ids`` is False). A message with
    the same signature as a turn the model sampled is that turn, whoever re-serialised it; any
    edit (a word, an argument, a dropped reasoning block) gives another signature."""
    calls = [[b["toolUse"].get("toolUseId") if with_ids else None, b["toolUse"].get("name"),
              b["toolUse"].get("input") or {}] for b in blocks if "toolUse" in b]
    text = "".join(b["text"] for b in blocks if "text" in b)
    return json.dumps([text, block_reasoning(blocks), calls], ensure_ascii=False, sort_keys=True)


def _text_of(blocks: list[dict[str, Any]], where: str) -> str:
    parts = []
    for b in blocks:
        if "text" in b:
            parts.append(b["text"])
        elif "json" in b:
            parts.append(json.dumps(b["json"], ensure_ascii=False))
        else:
            raise ValueError(f"{where}: content block of kind {sorted(b)} cannot be rendered as text")
    return "\n".join(parts)


class ChatRenderer:
    """Renders conversations with a tokenizer's chat template.

    Templates that render ``tools=`` (Qwen3) are used as they are; templates that know no tools
    (SmolLM2) get the tool specifications in the system prompt in Hermes format, and tool results
    as user turns wrapped in ``<tool_response>`` (the Hermes/Qwen convention).
    """

    def __init__(self, tokenizer, template_kwargs: dict[str, Any] | None = None,
                 turn_end_token: str | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; a chat model is required")
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        self.turn_end = turn_end_token or tokenizer.eos_token
        self.turn_end_id = tokenizer.convert_tokens_to_ids(self.turn_end)
        self.supports_tools = self._detect_tool_support()
        self._direct = direct_backend(tokenizer)
        # a conversation's head (up to its first end of turn: the system turn, the same in every
        # episode of a run) -> its ids, _SEEN_ONCE, or _NOT_SPLIT (encoding it apart changed the tokens)
        self._heads: dict[str, Any] = {}

    def _detect_tool_support(self) -> bool:
        probe = [{"role": "user", "content": "hi"}]
        tool = tool_spec_to_openai({"name": "probe_tool_xyz", "description": "", "inputSchema": {"json": {}}})
        with_tools = self.tokenizer.apply_chat_template(probe, tools=[tool], tokenize=False)
        return "probe_tool_xyz" in with_tools

    # -- Strands -> HF messages -------------------------------------------------------------
    def to_hf_messages(self, messages: list[dict[str, Any]], system_prompt: str | None,
                       tool_specs: list[dict[str, Any]] | None,
                       sampled: dict[str, str] | Callable[[list[dict[str, Any]]], str | None] | None = None,
                       ) -> tuple[list[dict[str, Any]], list | None]:
        """``sampled`` maps ``turn_key`` -> the text the model sampled for that assistant turn
        (or is a function from an assistant message's content blocks to that text, or None):
        such turns are rendered exactly as sampled (tool calls included, as the model wrote them),
        so agentboost never re-formats what the model saw; the template still decides what it
        does with them (e.g. Qwen3 dropping earlier reasoning)."""
        table = sampled or {}
        lookup = sampled if callable(sampled) else (lambda blocks: table.get(turn_key_of(blocks)))
        tools = [tool_spec_to_openai(s) for s in (tool_specs or [])]
        hf: list[dict[str, Any]] = []
        system = system_prompt or ""
        if tools and not self.supports_tools:
            block = HERMES_TOOLS_PROMPT.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
            system = f"{system}\n\n{block}" if system else block
        if system:
            hf.append({"role": "system", "content": system})
        for i, msg in enumerate(messages):
            role = msg.get("role")
            content = msg.get("content") or []
            if isinstance(content, str):
                content = [{"text": content}]
            where = f"message {i} ({role})"
            if role == "assistant":
                raw = lookup(content)
                hf.append({"role": "assistant", "content": raw} if raw is not None else self._assistant(content, where))
            elif role == "user":
                results = [b["toolResult"] for b in content if "toolResult" in b]
                others = [b for b in content if "toolResult" not in b]
                for r in results:
                    hf.append(self._tool_result(r, where))
                if others:
                    hf.append({"role": "user", "content": _text_of(others, where)})
            else:
                raise ValueError(f"{where}: unknown role {role!r}")
        return hf, (tools if tools and self.supports_tools else None)

    def _assistant(self, blocks: list[dict[str, Any]], where: str) -> dict[str, Any]:
        text_parts, calls = [], []
        for b in blocks:
            if "text" in b:
                text_parts.append(b["text"])
            elif "toolUse" in b:
                tu = b["toolUse"]
                calls.append(ParsedToolCall(name=tu["name"], arguments=tu.get("input") or {}, raw="",
                                            id=tu.get("toolUseId")))
            elif "reasoningContent" in b:
                continue
            else:
                raise ValueError(f"{where}: content block of kind {sorted(b)} cannot be rendered")
        text = "".join(text_parts)
        if self.supports_tools:
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                msg["tool_calls"] = [
                    {**({"id": c.id} if c.id is not None else {}), "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments}} for c in calls
                ]
            return msg
        rendered_calls = "\n".join(format_tool_call(c.name, c.arguments) for c in calls)
        return {"role": "assistant", "content": "\n".join(p for p in (text, rendered_calls) if p)}

    def _tool_result(self, result: dict[str, Any], where: str) -> dict[str, Any]:
        text = _text_of(result.get("content") or [], where)
        if self.supports_tools:
            msg = {"role": "tool", "content": text}
            if result.get("toolUseId") is not None:  # templates that pair results to calls print it
                msg["tool_call_id"] = result["toolUseId"]
            return msg
        return {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}

    # -- text and tokens --------------------------------------------------------------------
    def render(self, hf_messages: list[dict[str, Any]], tools: list | None, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            hf_messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def generation_prompt(self, hf_messages: list[dict[str, Any]], tools: list | None) -> str:
        """What ``add_generation_prompt`` appends (e.g. ``<|im_start|>assistant\n``)."""
        with_prompt = self.render(hf_messages, tools, add_generation_prompt=True)
        without = self.render(hf_messages, tools, add_generation_prompt=False)
        return with_prompt[len(without):] if with_prompt.startswith(without) else ""

    def encode(self, text: str) -> list[int]:
        direct = self._direct
        if direct is not None and direct.encode_special_tokens == self.tokenizer.split_special_tokens:
            return direct.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_conversation(self, text: str) -> list[int]:
        """The ids of a whole rendered conversation, with its head (everything up to and including
        its first end-of-turn token: the system turn with the tool specifications, hundreds of tokens
        that every episode of a run starts with) encoded once per renderer. The rest is encoded on
        its own, as every later call's new messages are (``TrainableModel``): a split right after a
        special token. The second time a head is seen (a head seen once, e.g. a task's own first
        turn, costs nothing extra), the split is checked against encoding the whole text; where
        they differ (a tokenizer whose pre-tokenizer treats the first piece of a text apart), that
        head is never split."""
        end = text.find(self.turn_end)
        if end < 0:
            return self.encode(text)
        cut = end + len(self.turn_end)
        head = text[:cut]
        ids = self._heads.pop(head, None)
        if ids is _SEEN_ONCE:
            whole = self.encode(text)
            ids = self.encode(head)
            if ids + self.encode(text[cut:]) != whole:
                ids = _NOT_SPLIT
        elif ids is None:
            ids = _SEEN_ONCE
            whole = self.encode(text)
        else:
            whole = self.encode(text) if ids is _NOT_SPLIT else ids + self.encode(text[cut:])
        self._heads[head] = ids  # the most recently used last
        if len(self._heads) > MAX_CACHED_HEADS:
            self._heads.pop(next(iter(self._heads)))
        return whole

    def decode(self, ids: list[int]) -> str:
        if self._direct is not None:
            return self._direct.decode(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False)


MAX_CACHED_HEADS = 64  # distinct conversation heads a renderer keeps (least recently used out first)
_SEEN_ONCE = object()
_NOT_SPLIT = object()

_PROBE = ("<|im_start|>system\nTools: {\"a\": [1, 2]}<|im_end|>\n<|im_start|>user\n  What is 17 + 25?\t\n"
          "é ü 你好 🙂<tool_call>\n{\"name\": \"add\"}\n</tool_call><|im_end|>\n<|endoftext|><think>x</think>")


def direct_backend(tokenizer):
    """The Rust tokenizer behind a fast tokenizer, where calling it directly gives exactly what the
    tokenizer's own ``__call__(text, add_special_tokens=False)`` and ``decode(ids,
    skip_special_tokens=False)`` give; None where it may not (a tokenizer class that overrides
    them, truncation or padding set on the backend, decoding that cleans up spaces). The wrapper's
    own Python (argument handling, batching one text, ``BatchEncoding``, converting every id)
    cost more than the encoding itself on every model call of an episode (``benchmarks/rollout_scale.py``).
    A probe text is checked both ways before the backend is used."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers: always through the tokenizer
        return None
    backend = getattr(tokenizer, "_tokenizer", None)
    cls = type(tokenizer)
    if (not isinstance(tokenizer, TokenizersBackend) or backend is None
            or cls.__call__ is not PreTrainedTokenizerBase.__call__
            or cls._encode_plus is not TokenizersBackend._encode_plus
            or cls.decode is not PreTrainedTokenizerBase.decode or cls._decode is not TokenizersBackend._decode
            or backend.truncation is not None or backend.padding is not None
            or getattr(tokenizer, "clean_up_tokenization_spaces", False) and type(backend.model).__name__ != "BPE"):
        return None
    try:
        ids = list(tokenizer(_PROBE, add_special_tokens=False)["input_ids"])
        if (backend.encode(_PROBE, add_special_tokens=False).ids != ids
                or backend.decode(ids, skip_special_tokens=False) != tokenizer.decode(ids, skip_special_tokens=False)):
            return None
    except Exception:  # any tokenizer the probe cannot run on keeps the slow path, which is always right
        return None
    return backend
