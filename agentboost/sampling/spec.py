"""``SamplerSpec``: how a worker process reaches the policy, as picklable data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import SamplingParams


@dataclass
class SamplerSpec:
    tokenizer: str | None  # the policy's tokenizer directory (with its chat template); None for "chat"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # "http": a vLLM-compatible server; "scripted": a script, for tests and benchmarks; "chat": a chat
    # model we do not train, through a Strands provider (``chat``: a ChatModelSpec's fields), text-level
    kind: str = "http"
    url: str | None = None
    # the model name the server expects in requests; None: asked from its /v1/models route (the
    # veRL fork's async servers have no such route, so the rLLM path names it)
    model: str | None = None
    # for "http": the policy-version file naming the served model per request (a trainer's vLLM server)
    policy_file: str | None = None
    # for "scripted": module:function(tokenizer, **script_kwargs) -> script (see ScriptedSampler)
    script: str | None = None
    script_kwargs: dict[str, Any] = field(default_factory=dict)
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    chat: dict[str, Any] | None = None

    def validate(self) -> "SamplerSpec":
        if self.kind == "http" and not self.url:
            raise ValueError("sampler kind 'http' needs a url")
        if self.kind == "scripted" and not self.script:
            raise ValueError("sampler kind 'scripted' needs a script import path")
        if self.kind == "chat" and not self.chat:
            raise ValueError("sampler kind 'chat' needs a chat model (provider, model_id, ...)")
        if self.kind != "chat" and not self.tokenizer:
            raise ValueError(f"sampler kind {self.kind!r} needs the policy's tokenizer")
        if self.kind not in ("http", "scripted", "chat"):
            raise ValueError(f"unknown sampler kind {self.kind!r}; expected 'http', 'scripted' or 'chat'")
        return self
