"""``SamplerSpec``: how a worker process reaches the policy, as picklable data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import Sampler, SamplingParams


@dataclass
class SamplerSpec:
    tokenizer: str  # the policy's tokenizer directory (with its chat template)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    kind: str = "http"  # "http": a vLLM-compatible server; "scripted": a script, for tests and benchmarks
    url: str | None = None
    # for "scripted": module:function(tokenizer, **script_kwargs) -> script (see ScriptedSampler)
    script: str | None = None
    script_kwargs: dict[str, Any] = field(default_factory=dict)
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> "SamplerSpec":
        if self.kind == "http" and not self.url:
            raise ValueError("sampler kind 'http' needs a url")
        if self.kind == "scripted" and not self.script:
            raise ValueError("sampler kind 'scripted' needs a script import path")
        if self.kind not in ("http", "scripted"):
            raise ValueError(f"unknown sampler kind {self.kind!r}; expected 'http' or 'scripted'")
        return self


class SamplerFactory:
    """Built once per worker: the tokenizer, the renderer, and a sampler for each episode."""

    def __init__(self, spec: SamplerSpec):
        from transformers import AutoTokenizer

        from ..agents.chat_rendering import ChatRenderer

        self.spec = spec.validate()
        self.tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer)
        self.renderer = ChatRenderer(self.tokenizer, template_kwargs=spec.template_kwargs)
        self._shared: Sampler | None = None
        self._script = None
        if spec.kind == "http":
            from .http_sampler import HttpSampler

            self._shared = HttpSampler(spec.url)
        else:
            from ..agents.strands_agent import import_object

            self._script = import_object(spec.script, "sampler script")(self.tokenizer, **spec.script_kwargs)

    def sampler_for_episode(self) -> Sampler:
        if self._shared is not None:
            return self._shared
        from .scripted import ScriptedSampler

        return ScriptedSampler(self._script, self.tokenizer)  # call indices restart per episode

    async def close(self) -> None:
        if self._shared is not None and hasattr(self._shared, "close"):
            await self._shared.close()
