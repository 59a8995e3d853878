"""A worker's way to the policy: built once per worker process from its ``SamplerSpec``."""

from __future__ import annotations

from ..agents.chat_rendering import ChatRenderer
from ..imports import import_object
from ..models.chat import ChatModelSpec, chat_model_spec
from ..sampling.protocol import Sampler
from ..sampling.spec import SamplerSpec


class SamplerFactory:
    """Built once per worker: the tokenizer, the renderer, and a sampler for each episode."""

    def __init__(self, spec: SamplerSpec):
        self.spec = spec.validate()
        self._shared: Sampler | None = None
        self._script = None
        # a chat model we do not train (kind "chat"): no tokenizer, no sampler; run_chat_episode builds
        # its Strands model per episode (the key is read here, in the worker, never sent to it)
        self.chat: ChatModelSpec | None = chat_model_spec(spec.chat) if spec.kind == "chat" else None
        if self.chat is not None:
            self.chat.api_key()  # a missing key fails the worker's setup, once, not every episode
            self.tokenizer = self.renderer = None
            return
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer)
        self.renderer = ChatRenderer(self.tokenizer, template_kwargs=spec.template_kwargs)
        if spec.kind == "http":
            from ..sampling.http_sampler import HttpSampler

            self._shared = HttpSampler(spec.url, model=spec.model, policy_file=spec.policy_file)
        else:
            self._script = import_object(spec.script, "sampler script")(self.tokenizer, **spec.script_kwargs)

    def sampler_for_episode(self, version: int | None = None) -> Sampler:
        """``version``: the weight version the episode is pinned to (asynchronous training); every
        call of the episode samples it."""
        if version is not None:
            from ..sampling.http_sampler import HttpSampler, VersionPinned

            if not isinstance(self._shared, HttpSampler):
                raise ValueError("an episode pinned to a weight version needs a policy server (sampler kind http)")
            return VersionPinned(self._shared, version)
        if self._shared is not None:
            return self._shared
        from ..sampling.scripted import ScriptedSampler

        return ScriptedSampler(self._script, self.tokenizer)  # call indices restart per episode

    async def close(self) -> None:
        if self._shared is not None and hasattr(self._shared, "close"):
            await self._shared.close()
