"""The token-in/token-out sampler protocol every backend implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    """Set by the run's configuration (training or validation), never by the agent."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))


def derive_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed for one request, from the run's seed and what tells the request apart (task,
    sample, call). A server that seeds each request (vLLM) gives equal seeds the same random
    stream: one seed for every request would make a task's samples identical and every task's
    draws the same numbers. Derived seeds stay reproducible: the same task, sample and call get
    the same seed in every run, which keeps a comparison's common random numbers."""
    import hashlib

    digest = hashlib.blake2b(repr((int(seed),) + parts).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclass
class SampleResult:
    response_ids: list[int]
    # log-probabilities of the sampled tokens under the policy at the sampling temperature
    # (before top-p truncation), as vLLM reports them by default
    logprobs: list[float]
    finish_reason: str  # "stop": an end-of-turn or stop token was sampled (and is included); "length"
    # which weights sampled it (0: the base model, k: after k updates); None when the sampler cannot tell
    weight_version: int | None = None


class SamplerError(RuntimeError):
    """The sampler could not produce a sample (server down, bad response, timeout)."""


class ServiceUnavailableError(SamplerError):
    """The serving side stayed unreachable through the retries (connection refused or reset,
    throttling, 5xx, timeouts): the episode is ``aborted``, an outage and never a wrong answer."""


class PromptTooLongError(SamplerError):
    """The prompt does not fit the server's context: the episode ends ``truncated``, and no
    shortened or substitute prompt is ever sampled from instead."""


@runtime_checkable
class Sampler(Protocol):
    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult: ...
