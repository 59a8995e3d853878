"""What agentboost changes in the veRL fork's async vLLM server's ``/v1/completions`` route.

``modified_verl_files/vllm_async_server.py`` uses these. The fork's route throws away
``token_logprobs`` (and ``top_logprobs``, ``text_offset``) from every response; the override keeps
vLLM's response as vLLM produced it, so token ids (``return_tokens_as_token_ids``) and their
log-probabilities reach the sampler. And a prompt that does not fit the context is answered with a
clear error (HTTP 400, type ``PromptTooLongError``) that agentboost's sampler turns into an
episode ``truncated``: never a shortened or substitute prompt.
"""

from __future__ import annotations

from typing import Any

PROMPT_TOO_LONG = "PromptTooLongError"


def token_prompt(body: dict[str, Any]) -> list[int] | None:
    """The prompt when it is one list of token ids (the token-in path), else None."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return prompt
    return None


def check_completion_request(body: dict[str, Any], max_model_len: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Returns ``(body, error)``. ``error`` is the JSON of a 400 answer when the prompt cannot be
    served. A prompt that fits but leaves fewer than ``max_tokens`` positions gets ``max_tokens``
    lowered to what is left (the sample then ends with finish_reason "length", and the episode
    says so) instead of vLLM rejecting the whole request."""
    ids = token_prompt(body)
    if ids is None:
        return body, None  # text prompts: vLLM's own validation answers
    n = len(ids)
    if n >= max_model_len:
        return body, {
            "object": "error", "type": PROMPT_TOO_LONG, "code": 400, "param": "prompt",
            "message": f"prompt of {n} tokens does not leave room to sample in the model's maximum context "
                       f"length of {max_model_len} tokens",
            "prompt_tokens": n, "max_model_len": max_model_len,
        }
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and n + max_tokens > max_model_len:
        body = dict(body, max_tokens=max_model_len - n)
    return body, None
