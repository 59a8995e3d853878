"""The policy served to worker processes: the one way ``train``, ``rollout`` and ``serve`` start it.

Two engines. ``hf``: the policy lives in this process (the trainer updates it in place); a
loopback HTTP server puts it behind vLLM's ``/v1/completions`` contract, so workers reach it
exactly as they would reach a vLLM server. ``vllm``: a real vLLM server subprocess
(``vllm_server.VLLMPolicyServer``), the weights synced to it after each update.
"""

from __future__ import annotations

from .completions_server import CompletionsServer
from .local_engine import LocalEngine

ENGINES = ("hf", "vllm", "auto")


def resolve_engine(engine: str, vllm_python: str | None = None) -> str:
    """"hf" or "vllm" for a configured engine; "vllm" without vLLM installed is an error that says
    how to install it, "auto" falls back to "hf"."""
    from .vllm_server import find_vllm_python, require_vllm_python

    if engine not in ENGINES:
        raise ValueError(f"unknown rollout engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "auto":
        return "vllm" if find_vllm_python(vllm_python) else "hf"
    if engine == "vllm":
        require_vllm_python(vllm_python)
    return engine


class PolicyServer:
    """An engine and its loopback server; ``close()`` (or leaving the ``with`` block) stops both."""

    def __init__(self, engine: LocalEngine, model_name: str = "agentboost-policy"):
        self.engine = engine
        self.server = CompletionsServer(engine, model_name=model_name)
        self.url: str | None = None

    @classmethod
    def start(cls, model, tokenizer, max_batch_size: int, batch_wait_s: float = 0.01,
              model_name: str = "agentboost-policy", host: str = "127.0.0.1", port: int = 0,
              schedule: str = "oldest-episode") -> "PolicyServer":
        """Serve an already loaded ``model`` (e.g. the trainer's, LoRA-wrapped) from a thread."""
        engine = LocalEngine(model, tokenizer, max_batch_size=max_batch_size, batch_wait_s=batch_wait_s,
                             schedule=schedule)
        ps = cls(engine, model_name)
        try:
            ps.url = ps.server.start_in_thread(host, port)
        except BaseException:
            engine.close()
            raise
        return ps

    @classmethod
    def from_pretrained(cls, name_or_path: str, max_batch_size: int, **kwargs) -> "PolicyServer":
        from ..models.loading import load_policy

        model, tokenizer = load_policy(name_or_path)
        return cls.start(model, tokenizer, max_batch_size, model_name=kwargs.pop("model_name", name_or_path), **kwargs)

    @property
    def weights_lock(self):
        return self.engine.weights_lock

    def close(self) -> None:
        self.server.stop_thread()
        self.engine.close()

    def __enter__(self) -> "PolicyServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
