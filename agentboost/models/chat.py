"""Chat models we do not train: a baseline in ``eval``, a tau2 user simulator, a judge.

They go through Strands' own model providers (``strands.models.openai.OpenAIModel`` and the
others the installed ``strands-agents`` ships), configured as Strands configures them; agentboost
holds no HTTP client of its own for them. A ``ChatModelSpec`` is picklable data, safe to write
anywhere: the API key is never in it, only the name of the environment variable that holds it,
read when the model is built (in the process that calls it).

Episodes run by such a model are text, not tokens (``Episode.text_level``): evaluated and
exported for SFT, never RL rows. ``is_outage`` tells an outage of the serving side (connection
refused, throttling, 5xx, timeouts: the episode is ``aborted``) from everything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError


class ChatModelError(InputError):
    pass


# provider -> (module, class): Strands' own providers. Each takes its endpoint and key its own way
# (``_provider_kwargs``); anything else goes through ``params`` (the provider's model parameters)
# and ``client_args`` (its client's options).
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("strands.models.openai", "OpenAIModel"),  # any OpenAI-compatible server (vLLM, SGLang, ...)
    "litellm": ("strands.models.litellm", "LiteLLMModel"),
    "anthropic": ("strands.models.anthropic", "AnthropicModel"),
    "bedrock": ("strands.models.bedrock", "BedrockModel"),
    "ollama": ("strands.models.ollama", "OllamaModel"),
}
# what a config may not hold in clear: keys come from the variable named by api_key_env
SECRET_KEYS = ("api_key", "aws_secret_access_key", "aws_session_token", "token", "authorization")


@dataclass
class ChatModelSpec:
    provider: str
    model_id: str
    base_url: str | None = None  # the endpoint (openai, litellm: api_base, anthropic, ollama: host, bedrock: endpoint_url)
    api_key_env: str | None = None  # the environment variable holding the key; never the key itself
    params: dict[str, Any] = field(default_factory=dict)  # the provider's model parameters (temperature, max_tokens, ...)
    client_args: dict[str, Any] = field(default_factory=dict)  # the provider client's options (no keys)
    region: str | None = None  # bedrock's region
    max_retries: int = 3  # the provider client's retries of connection errors, 429 and 5xx, with its backoff
    timeout_s: float = 120.0  # per request; keep it under the agent's episode timeout
    # prices, for the cost in a judge's metrics and a prompt run's budget (0: not counted)
    usd_per_million_input_tokens: float = 0.0
    usd_per_million_output_tokens: float = 0.0

    def validate(self, where: str = "chat model") -> "ChatModelSpec":
        if self.provider not in PROVIDERS:
            raise ChatModelError(f"{where}: provider {self.provider!r} is not one of {', '.join(PROVIDERS)}")
        if not self.model_id:
            raise ChatModelError(f"{where}: model_id is required")
        for name in ("params", "client_args"):
            bad = [k for k in getattr(self, name) if k.lower() in SECRET_KEYS]
            if bad:
                raise ChatModelError(f"{where}: {name}.{bad[0]} holds a secret; name the environment variable that "
                                     "holds it in api_key_env instead (keys are never written to configs or runs)")
        if self.max_retries < 0 or self.timeout_s <= 0:
            raise ChatModelError(f"{where}: max_retries must be >= 0 and timeout_s > 0")
        return self

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """What ``input_tokens`` and ``output_tokens`` cost at the spec's prices (0 where none given)."""
        return (input_tokens * self.usd_per_million_input_tokens
                + output_tokens * self.usd_per_million_output_tokens) / 1e6

    def describe(self) -> str:
        return f"{self.provider}:{self.model_id}" + (f" at {self.base_url}" if self.base_url else "")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ChatModelError(f"chat model {self.describe()}: the environment variable {self.api_key_env} "
                                 "(api_key_env) is not set")
        return key

    def build(self, temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
              seed: int | None = None, tools: bool = True):
        """The Strands model. Sampling settings given here are the defaults under ``params``
        (the spec's own ``params`` win: a hosted model may not accept ``seed``, for example).
        ``tools=False``: for an agent without tools (a user simulator, a judge)."""
        import importlib

        self.validate()
        module, cls = PROVIDERS[self.provider]
        try:
            model_cls = getattr(importlib.import_module(module), cls)
        except ImportError as e:
            raise ChatModelError(f"chat model provider {self.provider!r} needs a package that is not installed "
                                 f"({e.name}); install strands-agents[{self.provider}]") from None
        sampling = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens),
                                      ("seed", seed)) if v is not None}
        return model_cls(**self._provider_kwargs(sampling, tools))

    def ask(self, system: str, prompt: str, max_tokens: int) -> tuple[str | None, dict[str, int]]:
        """One greedy call without tools (a judge's): the reply's text, None when it was cut at
        ``max_tokens`` (the caller says whose reply), and its token usage. An outage propagates."""
        from strands import Agent
        from strands.types.exceptions import MaxTokensReachedException

        agent = Agent(model=self.build(temperature=0.0, max_tokens=max_tokens, tools=False), system_prompt=system,
                      callback_handler=None)
        try:
            result = agent(prompt)
        except MaxTokensReachedException:
            return None, {"input_tokens": 0, "output_tokens": 0}
        text = "".join(b.get("text", "") for b in result.message.get("content") or [])
        usage = dict(result.metrics.accumulated_usage or {})
        return text, {"input_tokens": int(usage.get("inputTokens", 0)), "output_tokens": int(usage.get("outputTokens", 0))}

    def _provider_kwargs(self, sampling: dict[str, Any], tools: bool = True) -> dict[str, Any]:
        key = self.api_key()
        params = {**sampling, **self.params}
        if not tools and self.provider in ("openai", "litellm"):
            # Strands' OpenAI provider sends "tools": [] for an agent without tools, which vLLM's
            # server refuses (400, "must not be an empty array"); null is "no tools" to both
            params.setdefault("tools", None)
        if self.provider in ("openai", "litellm"):
            client = dict(self.client_args)
            if self.provider == "openai":
                # a local OpenAI-compatible server needs no key; the client insists on one
                client.update(api_key=key or "unused", max_retries=self.max_retries, timeout=self.timeout_s)
                if self.base_url:
                    client["base_url"] = self.base_url
            else:
                if key:
                    client["api_key"] = key
                if self.base_url:
                    client["api_base"] = self.base_url
                params.setdefault("num_retries", self.max_retries)
                params.setdefault("timeout", self.timeout_s)
            return {"client_args": client, "model_id": self.model_id, "params": params}
        if self.provider == "anthropic":
            client = {**self.client_args, "max_retries": self.max_retries, "timeout": self.timeout_s}
            if key:
                client["api_key"] = key
            if self.base_url:
                client["base_url"] = self.base_url
            max_tokens = params.pop("max_tokens", 1024)
            params.pop("seed", None)  # Anthropic's API has no seed
            return {"client_args": client, "model_id": self.model_id, "max_tokens": max_tokens, "params": params}
        if self.provider == "bedrock":
            from botocore.config import Config

            retries = {"max_attempts": self.max_retries + 1, "mode": "adaptive"}
            kwargs: dict[str, Any] = {"model_id": self.model_id, "region_name": self.region,
                                      "boto_client_config": Config(retries=retries, read_timeout=self.timeout_s,
                                                                   **self.client_args)}
            if self.base_url:
                kwargs["endpoint_url"] = self.base_url
            if key:
                kwargs["api_key"] = key
            params.pop("seed", None)
            for k in ("temperature", "top_p", "max_tokens"):
                if k in params:
                    kwargs[k] = params.pop(k)
            if params:
                kwargs["additional_request_fields"] = params
            return kwargs
        # ollama
        options = {("num_predict" if k == "max_tokens" else k): v for k, v in params.items()}
        return {"host": self.base_url, "ollama_client_args": {**self.client_args, "timeout": self.timeout_s},
                "model_id": self.model_id, "options": options}


