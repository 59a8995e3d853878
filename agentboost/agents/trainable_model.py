"""The trainable model: a ``strands.models.Model`` that keeps the conversation as tokens.

The first call renders the conversation with the policy's chat template. Every later call
appends to the previous prompt + sampled tokens only the tokens of what is new (the template's
end-of-turn text, tool results, user turns, the generation prompt), so a whole multi-turn episode
is one training sequence and the sampled tokens are trained on exactly as they were sampled.

The rule: a call extends the previous one only if the chat template's full render of the
conversation, as text, starts with exactly what the model saw plus what it sampled plus the
template's end-of-turn text. Any difference (a reasoning block dropped or emptied by the template,
a turn laid out differently, history trimmed or rewritten) means: the call's prompt is a fresh
render of the whole conversation, the episode gets a new segment, and the split is counted with
its reason (``ModelCall.rerender_reason``, ``Episode.split_reasons``). Assistant turns are handed
to the template exactly as sampled, so agentboost's own formatting never causes a split.

``always_extend=True`` (the veRL agent loop, which needs one row per episode) never splits: where
the template would re-render, the new messages' text is still appended to the tokens so far, and
each such place is counted by its reason in ``forced_extensions``. ``sequence_budget=(prompt,
response)`` bounds the whole sequence as veRL pads it: the first prompt must fit ``prompt`` tokens
and everything after it (sampled and tool/user tokens together) ``response`` tokens; an episode
that would exceed it ends ``truncated`` instead of being cut later.

Reasoning is recorded, never acted on: each sampled turn is split once by the model family's
reasoning format (``reasoning``: ``auto`` reads it from the chat template; see
``agentboost.reasoning``) into reasoning and content. Strands gets the reasoning as a
``reasoningContent`` block and the content as ``text``; tool calls are parsed from the content
only. Calls drafted inside the reasoning are parsed with the same parser and counted
(``ModelCall.calls_in_reasoning``), never run; a turn whose reasoning never closes has no content
(``ModelCall.reasoning_status`` ``unterminated_reasoning``). The tokens stay exactly as sampled.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any, AsyncGenerator, AsyncIterable, TypeVar

from pydantic import BaseModel
from strands.models import Model

from ..episodes.record import ModelCall, SplitReason, plain_copy
from ..reasoning import (
    THINK,
    UNTERMINATED_REASONING,
    ReasoningFormat,
    opens_reasoning,
    resolve_reasoning_format,
    split_reasoning,
)
from ..sampling.protocol import Sampler, SamplingParams, derive_seed
from .chat_rendering import ChatRenderer, turn_signature
from .tool_parsers import (
    ParsedOutput,
    ParsedToolCall,
    get_tool_id_maker,
    get_tool_parser,
    parse_tool_calls,
    resolve_tool_parser,
)

T = TypeVar("T", bound=BaseModel)


class EpisodeLimitReached(RuntimeError):
    """A per-episode limit (model calls or total response tokens) ended the episode."""


class PromptTooLong(RuntimeError):
    """The first prompt alone does not fit the sequence budget's prompt part."""


class HistoryRewritten(RuntimeError):
    """In always-extend mode, the agent rewrote earlier messages: there is no honest way to keep
    the conversation as one token sequence."""


