"""The hf engine (``rollout.engine: hf``): one HF model in one process, batching concurrent requests.

Requests arrive from any thread or event loop; a single engine thread gathers those waiting
(up to ``max_batch_size``; while requests keep arriving less than ``batch_wait_s`` apart, for at
most ten times that), groups the ones that share sampling settings, and runs one left-padded
``generate`` per group. Each row stops at its own stop token or token limit. This is static
batching: a request that arrives while a batch runs waits for the next one.

With more requests waiting than ``max_batch_size``, the oldest *episode* goes first, not the oldest
request: a request whose prompt extends a sequence this engine served (prompt + response, then the
tool result and the next turn's header) is that episode's next turn and inherits its start time.
Served in arrival order instead, every episode's first turn would run before anyone's second, and
with more episodes in flight than the engine can finish within their timeout all of them run out of
time together; oldest-episode-first finishes the started episodes and lets only the newest wait (an
episode's deadline runs from its start, so this is earliest-deadline-first). After a batch the
engine waits up to ``continuation_wait_s`` for that batch's next turns (the agents run their tools
meanwhile) before forming the next batch, so that they are not overtaken by queued first turns
(after the first batch, only once any later turn has been seen: with single-call episodes the wait
would be spent for nothing after every batch).

Agent prompts share a long head (system prompt, tool schemas): a batch's common token prefix is
prefilled once and its KV cache repeated for every row, the rows' own tokens left-padded after it
(positions come from the attention mask, so the padding in the middle is invisible).

Versioned weights (asynchronous training, ``rollout.max_staleness``): besides the live model, the
engine can serve frozen snapshots by weight version (``publish_version``). A request that names a
version is sampled from that snapshot, batched only with requests of the same version, and its
result says which version sampled it; so an episode pinned to a version at its start keeps it to
its end while the trainer updates the live model. A snapshot shares every frozen parameter with the
live model (a LoRA policy's snapshot costs only its adapter; full fine-tuning, a copy of the weights).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import queue
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..episodes.record import shared_prefix_len
from ..moved import renamed
from .protocol import PromptTooLongError, SamplerError, SampleResult, SamplingParams

SCHEDULES = ("oldest-episode", "fifo")  # fifo: arrival order, the baseline benchmarks compare with


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    seq: int = 0  # arrival order
    episode_start: float = 0.0  # monotonic time of its episode's first request
    turn: int = 0  # 0: an episode's first request (as far as this engine can tell)
    parent_batch: int = -1  # the batch that served the previous turn
    version: int | None = None  # the weights snapshot that samples it (None: the live model)
    future: Future = field(default_factory=Future)

    @property
    def group_key(self) -> tuple:
        # the seed is not part of the key: one generator serves a batch (see _run_batch); one batch,
        # one set of weights
        return (self.params.temperature, self.params.top_p, self.params.stop_token_ids, self.version)


@dataclass
class EngineStats:
    requests: int = 0
    batches: int = 0
    generated_tokens: int = 0
    busy_s: float = 0.0
    max_batch_seen: int = 0
    shared_prefix_tokens: int = 0  # prompt tokens not prefilled thanks to a shared prefix
    continuations: int = 0  # requests served that were recognised as a later turn of an episode
    continuations_seen: int = 0  # the same, counted when they arrive


_HASH_MOD = (1 << 61) - 1  # a prime: polynomial hashes of token prefixes, one pass per sequence
_HASH_BASE = 1_000_003


def _prefix_hashes(ids: list[int]) -> list[int]:
    h, out = 0, []
    for t in ids:
        h = (h * _HASH_BASE + t + 1) % _HASH_MOD
        out.append(h)
    return out


class _Lineage:
    """Sequences served (prompt + response) -> (episode start, next turn index, batch), the most
    recent ``capacity`` kept, by length and hash (not the tokens: agent sequences are long). A
    prompt that starts with one of them is that episode's next turn; a hash collision could only
    misorder the queue."""

    def __init__(self, capacity: int = 8192):
        self.capacity = capacity
        self._seqs: OrderedDict[tuple[int, int], tuple[float, int, int]] = OrderedDict()
        self._lengths: dict[int, int] = {}  # length -> how many stored sequences have it
        self._lock = threading.Lock()

    def add(self, seq: list[int], episode_start: float, turn: int, batch: int) -> None:
        if not seq:
            return
        key = (len(seq), _prefix_hashes(seq)[-1])
        with self._lock:
            if key in self._seqs:
                self._seqs.move_to_end(key)
            else:
                self._lengths[key[0]] = self._lengths.get(key[0], 0) + 1
            self._seqs[key] = (episode_start, turn, batch)
            while len(self._seqs) > self.capacity:
                (n, _), _ = self._seqs.popitem(last=False)
                self._lengths[n] -= 1
                if not self._lengths[n]:
                    del self._lengths[n]

    def parent(self, prompt: list[int]) -> tuple[float, int, int] | None:
        """The longest served sequence the prompt extends: (episode start, turn, batch)."""
        hashes = _prefix_hashes(prompt)
        with self._lock:
            for n in sorted((n for n in self._lengths if n < len(prompt)), reverse=True):
                hit = self._seqs.get((n, hashes[n - 1]))
                if hit is not None:
                    return hit
        return None


class HFEngine:
    def __init__(self, model, tokenizer, max_batch_size: int = 8, batch_wait_s: float = 0.01,
                 device: str | None = None, min_shared_prefix: int = 32, schedule: str = "oldest-episode",
                 continuation_wait_s: float = 0.5):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.schedule = schedule
        self.continuation_wait_s = continuation_wait_s
        self._lineage = _Lineage()
        self._seq = itertools.count()
        # shorter common prefixes are prefilled per row (0 turns prefix sharing off)
        self.min_shared_prefix = min_shared_prefix
        self.batch_wait_s = batch_wait_s
        # where the model was loaded (load_policy: model.device); ``device`` moves it
        self.device = device or str(next(model.parameters()).device)
        self.model.to(self.device)
        self.eos_token_id = tokenizer.eos_token_id
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_id
        self.max_context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        # held while generating; the trainer takes it to swap weights between steps
        self.weights_lock = threading.Lock()
        self._versions: dict[int, object] = {}  # weight version -> frozen snapshot (publish_version)
        self._versions_lock = threading.Lock()
        self.stats = EngineStats()
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="agentboost-local-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs) -> "HFEngine":
        from ..models.loading import load_policy

        model, tok = load_policy(name_or_path)
        return cls(model, tok, **kwargs)

    # -- versioned weights -------------------------------------------------------------------
    def publish_version(self, version: int, model, keep: int) -> None:
        """Serve a frozen snapshot of ``model``'s current weights as ``version``, and keep only the
        ``keep`` newest versions (older ones can have no episode left: the trainer's admission
        control guarantees it). Called between updates, never while ``model`` changes."""
        frozen = {id(p): p for p in model.parameters() if not p.requires_grad}  # shared, never copied
        snapshot = copy.deepcopy(model, memo=frozen).eval().requires_grad_(False)
        with self._versions_lock:
            self._versions[version] = snapshot
            for old in sorted(self._versions)[:-keep]:
                del self._versions[old]

    def served_versions(self) -> list[int]:
        with self._versions_lock:
            return sorted(self._versions)

    def model_for(self, version: int | None):
        """The model that samples ``version``: its published snapshot (None: the live model)."""
        if version is None:
            return self.model
        with self._versions_lock:
            model = self._versions.get(version)
        if model is None:
            raise SamplerError(f"weights version {version} is not served (serving {self.served_versions() or 'none'})")
        return model

    # -- submission -------------------------------------------------------------------------
    def submit(self, prompt_ids: list[int], params: SamplingParams, version: int | None = None) -> Future:
        """Queue one request; ``version`` names a published snapshot to sample (None: the live model)."""
        if self._closed:
            raise SamplerError("the local engine is closed")
        if version is not None:
            self.model_for(version)  # an unknown version fails now, not in a batch
        if not prompt_ids:
            raise SamplerError("empty prompt")
        if self.max_context and len(prompt_ids) >= self.max_context:
            # the request's fault, not the engine's: serve and the gateway answer it 400, not 502
            raise PromptTooLongError(
                f"prompt of {len(prompt_ids)} tokens does not fit the model's context of {self.max_context}"
            )
        req = _Request(list(prompt_ids), params, seq=next(self._seq), episode_start=time.monotonic(), version=version)
        parent = self._lineage.parent(req.prompt_ids) if self.schedule == "oldest-episode" else None
        if parent is not None:
            req.episode_start, req.turn, req.parent_batch = parent
        self._queue.put(req)
        return req.future

    def generate(self, prompt_ids: list[int], params: SamplingParams, version: int | None = None) -> SampleResult:
        return self.submit(prompt_ids, params, version).result()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=30)

    # -- engine thread ----------------------------------------------------------------------
    def _priority(self, r: _Request) -> tuple:
        return (r.seq,) if self.schedule == "fifo" else (r.episode_start, r.seq)

    def _admit(self, nxt: _Request | None, pending: list[_Request]) -> bool:
        """Add a dequeued request to ``pending``; ``None`` (closing) fails them all: False."""
        if nxt is None:
            self._fail_all(pending, "the local engine was closed")
            return False
        pending.append(nxt)
        self.stats.continuations_seen += bool(nxt.turn)
        return True

    def _loop(self) -> None:
        pending: list[_Request] = []
        returning = 0  # next turns of the last batch that may still come back
        batch_no = -1
        while True:
            if not pending and not returning:
                first = self._queue.get()
                if first is None:
                    return
                pending.append(first)
                self.stats.continuations_seen += bool(first.turn)
            # wait for company while requests keep coming (agents start a few ms apart), capped;
            # after a batch, wait (longer) for its next turns while they keep coming back
            start = time.monotonic()
            deadline = start + (self.continuation_wait_s if returning else self.batch_wait_s)
            while returning or len(pending) < self.max_batch_size:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if not self._admit(nxt, pending):
                    return
                if returning and nxt.parent_batch == batch_no:
                    returning -= 1
                if not returning:
                    deadline = min(start + 10 * self.batch_wait_s, time.monotonic() + self.batch_wait_s)
            returning = 0
            # everything queued competes for the batch, not only the first max_batch_size arrivals
            while True:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if not self._admit(nxt, pending):
                    return
            if not pending:
                continue
            pending.sort(key=self._priority)
            key = pending[0].group_key
            batch = [r for r in pending if r.group_key == key][: self.max_batch_size]
            chosen = {id(r) for r in batch}
            pending = [r for r in pending if id(r) not in chosen]
            try:
                results = self._run_batch(batch)
            except Exception as e:  # a failed batch fails its requests, never the engine
                for r in batch:
                    if not r.future.cancelled():
                        r.future.set_exception(SamplerError(f"generation failed: {type(e).__name__}: {e}"))
                continue
            batch_no += 1
            if self.schedule == "oldest-episode":
                for r, res in zip(batch, results):
                    self._lineage.add(r.prompt_ids + res.response_ids, r.episode_start, r.turn + 1, batch_no)
                # the engine cannot tell which episodes end here; it waits once, then only while
                # it has seen later turns at all (single-call episodes would waste it every batch)
                if batch_no == 0 or self.stats.continuations_seen:
                    returning = len(batch)
            for r, res in zip(batch, results):
                if not r.future.cancelled():
                    r.future.set_result(res)

    @staticmethod
    def _fail_all(reqs: list[_Request], why: str) -> None:
        for r in reqs:
            if not r.future.cancelled():
                r.future.set_exception(SamplerError(why))

    def _run_batch(self, batch: list[_Request]) -> list[SampleResult]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        params = batch[0].params
        version = batch[0].version
        model = self.model_for(version)
        stop_ids = sorted({self.eos_token_id, *params.stop_token_ids})
        limits = []
        for r in batch:
            limit = r.params.max_new_tokens
            if self.max_context:
                limit = min(limit, self.max_context - len(r.prompt_ids))
            limits.append(limit)
        shared = shared_prefix_len([r.prompt_ids for r in batch])
        if len(batch) < 2 or not self.min_shared_prefix or shared < self.min_shared_prefix:
            shared = 0
        # rows are [shared prefix][left padding][own tokens]
        own = max(len(r.prompt_ids) for r in batch) - shared
        width = shared + own
        input_ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        input_ids[:, :shared] = torch.tensor(batch[0].prompt_ids[:shared], dtype=torch.long)
        attention[:, :shared] = 1
        for i, r in enumerate(batch):
            n = len(r.prompt_ids) - shared
            input_ids[i, width - n:] = torch.tensor(r.prompt_ids[shared:], dtype=torch.long)
            attention[i, width - n:] = 1
        row_limits = torch.tensor(limits)

        engine = self

        class _RowLimit(StoppingCriteria):
            def __call__(self, ids, scores, **kw):
                if engine._closed:  # closing (a stopped run): end the batch at this token, not at its limit
                    return torch.ones(ids.shape[0], dtype=torch.bool, device=ids.device)
                return (ids.shape[1] - width) >= row_limits.to(ids.device)

        greedy = params.temperature == 0
        gen_kwargs = dict(
            max_new_tokens=max(limits),
            do_sample=not greedy,
            eos_token_id=stop_ids,
            pad_token_id=self.pad_token_id,
            stopping_criteria=StoppingCriteriaList([_RowLimit()]),
            output_logits=True,
            return_dict_in_generate=True,
        )
        if not greedy:
            gen_kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        else:
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        t0 = time.perf_counter()
        # a snapshot never changes: only the live model is the trainer's to lock
        lock = self.weights_lock if version is None else contextlib.nullcontext()
        with lock, torch.inference_mode():
            seeds = [r.params.seed for r in batch if r.params.seed is not None]
            if seeds:
                # HF generate draws for the whole batch from one generator: seeded requests are
                # reproducible for the same batch composition, not one by one as in vLLM
                torch.manual_seed(hash(tuple(seeds)) & 0x7FFFFFFF)
            if shared:
                gen_kwargs["past_key_values"] = self._prefix_cache(model, input_ids[:1, :shared], len(batch))
            out = model.generate(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), **gen_kwargs
            )
            # raw logits -> log-probs at the sampling temperature (what the trainer recomputes, and
            # vLLM's processed_logprobs): the sampled token's logit minus the logsumexp, one step at
            # a time, never a (batch x steps x vocabulary) log-softmax
            temp = params.temperature if params.temperature > 0 else 1.0
            seqs_dev = out.sequences[:, width:]
            step_lps = []
            for t, step_logits in enumerate(out.logits):
                scaled = step_logits.float() / temp
                tok = seqs_dev[:, t:t + 1]
                step_lps.append((scaled.gather(-1, tok) - torch.logsumexp(scaled, dim=-1, keepdim=True)).squeeze(-1))
            logprobs_all = torch.stack(step_lps, dim=1).cpu()  # (batch, steps)
        seqs = out.sequences[:, width:].cpu()
        stop_set = set(stop_ids)
        results = []
        for i in range(len(batch)):
            ids, finish = [], "length"
            for t in range(min(seqs.shape[1], limits[i])):
                tok = int(seqs[i, t])
                ids.append(tok)
                if tok in stop_set:
                    finish = "stop"
                    break
            lps = logprobs_all[i, :len(ids)].tolist()
            results.append(SampleResult(response_ids=ids, logprobs=lps, finish_reason=finish, weight_version=version))
        elapsed = time.perf_counter() - t0
        self.stats.requests += len(batch)
        self.stats.batches += 1
        self.stats.generated_tokens += sum(len(r.response_ids) for r in results)
        self.stats.busy_s += elapsed
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(batch))
        self.stats.shared_prefix_tokens += shared * (len(batch) - 1)
        self.stats.continuations += sum(1 for r in batch if r.turn)
        return results

    def _prefix_cache(self, model, prefix_ids, rows: int):
        out = model(input_ids=prefix_ids.to(self.device), use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        cache.batch_repeat_interleave(rows)
        return cache


class EngineSampler:
    """The local engine behind the async sampler protocol, for callers in the same process."""

    def __init__(self, engine: HFEngine):
        self.engine = engine

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        return await asyncio.wrap_future(self.engine.submit(prompt_ids, params))


# the engine users call ``hf`` (``rollout.engine: hf``) was ``LocalEngine`` before 0.2
__getattr__ = renamed(__name__, {"LocalEngine": "HFEngine"})