def chat_model_spec(value: Any, where: str = "chat model") -> ChatModelSpec:
    """A spec from a dict (a config's mapping), a ``ChatModelSpec``, a YAML or JSON file holding
    one, or inline JSON/YAML text (``{provider: openai, model_id: ...}``)."""
    if isinstance(value, ChatModelSpec):
        return value.validate(where)
    if isinstance(value, (str, Path)):
        text = str(value).strip()
        if Path(text).is_file():
            where, text = f"{where} {text}", Path(text).read_text()
        import yaml

        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ChatModelError(f"{where}: not YAML or JSON: {e}") from None
    if not isinstance(value, dict):
        raise ChatModelError(f"{where}: expected a mapping with provider and model_id, got {type(value).__name__}")
    known = set(ChatModelSpec.__dataclass_fields__)
    unknown = sorted(set(value) - known)
    if unknown:
        raise ChatModelError(f"{where}: unknown key {unknown[0]!r}; expected some of {', '.join(sorted(known))}")
    if "provider" not in value or "model_id" not in value:
        raise ChatModelError(f"{where}: provider and model_id are required")
    return ChatModelSpec(**value).validate(where)


def json_object(text: str) -> Any:
    """The JSON between a reply's first ``{`` and last ``}`` (a model may wrap it in prose or a
    code fence); None when there is none or it does not parse. The caller checks its shape."""
    start, end = text.find("{"), text.rfind("}")
    try:
        return json.loads(text[start:end + 1]) if start >= 0 else None
    except ValueError:
        return None


