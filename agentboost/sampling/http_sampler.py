"""Sampler over vLLM's OpenAI-compatible ``/v1/completions`` route, prompt given as token ids."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import aiohttp

from .policy_version import read_policy_version
from .protocol import PromptTooLongError, SamplerError, SampleResult, SamplingParams, ServiceUnavailableError


class HttpSampler:
    """Works against vLLM >= 0.10.2 (``return_token_ids``) and older vLLM (token ids recovered from
    ``logprobs`` with ``return_tokens_as_token_ids``), and against ``agentboost serve``.

    With ``policy_file`` (see ``policy_version``), each request names the model that file gives
    (a LoRA adapter loaded for the current weights) and its result carries the file's weight
    version; the file is read per request, so a new version is used from the next request on."""

    def __init__(self, base_url: str, model: str | None = None, timeout_s: float = 600.0,
                 max_retries: int = 2, policy_file: str | None = None):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = model
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_retries = max_retries
        self.policy_file = policy_file
        # aiohttp sessions belong to one event loop; keep one per loop
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        s = self._sessions.get(loop)
        if s is None or s.closed:
            s = aiohttp.ClientSession(timeout=self.timeout)
            self._sessions[loop] = s
        return s

    async def close(self) -> None:
        s = self._sessions.pop(asyncio.get_running_loop(), None)
        if s is not None:
            await s.close()

    async def _model_name(self) -> str:
        if self.model is None:
            async with self._session().get(f"{self.base_url}/v1/models") as r:
                data = await r.json()
            self.model = data["data"][0]["id"]
        return self.model

    async def sample(self, prompt_ids: list[int], params: SamplingParams,
                     weights_version: int | None = None) -> SampleResult:
        """``weights_version``: sample that published version of the weights (``<model>@<version>``,
        see ``VersionPinned``), whatever the server serves as its newest."""
        body: dict[str, Any] = {
            "prompt": list(prompt_ids),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            # 1, not 0: OpenAI-compatible gateways (rLLM's model gateway among them) read 0 as
            # "not requested" and strip the log-probs and token ids; vLLM returns the sampled
            # token's log-prob either way
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        if params.seed is not None:
            body["seed"] = params.seed
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                version = None
                if weights_version is not None:
                    body["model"] = f"{await self._model_name()}@{weights_version}"
                elif self.policy_file:
                    current = read_policy_version(self.policy_file)
                    body["model"], version = current.model, current.version
                else:
                    body["model"] = await self._model_name()
                async with self._session().post(f"{self.base_url}/v1/completions", json=body) as r:
                    data = _parsed(await r.text(errors="replace"))
                    if r.status == 413:  # the request, not the model, is too large: the prompt is
                        raise PromptTooLongError(f"prompt of {len(prompt_ids)} tokens rejected: the request is "
                                                 f"over the server's size limit ({_message(data)})")
                    if r.status >= 500 or r.status == 429:  # the server's state, not the request: retried
                        raise _Unavailable(f"sampler server error {r.status}: {_message(data)}")
                    if r.status != 200:  # a client error will not go away by retrying
                        if _prompt_too_long(data):
                            raise PromptTooLongError(f"prompt of {len(prompt_ids)} tokens rejected: {_message(data)}")
                        raise _Fatal(f"sampler rejected the request ({r.status}): {_message(data)}")
                if not isinstance(data, dict):
                    raise SamplerError(f"sampler replied with something other than a JSON object: {_message(data)}")
                result = parse_completion(data)
                if version is not None:  # the policy file names the weights; else the server may
                    result.weight_version = version
                return result
            except _Fatal as e:
                raise SamplerError(str(e)) from None
            except PromptTooLongError:
                raise
            except (aiohttp.ClientError, asyncio.TimeoutError, SamplerError) as e:
                last = e
                if attempt < self.max_retries:
                    await asyncio.sleep(0.2 * 2**attempt)
        # an unreachable, throttling or failing server is an outage (the episode is aborted); a
        # reply that is not a completion is a defect of the server's (the episode errs)
        outage = isinstance(last, (aiohttp.ClientError, asyncio.TimeoutError, _Unavailable))
        raise (ServiceUnavailableError if outage else SamplerError)(
            f"sampler at {self.base_url} failed after {self.max_retries + 1} tries: {type(last).__name__}: {last}")


class VersionPinned:
    """One episode's way to the policy when it is pinned to the weight version it started on
    (asynchronous training, ``rollout.max_staleness``): every call of the episode samples that
    version, however many updates happen meanwhile."""

    def __init__(self, sampler: HttpSampler, version: int):
        self.sampler, self.version = sampler, version

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        return await self.sampler.sample(prompt_ids, params, weights_version=self.version)


class _Fatal(Exception):
    pass


class _Unavailable(SamplerError):
    pass


def _parsed(text: str) -> Any:
    """A reply's JSON, or its text when it is not JSON (a proxy's or a server's plain error page)."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def _message(data: Any) -> str:
    if isinstance(data, dict):
        return str(data.get("message") or data.get("error") or data)[:300]
    return str(data).strip()[:300]


def _prompt_too_long(data: Any) -> bool:
    """agentboost's veRL-fork server override says so by type; vLLM and the local server by message."""
    if not isinstance(data, dict):
        return False
    err = data.get("error") if isinstance(data.get("error"), dict) else data
    message = str(err.get("message", ""))
    return (err.get("type") == "PromptTooLongError" or "maximum context length" in message
            or "longer than the maximum model length" in message  # vLLM's v1 engine, for token-id prompts
            or "does not fit the model's context" in message)  # the last: agentboost's local server


def parse_completion(data: dict[str, Any]) -> SampleResult:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise SamplerError(f"completion response has no choices: {str(data)[:200]}") from None
    lp = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        tokens = lp.get("tokens")
        if not tokens or not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            raise SamplerError("completion response carries no token ids: ask vLLM for return_token_ids "
                               "or logprobs with return_tokens_as_token_ids")
        ids = [int(t.split(":", 1)[1]) for t in tokens]
    logprobs = lp.get("token_logprobs")
    if logprobs is None or len(logprobs) != len(ids):
        raise SamplerError(f"completion response has {len(ids)} token ids but "
                           f"{'no' if logprobs is None else len(logprobs)} logprobs")
    finish = choice.get("finish_reason") or "stop"
    if finish not in ("stop", "length"):
        raise SamplerError(f"unexpected finish_reason {finish!r}")
    version = data.get("weight_version")  # agentboost's servers say which weights sampled, when told
    return SampleResult(response_ids=[int(t) for t in ids], logprobs=[float(x) for x in logprobs],
                        finish_reason=finish, weight_version=int(version) if isinstance(version, int) else None)
