"""A stand-in for veRL's ``LLMServerClient`` that forwards to an agentboost sampler.

veRL's client needs Ray actors and a vLLM/SGLang replica on GPUs. This one has the same
``generate`` signature (tests assert it against the installed veRL) and answers through any
agentboost ``Sampler`` (scripted, or the local engine with a real model), so veRL's real
``AgentLoopWorker`` can run agent loops on a CPU machine. It behaves as veRL's vLLM server does
where the loop can tell: ``max_tokens`` bounds the turn, ``stop_token_ids`` end it, both ends are
reported as ``"completed"``, log-probs come only when ``logprobs`` is truthy.
"""

from __future__ import annotations

from typing import Any

from ...sampling.protocol import Sampler, SamplingParams


class ForwardingServerClient:
    def __init__(self, sampler: Sampler, default_max_tokens: int = 256):
        self.sampler = sampler
        self.default_max_tokens = default_max_tokens
        self.requests: list[dict[str, Any]] = []  # what each call received, for assertions

    async def generate(
        self,
        request_id,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        audio_data: list[Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        from verl.workers.rollout.replica import TokenOutput

        sp = dict(sampling_params)
        record = {"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling_params": dict(sp)}
        self.requests.append(record)
        params = SamplingParams(temperature=float(sp.get("temperature", 1.0)), top_p=float(sp.get("top_p", 1.0)),
                                max_new_tokens=int(sp.get("max_tokens", self.default_max_tokens)),
                                stop_token_ids=tuple(sp.get("stop_token_ids") or ()))
        res = await self.sampler.sample(list(prompt_ids), params)
        record.update(token_ids=list(res.response_ids), log_probs=list(res.logprobs))
        return TokenOutput(token_ids=list(res.response_ids),
                           log_probs=list(res.logprobs) if sp.get("logprobs") else None,
                           stop_reason="completed")  # veRL reports a stop and a length cut alike