def is_chat_model_spec(value: Any) -> bool:
    """Whether ``value`` (a CLI argument or a config value) describes a chat model rather than a
    policy (an embedded name, a model or run directory): a mapping, or a file or text with
    ``provider:``."""
    if isinstance(value, (dict, ChatModelSpec)):
        return True
    text = str(value).strip()
    if text.startswith("{"):
        return True
    p = Path(text)
    if p.is_file() and p.suffix in (".yaml", ".yml", ".json"):
        try:
            import yaml

            d = yaml.safe_load(p.read_text())
        except (yaml.YAMLError, OSError, UnicodeDecodeError):  # not a spec file: another kind of model
            return False
        return isinstance(d, dict) and "provider" in d and "model" not in d
    return False


# -- telling an outage from everything else ---------------------------------------------------
# by name, so no provider package needs to be imported to check: the client errors of openai,
# anthropic, litellm, httpx, aiohttp and botocore that mean "the service did not answer"
_OUTAGE_NAMES = frozenset({
    "APIConnectionError", "APITimeoutError", "InternalServerError", "RateLimitError", "ServiceUnavailableError",
    "ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "RemoteProtocolError",
    "ReadError", "TimeoutException", "ClientConnectionError", "ClientConnectorError", "ServerDisconnectedError",
    "ServerTimeoutError", "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
    "ModelThrottledException", "ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException",
})


def _causes(e: BaseException | None):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def is_outage(e: BaseException) -> bool:
    """Whether ``e`` (or what it wraps) says the serving side was unavailable: connection refused or
    reset, throttling (429), a server error (5xx), a request timeout."""
    for c in _causes(e):
        if type(c).__name__ in _OUTAGE_NAMES or any(t.__name__ in _OUTAGE_NAMES for t in type(c).__mro__):
            return True
        status = getattr(c, "status_code", None) or getattr(c, "status", None)
        if isinstance(status, int) and (status == 429 or 500 <= status < 600):
            return True
    return False


def redact(text: str, spec: ChatModelSpec | None) -> str:
    """``text`` with the spec's key replaced, for error texts that end up in records and logs (a
    provider may echo the key in a message)."""
    if spec is None or not spec.api_key_env:
        return text
    key = os.environ.get(spec.api_key_env)
    return text.replace(key, f"${spec.api_key_env}") if key else text


def spec_json(spec: ChatModelSpec) -> str:
    return json.dumps(spec.as_dict(), sort_keys=True)
