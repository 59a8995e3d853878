"""agentboost's sampler protocol over veRL's rollout server client.

veRL hands an agent loop an ``LLMServerClient`` whose ``generate(request_id, *, prompt_ids,
sampling_params, ...)`` returns a ``TokenOutput`` (``token_ids``, ``log_probs``, ``stop_reason``).
What this adapter decides, and why:

- one request id per episode: the client routes every turn of an episode to the same server
  (sticky sessions), so the shared prefix stays in that server's cache;
- the sampling parameters are the rollout's (veRL's ``temperature``/``top_p``/``top_k``, or its
  ``val_kwargs`` during validation), copied fresh for every call; only ``max_tokens`` (the turn's
  budget), ``stop_token_ids`` and ``logprobs`` are added. Nothing the agent does can change them;
- veRL reports both a stop token and the length limit as ``"completed"``: a turn counts as stopped
  only when its last token is one of the stop ids, otherwise as cut by length (the token budget,
  or the server's context limit);
- log-probs are always requested, because the episode record keeps them for every sampled token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...sampling.protocol import SamplerError, SampleResult, SamplingParams

# veRL's sampling keys the rollout servers accept and the run's configuration sets
ROLLOUT_KEYS = ("temperature", "top_p", "top_k", "repetition_penalty", "min_p", "seed")


# the newest weight version a server output named in this process: veRL's trainer wants a version
# on every row, and an episode that failed before its first model call has none of its own
LATEST_WEIGHT_VERSION: int | None = None


class VerlServerSampler:
    def __init__(self, server_manager: Any, request_id: str, rollout_params: dict[str, Any],
                 stop_token_ids: Iterable[int]):
        self.server = server_manager
        self.request_id = request_id
        self.rollout_params = {k: rollout_params[k] for k in ROLLOUT_KEYS if k in rollout_params}
        self.stop_token_ids = tuple(sorted({int(t) for t in stop_token_ids}))
        if not self.stop_token_ids:
            raise ValueError("VerlServerSampler needs at least one stop token id (the end-of-turn token)")
        self.calls = 0

    def request_params(self, max_new_tokens: int) -> dict[str, Any]:
        """The dict sent to the server for one turn (a fresh copy: servers pop keys from it)."""
        return {**self.rollout_params, "max_tokens": int(max_new_tokens), "logprobs": True,
                "stop_token_ids": list(self.stop_token_ids)}

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        self.calls += 1
        try:
            out = await self.server.generate(self.request_id, prompt_ids=list(prompt_ids),
                                             sampling_params=self.request_params(params.max_new_tokens))
        except Exception as e:  # the server's failure ends the episode as an error, with its reason
            raise SamplerError(f"veRL server generate failed: {type(e).__name__}: {e}") from e
        ids = [int(t) for t in (out.token_ids or [])]
        stop_reason = getattr(out, "stop_reason", None)
        if stop_reason in ("aborted", "abort"):
            raise SamplerError("veRL server aborted the request")
        if not ids:
            raise SamplerError(f"veRL server returned no tokens (stop_reason={stop_reason!r})")
        if len(ids) > params.max_new_tokens:
            raise SamplerError(f"veRL server returned {len(ids)} tokens for a budget of {params.max_new_tokens}")
        logprobs = out.log_probs
        if logprobs is None or len(logprobs) != len(ids):
            raise SamplerError(f"veRL server returned {0 if logprobs is None else len(logprobs)} log-probs "
                               f"for {len(ids)} tokens although they were requested")
        finish = "stop" if ids[-1] in self.stop_token_ids else "length"
        extra = getattr(out, "extra_fields", None) or {}
        # veRL's server client tags each output with the trainer step whose weights sampled it
        version = extra.get("max_global_steps", extra.get("global_steps"))
        version = int(version) if version is not None else None
        if version is not None:
            global LATEST_WEIGHT_VERSION
            LATEST_WEIGHT_VERSION = max(LATEST_WEIGHT_VERSION or 0, version)
        return SampleResult(response_ids=ids, logprobs=[float(x) for x in logprobs], finish_reason=finish,
                            weight_version=version)