class TrainableModel(Model):
    def __init__(self, sampler: Sampler, renderer: ChatRenderer, sampling: SamplingParams,
                 tool_parser: str = "auto", max_model_calls: int | None = None,
                 max_response_tokens: int | None = None, reasoning: str | ReasoningFormat | None = "auto",
                 always_extend: bool = False, sequence_budget: tuple[int, int] | None = None):
        self.sampler = sampler
        self.renderer = renderer
        self.sampling = sampling
        # the family's tool-call format: "auto" reads it from the chat template (tool_parsers.resolve_tool_parser)
        tool_parser = resolve_tool_parser(tool_parser, getattr(renderer.tokenizer, "chat_template", None),
                                          getattr(renderer, "supports_tools", True))
        self.parse = get_tool_parser(tool_parser)
        # ids for calls the model wrote none for, of the form the family's template accepts
        self.make_tool_call_id = get_tool_id_maker(tool_parser)
        self._tool_call_ids: set[str] = set()  # every id given in this episode (Strands pairs results by id)
        # the model family's reasoning markers (none for models that do not think)
        self.reasoning = resolve_reasoning_format(reasoning, renderer.tokenizer)
        self.config: dict[str, Any] = {"model_id": "agentboost-trainable", "tool_parser": tool_parser,
                                       "reasoning": self.reasoning.name}
        self.max_model_calls = max_model_calls
        self.max_response_tokens = max_response_tokens
        # the markers the split rule looks for when the template drops a reasoning block: the
        # family's, or the common <think> ones when reasoning is off (the template may still drop them)
        self._reasoning_markers = self.reasoning if self.reasoning.enabled else THINK
        # what the episode record is built from
        self.calls: list[ModelCall] = []
        self.parsed: list[ParsedOutput] = []
        self.rerenders = 0
        self.always_extend = always_extend
        self.copy_history = True  # see sample_turn: False where the caller never changes its messages
        self.sequence_budget = sequence_budget
        # always-extend mode: SplitReason value -> how often the template would have re-rendered
        self.forced_extensions: dict[str, int] = {}
        # the previous call, to extend it
        self._prev_messages: list[dict[str, Any]] | None = None
        self._prev_prompt_text = ""
        self._prev_response_text = ""
        self._prev_hf: tuple[list, list | None] = ([], None)
        self._prev_system: str | None = None
        self._prev_tools: list | None = None
        # turn_signature -> the text sampled for that assistant turn (rendered back exactly so)
        self._sampled_exact: dict[str, str] = {}
        self._sampled_loose: dict[str, str | None] = {}

    # -- strands.models.Model ---------------------------------------------------------------
    def update_config(self, **model_config: Any) -> None:
        # Sampling parameters belong to the run's configuration; the agent cannot change them.
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return dict(self.config)

    @property
    def malformed_tool_calls(self) -> int:
        return sum(len(p.malformed) for p in self.parsed)

    @property
    def calls_in_reasoning(self) -> int:
        """Tool calls drafted inside reasoning (parsed, never executed)."""
        return sum(c.calls_in_reasoning for c in self.calls)

    @property
    def unterminated_reasoning(self) -> int:
        """Turns whose reasoning never closed (they have no content)."""
        return sum(1 for c in self.calls if c.reasoning_status == UNTERMINATED_REASONING)

    @property
    def response_tokens(self) -> int:
        return sum(len(c.response_ids) for c in self.calls)

    async def sample_turn(self, messages, tool_specs=None, system_prompt=None) -> "SampledTurn":
        """One model call: the prompt (an extension of the previous call, or a counted re-render),
        the sample under the run's sampling settings, the record, the turn split into reasoning,
        content and tool calls. The one implementation behind both ``stream`` (Strands in-process)
        and the gateway (``agentboost.gateway``, any agent over HTTP)."""
        if self.max_model_calls is not None and len(self.calls) >= self.max_model_calls:
            raise EpisodeLimitReached(f"the episode reached its limit of {self.max_model_calls} model calls")
        budget = self.sampling.max_new_tokens
        if self.max_response_tokens is not None:
            left = self.max_response_tokens - self.response_tokens
            if left <= 0:
                raise EpisodeLimitReached(
                    f"the episode reached its limit of {self.max_response_tokens} response tokens")
            budget = min(budget, left)
        before = self._snapshot()
        prompt_ids, prompt_text, reason = self._prompt(messages, system_prompt, tool_specs)
        if self.sequence_budget is not None:
            budget = min(budget, self._sequence_room(prompt_ids))
        params = SamplingParams(
            temperature=self.sampling.temperature, top_p=self.sampling.top_p, max_new_tokens=budget,
            stop_token_ids=self.sampling.stop_token_ids,
            seed=None if self.sampling.seed is None else derive_seed(self.sampling.seed, len(self.calls)),
        )
        started = time.time()
        t0 = time.perf_counter()
        try:
            result = await self.sampler.sample(prompt_ids, params)
        except BaseException:
            self._restore(before)  # nothing was sampled: the state is as before the call
            raise
        call = ModelCall(
            prompt_ids=prompt_ids, response_ids=list(result.response_ids),
            response_logprobs=list(result.logprobs), finish_reason=result.finish_reason,
            started_at=started, latency_s=time.perf_counter() - t0, rerendered=reason is not None,
            rerender_reason=reason.value if reason is not None else None,
            weight_version=result.weight_version,
        )
        self.calls.append(call)
        ids = call.response_ids
        if ids and ids[-1] == self.renderer.turn_end_id or (ids and ids[-1] in params.stop_token_ids):
            ids = ids[:-1]
        text = self.renderer.decode(ids)
        # reasoning is recorded, never acted on: tool calls are parsed from the content only
        split = split_reasoning(text, self.reasoning, opened=opens_reasoning(prompt_text, self.reasoning))
        parsed = parse_tool_calls(self.parse, split.content, tool_specs)  # tool schemas type bare-text values
        self.parsed.append(parsed)
        call.reasoning_status = split.status
        call.calls_in_reasoning = (len(parse_tool_calls(self.parse, split.reasoning, tool_specs).tool_calls)
                                   if split.reasoning else 0)
        # Strands changes its message list in place as the agent goes on: kept as a copy. A caller
        # whose messages never change after the call (the gateway parses each request anew) keeps
        # them as they are: at a thousand sessions the copies were a fifth of the objects the
        # garbage collector walks. The copy is of plain data (copy.deepcopy's bookkeeping per object
        # was one of a call's largest costs, benchmarks/rollout_scale.py)
        keep = plain_copy if self.copy_history else (lambda x: x)
        self._prev_messages = keep(list(messages))
        self._prev_prompt_text = prompt_text
        self._prev_response_text = text
        self._prev_system, self._prev_tools = system_prompt, keep(tool_specs)

        truncated = result.finish_reason == "length"
        stop_reason = "max_tokens" if truncated else ("tool_use" if parsed.tool_calls else "end_turn")
        calls = [] if truncated else [(self._tool_call_id(tc), tc) for tc in parsed.tool_calls]
        turn = SampledTurn(call=call, text=text, reasoning=split.reasoning, content=parsed.text,
                           tool_calls=calls, stop_reason=stop_reason, snapshot=before)
        self._remember(turn.blocks(), text)
        return turn

    def undo_last_call(self, turn: "SampledTurn") -> None:
        """Forget ``turn`` (the last call) as if it had never been made: the gateway's identical
        resend, whose answer replaces the first one (one recorded call per logical turn)."""
        if not self.calls or self.calls[-1] is not turn.call:
            raise ValueError("only the last call can be undone")
        self._restore(turn.snapshot)

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs: Any) -> AsyncIterable[dict]:
        turn = await self.sample_turn(messages, tool_specs, system_prompt)
        call = turn.call
        yield {"messageStart": {"role": "assistant"}}
        if turn.reasoning:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": turn.reasoning}}}}
            yield {"contentBlockStop": {}}
        if turn.content or not turn.tool_calls:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": turn.content}}}
            yield {"contentBlockStop": {}}
        for tool_use_id, tc in turn.tool_calls:
            yield {"contentBlockStart": {"start": {"toolUse": {"name": tc.name, "toolUseId": tool_use_id}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(tc.arguments)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": turn.stop_reason}}
        yield {"metadata": {
            "usage": {"inputTokens": len(call.prompt_ids), "outputTokens": len(call.response_ids),
                      "totalTokens": len(call.prompt_ids) + len(call.response_ids)},
            "metrics": {"latencyMs": int(call.latency_s * 1000)},
        }}

    # -- the state of the episode, as a whole ----------------------------------------------
    _STATE = ("calls", "parsed", "rerenders", "forced_extensions", "_prev_messages", "_prev_prompt_text",
              "_prev_response_text", "_prev_hf", "_prev_system", "_prev_tools", "_sampled_exact",
              "_sampled_loose", "_tool_call_ids")

    def _snapshot(self) -> dict[str, Any]:
        return {k: copy.copy(getattr(self, k)) for k in self._STATE}

    def _restore(self, snapshot: dict[str, Any]) -> None:
        for k, v in snapshot.items():
            setattr(self, k, v)

    def _remember(self, blocks: list[dict[str, Any]], text: str) -> None:
        """The sampled text of an assistant turn, under its signature with and without call ids
        (a client that re-numbers the calls still sends the same turn; two turns that differ only
        by their ids and not by their text are ambiguous without them, and match by ids only)."""
        self._sampled_exact[turn_signature(blocks)] = text
        loose = turn_signature(blocks, with_ids=False)
        self._sampled_loose[loose] = text if self._sampled_loose.get(loose, text) == text else None

    def sampled_text(self, blocks: list[dict[str, Any]]) -> str | None:
        """The text the model sampled for this assistant message, None when it is not one of this
        episode's sampled turns exactly (edited, reasoning dropped, or never sampled)."""
        exact = self._sampled_exact.get(turn_signature(blocks))
        return exact if exact is not None else self._sampled_loose.get(turn_signature(blocks, with_ids=False))

    async def structured_output(self, output_model: type[T], prompt, system_prompt: str | None = None,
                                **kwargs: Any) -> AsyncGenerator[dict[str, T | Any], None]:
        """Structured output through a tool call, recorded like any other call."""
        spec = {
            "name": output_model.__name__,
            "description": f"Return the answer as {output_model.__name__}",
            "inputSchema": {"json": output_model.model_json_schema()},
        }
        tool_input = None
        async for event in self.stream(prompt, [spec], system_prompt):
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            if "toolUse" in delta:
                tool_input = json.loads(delta["toolUse"]["input"])
            yield event
        if tool_input is None:
            raise ValueError(f"the model did not call the {output_model.__name__} tool")
        yield {"output": output_model(**tool_input)}

    def _tool_call_id(self, call: ParsedToolCall) -> str:
        """The id the model wrote for the call, else (none written, or one already used in this
        episode) a new one from the family's id maker; unique within the episode either way."""
        tool_call_id = call.id
        while not tool_call_id or tool_call_id in self._tool_call_ids:
            tool_call_id = self.make_tool_call_id()
        self._tool_call_ids.add(tool_call_id)
        return tool_call_id

    def _sequence_room(self, prompt_ids: list[int]) -> int:
        """Tokens this call may still sample within ``sequence_budget``; raises when none."""
        max_prompt, max_response = self.sequence_budget
        first = self.calls[0].prompt_ids if self.calls else prompt_ids
        if len(first) > max_prompt:
            raise PromptTooLong(f"the first prompt has {len(first)} tokens, more than the {max_prompt} "
                                "the sequence budget allows for the prompt")
        room = max_response - (len(prompt_ids) - len(first))
        if room <= 0:
            raise EpisodeLimitReached(
                f"the episode reached its sequence budget of {max_response} tokens after the first prompt")
        return room

    # -- prompt construction ----------------------------------------------------------------
    def _prompt(self, messages, system_prompt, tool_specs) -> tuple[list[int], str, SplitReason | None]:
        r = self.renderer
        hf, tools = r.to_hf_messages(list(messages), system_prompt, tool_specs, sampled=self.sampled_text)
        full_text = r.render(hf, tools, add_generation_prompt=True)
        prev_hf, self._prev_hf = self._prev_hf, (hf, tools)
        if not self.calls:
            return r.encode_conversation(full_text), full_text, None
        extension, reason = self._extension(messages, full_text, prev_hf, system_prompt, tool_specs)
        if extension is None and self.always_extend:
            extension = self._forced_extension(messages, system_prompt, tool_specs, hf, tools, reason)
            self.forced_extensions[reason.value] = self.forced_extensions.get(reason.value, 0) + 1
        if extension is None:
            self.rerenders += 1
            return r.encode_conversation(full_text), full_text, reason
        prev = self.calls[-1]
        tail: list[int] = []
        if not prev.response_ids or prev.response_ids[-1] != r.turn_end_id:
            tail.append(r.turn_end_id)  # the turn was cut before the model closed it
        return prev.prompt_ids + prev.response_ids + tail + r.encode(extension), full_text, None

    def _extension(self, messages, full_text: str, prev_hf, system_prompt=None,
                   tool_specs=None) -> tuple[str | None, SplitReason | None]:
        """The text to append after the previous call's sampled tokens, or (None, why not) when the
        template's full render does not start with exactly what the model saw and sampled."""
        prev = self._prev_messages
        if prev is None or not extends_history(messages, prev):
            return None, SplitReason.REWRITTEN_HISTORY  # e.g. trimmed by a conversation manager
        # an assistant message the model did not sample exactly so (the turn it just sampled, edited
        # by an agent behind the gateway, or one it never wrote) is never merged as context
        unsampled = next((i for i, m in enumerate(messages[len(prev):])
                          if m.get("role") == "assistant" and self.sampled_text(_blocks(m)) is None), None)
        seen = self._prev_prompt_text + self._prev_response_text + self.renderer.turn_end
        if unsampled is None and full_text.startswith(seen):
            return full_text[len(seen):], None
        if (system_prompt or None) != (self._prev_system or None):
            return None, SplitReason.CHANGED_SYSTEM_PROMPT
        if (tool_specs or None) != (self._prev_tools or None):
            return None, SplitReason.CHANGED_TOOLS
        reason = self._split_reason(full_text, prev_hf)
        if reason is SplitReason.DROPPED_REASONING:
            return None, reason
        if unsampled is not None:
            return None, SplitReason.EDITED_TURN if unsampled == 0 else SplitReason.FOREIGN_TURN
        return None, reason

    def _forced_extension(self, messages, system_prompt, tool_specs, hf, tools, reason: SplitReason) -> str:
        """The text of the messages added since the previous call, as the template lays them out
        after an assistant turn, for always-extend mode. First choice: the current render minus
        the render of the conversation up to (and including the end of) the previous assistant
        turn; where even that is not a prefix, the new messages rendered after the system turn
        alone. The model's own tokens stay as sampled either way."""
        prev = self._prev_messages
        if prev is None or len(messages) <= len(prev) + 1 or list(messages[: len(prev)]) != prev:
            raise HistoryRewritten(f"always-extend mode: the conversation no longer extends the previous "
                                   f"call's messages ({reason.value})")
        r = self.renderer
        upto, _ = r.to_hf_messages(list(messages[: len(prev) + 1]), system_prompt, tool_specs, sampled=self.sampled_text)
        new = hf[len(upto):]
        delta = self._delta(upto, upto + new, tools)
        if delta is None:
            base = [hf[0]] if hf and hf[0]["role"] == "system" else [{"role": "system", "content": ""}]
            delta = self._delta(base, base + new, tools)
        if delta is None:
            raise HistoryRewritten("always-extend mode: the template renders the new messages differently "
                                   "depending on what precedes them")
        return delta

    def _delta(self, before: list, after: list, tools) -> str | None:
        """What rendering ``after`` (with the generation prompt) adds past the last end-of-turn
        of ``before``, or None when ``before``'s render up to there is not a prefix."""
        r = self.renderer
        a = r.render(before, tools, add_generation_prompt=False)
        cut = a.rfind(r.turn_end)
        if cut < 0:
            return None
        cut += len(r.turn_end)
        b = r.render(after, tools, add_generation_prompt=True)
        return b[cut:] if b.startswith(a[:cut]) else None

    def _split_reason(self, full_text: str, prev_hf) -> SplitReason:
        # Where the previous turn began: the previous prompt without its generation prompt.
        gen = self.renderer.generation_prompt(*prev_hf)
        before = self._prev_prompt_text
        if gen and before.endswith(gen):
            before = before[: -len(gen)]
        if not full_text.startswith(before):
            return SplitReason.REWRITTEN_HISTORY  # an earlier turn is rendered differently now
        seen_turn = gen + self._prev_response_text
        rest = full_text[len(before):]
        end = rest.find(self.renderer.turn_end)
        rendered_turn = rest[:end] if end >= 0 else rest
        fmt = self._reasoning_markers
        if fmt.end in seen_turn and _reasoning(rendered_turn, fmt) != _reasoning(seen_turn, fmt):
            return SplitReason.DROPPED_REASONING  # dropped, or emptied (no-think mode's empty block)
        return SplitReason.REFORMATTED_TURN


class SampledTurn:
    """What one model call produced: the record of the call, the sampled text (its end token left
    out), the reasoning and content it splits into, the tool calls parsed from the content with
    their ids (none when the turn was cut off), and Strands' stop reason."""

    __slots__ = ("call", "text", "reasoning", "content", "tool_calls", "stop_reason", "snapshot")

    def __init__(self, call: ModelCall, text: str, reasoning: str, content: str,
                 tool_calls: list[tuple[str, ParsedToolCall]], stop_reason: str, snapshot: dict[str, Any]):
        self.call, self.text, self.reasoning, self.content = call, text, reasoning, content
        self.tool_calls, self.stop_reason, self.snapshot = tool_calls, stop_reason, snapshot

    def blocks(self) -> list[dict[str, Any]]:
        """The turn as the Strands message content blocks ``stream`` hands the agent."""
        out: list[dict[str, Any]] = []
        if self.reasoning:
            out.append({"reasoningContent": {"reasoningText": {"text": self.reasoning}}})
        if self.content or not self.tool_calls:
            out.append({"text": self.content})
        out.extend({"toolUse": {"toolUseId": i, "name": tc.name, "input": tc.arguments}} for i, tc in self.tool_calls)
        return out


def _ids_in_order(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every tool-use id replaced by the order of its first appearance: a client
    that renumbers the calls consistently (its own ids, re-made on every request) sends the same
    conversation. Whether the ids change the tokens is for the render to say: the extension
    still needs the render to start with exactly what was seen and sampled."""
    order: dict[Any, str] = {}

    def block(b: Any) -> Any:
        if isinstance(b, dict):
            for kind in ("toolUse", "toolResult"):
                if isinstance(b.get(kind), dict) and "toolUseId" in b[kind]:
                    tid = b[kind]["toolUseId"]
                    return {**b, kind: {**b[kind], "toolUseId": order.setdefault(tid, f"#{len(order)}")}}
        return b

    return [{**m, "content": [block(b) for b in m["content"]]} if isinstance(m.get("content"), list) else m
            for m in messages]


def extends_history(messages: list[dict[str, Any]], prev: list[dict[str, Any]]) -> bool:
    """``messages`` carry on the conversation ``prev`` (more messages, the same ones first, tool-use
    ids up to a consistent renumbering)."""
    if len(messages) <= len(prev):
        return False
    head = list(messages[: len(prev)])
    return head == prev or _ids_in_order(head) == _ids_in_order(prev)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content") or []
    return [{"text": content}] if isinstance(content, str) else list(content)


def _reasoning(text: str, fmt: ReasoningFormat) -> str | None:
    """The text of the last reasoning block, None when there is none."""
    if fmt.end not in text:
        return None
    return text.split(fmt.end)[-2].split(fmt.start)[-1].strip() if fmt.start else text.split(fmt.end)[-2].strip()
