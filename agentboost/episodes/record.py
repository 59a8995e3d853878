"""The episode record: what one agent run produced, token for token.

One JSON object per line (JSONL). ``SCHEMA_VERSION`` changes whenever a field changes meaning;
readers check it. The invariant (see ``check_episode``) can be verified from the JSONL alone.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..errors import InputError
from ..files import iter_jsonl, open_append

SCHEMA_VERSION = 1


class Status(str, Enum):
    """How an episode ended. A str, so records and comparisons with plain text keep working."""

    OK = "ok"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    ERROR = "error"
    TRUNCATED = "truncated"  # a turn hit max tokens, or the episode its call/token limit
    # the agent's client went away during a model call (behind the gateway): what it saw of the
    # last answer, and so what the episode would have been, is unknown; never trained on
    INCOMPLETE = "incomplete"
    # the serving side failed it (connection refused, throttled, server error, timeout of the
    # model's endpoint), after the retries: an outage, not an answer. Never scored, never trained
    # on, left out of evaluation statistics (and counted there); ``agentboost.rewards.groups``
    ABORTED = "aborted"

    def __str__(self) -> str:
        return self.value

    @property
    def failed(self) -> bool:
        """The episode did not run to an end the reward can judge: it gets the failed reward."""
        return self in FAILED_STATUSES

    @property
    def aborted(self) -> bool:
        """The infrastructure, not the agent, ended the episode: it has no outcome at all."""
        return self is Status.ABORTED


STATUSES = tuple(s.value for s in Status)
FAILED_STATUSES = frozenset({Status.TIMEOUT, Status.CRASHED, Status.ERROR, Status.INCOMPLETE})
# failed, and not even as a failure: left out of every training batch (rewards/groups.py)
NEVER_TRAINED = frozenset({Status.INCOMPLETE})


class SplitReason(str, Enum):
    """Why a model call could not extend the previous one (see ``TrainableModel``)."""

    DROPPED_REASONING = "dropped_reasoning"  # the template drops or empties a reasoning block
    REFORMATTED_TURN = "reformatted_turn"  # the template lays the sampled turn out differently
    REWRITTEN_HISTORY = "rewritten_history"  # earlier turns trimmed, reordered or rendered differently
    # what an agent behind the gateway (agentboost.gateway) can do that an agent built in-process does not
    CHANGED_SYSTEM_PROMPT = "changed_system_prompt"  # the conversation went on under another system prompt
    CHANGED_TOOLS = "changed_tools"  # ... or with another tool list
    EDITED_TURN = "edited_turn"  # the turn the model just sampled came back changed (text, calls or arguments)
    FOREIGN_TURN = "foreign_turn"  # an assistant message the model never sampled was added

    def __str__(self) -> str:
        return self.value


@dataclass
class ModelCall:
    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    finish_reason: str  # "stop" | "length"
    started_at: float = 0.0
    latency_s: float = 0.0
    # True when this call's prompt is a fresh template render rather than an extension of the
    # previous call's tokens (the template rewrote history), which normally starts a new segment.
    rerendered: bool = False
    rerender_reason: str | None = None  # a SplitReason value when rerendered
    # the policy's weight version that sampled this call (0: before any update), when known
    weight_version: int | None = None
    # the turn's reasoning (agentboost.reasoning): "unterminated_reasoning" when it never closed (the
    # turn has no content), else None; and the tool calls drafted inside it (counted, never run)
    reasoning_status: str | None = None
    calls_in_reasoning: int = 0


@dataclass
class Segment:
    """One training sequence: sampled tokens have mask 1, everything else 0."""

    input_ids: list[int]
    loss_mask: list[int]
    call_indices: list[int]


@dataclass
class ToolCallRecord:
    name: str
    ok: bool
    error: str | None = None
    outcome: str | None = None  # finer verdict from the tool itself, when it gives one


@dataclass
class Episode:
    episode_id: str
    task_id: str
    group_id: str
    status: Status = Status.OK
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    num_splits: int = 0
    split_reasons: dict[str, int] = field(default_factory=dict)  # SplitReason value -> count
    reward: float | None = None
    reward_components: dict[str, float] = field(default_factory=dict)
    reward_metadata: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    malformed_tool_calls: int = 0
    # tool calls the model drafted inside its reasoning (parsed, counted, never executed) and turns
    # whose reasoning never closed (they have no content)
    calls_in_reasoning: int = 0
    unterminated_reasoning: int = 0
    final_answer: str | None = None  # the last assistant turn's content, its reasoning left out
    # why there is no final answer where that is a format failure: "unterminated_reasoning"
    final_answer_status: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        try:
            self.status = Status(self.status)
        except ValueError:
            raise ValueError(f"episode status must be one of {STATUSES}, got {self.status!r}") from None

    @property
    def num_response_tokens(self) -> int:
        return sum(len(c.response_ids) for c in self.calls)

    @property
    def failed(self) -> bool:
        return Status(self.status).failed  # Status() also accepts a status assigned as text

    @property
    def aborted(self) -> bool:
        return Status(self.status).aborted

    @property
    def text_level(self) -> bool:
        """Run by a chat model we do not train (``agentboost.models.chat``): messages only, no
        token ids. Evaluated and exported for SFT, never an RL row."""
        return bool(self.metadata.get("text_level"))

    @property
    def succeeded(self) -> bool:
        """A full success: the episode ran to an end (``ok`` or ``truncated``) and its outcome
        (the reward without shaping terms) is 1."""
        if self.status not in (Status.OK, Status.TRUNCATED) or self.reward is None:
            return False
        return self.reward_components.get("outcome", self.reward) >= 1.0 - 1e-9

    @property
    def extended_calls(self) -> int:
        """Calls after the first that extended the previous call's tokens (not re-rendered)."""
        return sum(1 for c in self.calls[1:] if not c.rerendered)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data (what ``dataclasses.asdict`` gives, and an independent copy like
        it), built field by field: ``asdict`` visits every token id of every call and segment one
        by one (a deep copy per element), which made it the largest cost of sending an episode
        from a worker to the pool (``benchmarks/rollout_scale.py``)."""
        d = {f.name: getattr(self, f.name) for f in _EPISODE_FIELDS}
        d["calls"] = [_call_dict(c) for c in self.calls]
        d["segments"] = [{"input_ids": list(s.input_ids), "loss_mask": list(s.loss_mask),
                          "call_indices": list(s.call_indices)} for s in self.segments]
        d["tool_calls"] = [{f.name: getattr(t, f.name) for f in _TOOL_CALL_FIELDS} for t in self.tool_calls]
        for name in _FREE_FORM:  # whatever agents, tools and rewards put there: copied all the way down
            d[name] = plain_copy(d[name], _as_plain_data)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Episode":
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"episode schema_version {version!r} is not supported (expected {SCHEMA_VERSION})"
            )
        d = dict(d)
        d["calls"] = [ModelCall(**c) for c in d.get("calls", [])]
        d["segments"] = [Segment(**s) for s in d.get("segments", [])]
        d["tool_calls"] = [ToolCallRecord(**t) for t in d.get("tool_calls", [])]
        return cls(**d)


_EPISODE_FIELDS = fields(Episode)
_CALL_FIELDS = fields(ModelCall)
_TOOL_CALL_FIELDS = fields(ToolCallRecord)
_CALL_LISTS = ("prompt_ids", "response_ids", "response_logprobs")
_FREE_FORM = ("messages", "split_reasons", "reward_components", "reward_metadata", "timings", "metadata")


def _call_dict(call: ModelCall) -> dict[str, Any]:
    d = {f.name: getattr(call, f.name) for f in _CALL_FIELDS}
    for name in _CALL_LISTS:  # token ids and log-probs: flat lists of numbers, one copy each
        d[name] = list(d[name])
    return d


def plain_copy(value: Any, other: Callable[[Any], Any] = copy.deepcopy) -> Any:
    """A deep copy of plain data (messages, tool specifications, metadata): dicts, lists and
    scalars copied directly, anything else by ``other`` (``copy.deepcopy``). ``copy.deepcopy``'s
    bookkeeping for every object made it one of the largest costs of an episode's model calls and
    record (``benchmarks/rollout_scale.py``). Data with cycles is not plain."""
    kind = type(value)
    if kind is dict:
        return {plain_copy(k, other): plain_copy(v, other) for k, v in value.items()}
    if kind is list:
        return [plain_copy(v, other) for v in value]
    if kind in _SCALARS:
        return value
    return other(value)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _as_plain_data(value: Any) -> Any:
    """What ``dataclasses.asdict`` makes of a value inside a record that is not JSON-like."""
    return asdict(_Holder(value))["value"]


@dataclass
class _Holder:
    value: Any


def build_segments(calls: list[ModelCall]) -> list[Segment]:
    """Merge consecutive calls into training sequences.

    A call joins the current segment when its prompt extends the segment's tokens exactly
    (prompt = everything so far + new context) and it was not re-rendered; otherwise it opens a
    new segment. A re-rendered call whose tokens happen to extend (an assistant message the model
    never sampled, rendered as context, behind the gateway) is still a counted split, never a
    merge. This needs only the recorded calls, so anyone can recompute it from the JSONL.
    """
    segments: list[Segment] = []
    for i, call in enumerate(calls):
        cur = segments[-1] if segments else None
        if cur is not None and not call.rerendered and _extends(call.prompt_ids, cur.input_ids):
            new_ctx = call.prompt_ids[len(cur.input_ids):]
            cur.input_ids.extend(new_ctx)
            cur.loss_mask.extend([0] * len(new_ctx))
            cur.call_indices.append(i)
        else:
            cur = Segment(input_ids=list(call.prompt_ids), loss_mask=[0] * len(call.prompt_ids),
                          call_indices=[i])
            segments.append(cur)
        cur.input_ids.extend(call.response_ids)
        cur.loss_mask.extend([1] * len(call.response_ids))
    return segments


def _extends(prompt: list[int], prefix: list[int]) -> bool:
    return len(prompt) >= len(prefix) and prompt[: len(prefix)] == prefix


def segment_logprobs(ep: Episode, seg: Segment) -> list[float]:
    """The sampled log-prob at every position of ``seg.input_ids``: its calls' response log-probs,
    in order, under loss mask 1, and 0.0 under mask 0 (prompt, tool results, template text)."""
    sampled = iter([lp for i in seg.call_indices for lp in ep.calls[i].response_logprobs])
    return [next(sampled) if m else 0.0 for m in seg.loss_mask]


def check_episode(ep: Episode | dict[str, Any]) -> list[str]:
    """Return the list of invariant violations (empty when the episode is consistent)."""
    if isinstance(ep, dict):
        calls = ep["calls"]
        segments = ep["segments"]
        get = lambda o, k: o[k]  # noqa: E731
    else:
        calls = ep.calls
        segments = ep.segments
        get = getattr
    problems: list[str] = []
    covered: list[int] = []
    for si, seg in enumerate(segments):
        ids, mask, idx = get(seg, "input_ids"), get(seg, "loss_mask"), get(seg, "call_indices")
        if len(ids) != len(mask):
            problems.append(f"segment {si}: input_ids ({len(ids)}) and loss_mask ({len(mask)}) differ")
            continue
        if not idx:
            problems.append(f"segment {si}: no call_indices")
            continue
        masked = [t for t, m in zip(ids, mask) if m == 1]
        expected = [t for i in idx for t in get(calls[i], "response_ids")]
        if masked != expected:
            problems.append(f"segment {si}: tokens under mask 1 differ from its calls' response_ids")
        first_prompt = get(calls[idx[0]], "prompt_ids")
        if ids[: len(first_prompt)] != list(first_prompt):
            problems.append(f"segment {si}: input_ids do not start with call {idx[0]}'s prompt_ids")
        covered.extend(idx)
    if sorted(covered) != list(range(len(calls))):
        problems.append(f"segments cover calls {sorted(covered)}, expected 0..{len(calls) - 1}")
    for ci, call in enumerate(calls):
        if len(get(call, "response_ids")) != len(get(call, "response_logprobs")):
            problems.append(f"call {ci}: response_ids and response_logprobs differ in length")
    return problems


def shared_prefix_len(prompts: list[list[int]]) -> int:
    """Longest common token prefix, leaving every prompt at least one token of its own
    (generation needs one uncached token per row)."""
    first = prompts[0]
    n = min(len(p) for p in prompts) - 1
    for p in prompts[1:]:
        i = 0
        while i < n and p[i] == first[i]:
            i += 1
        n = i
    return max(0, n)


class EpisodeWriter:
    """Appends episodes to a JSONL file, one flushed line each, so a crash loses no finished one."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._f = open_append(self.path)

    def write(self, ep: Episode) -> None:
        self._f.write(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EpisodeFileError(InputError):
    pass


def read_episodes(path: str | os.PathLike[str]) -> Iterator[Episode]:
    if not Path(path).is_file():
        raise EpisodeFileError(f"{path}: no such episode file")
    for lineno, row in iter_jsonl(path, EpisodeFileError):
        try:
            yield Episode.from_dict(row)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise EpisodeFileError(f"{path}:{lineno}: not a valid episode record: {e}") from e


def write_episodes(path: str | os.PathLike[str], episodes: Iterable[Episode]) -> None:
    with EpisodeWriter(path) as w:
        for ep in episodes:
            w.write(ep)
