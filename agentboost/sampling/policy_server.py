"""The policy served to worker processes, and ``start_policy_server``: the one way the trainer,
``eval``, ``rollout`` and ``serve`` start it.

Two engines. ``hf``: the policy lives in this process (the trainer updates it in place); a
loopback HTTP server puts it behind vLLM's ``/v1/completions`` contract, so workers reach it
exactly as they would reach a vLLM server. ``vllm``: a real vLLM server subprocess
(``vllm_server.VLLMPolicyServer``), the weights synced to it after each update.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..moved import renamed
from .completions_server import CompletionsServer
from .hf_engine import HFEngine
from .policy_version import PolicyVersion

if TYPE_CHECKING:
    from .vllm_server import VLLMPolicyServer

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


class HFPolicyServer:
    """An engine and its loopback server; ``close()`` (or leaving the ``with`` block) stops both."""

    last_sync_s = 0.0  # a publish transfers nothing
    identity: dict | None = None  # what serves, verified (run/verify.py verify_served), where checked

    def __init__(self, engine: HFEngine, model_name: str = "agentboost-policy"):
        self.engine = engine
        self.server = CompletionsServer(engine, model_name=model_name)
        self.url: str | None = None

    @classmethod
    def start(cls, model, tokenizer, max_batch_size: int, batch_wait_s: float = 0.01,
              model_name: str = "agentboost-policy", host: str = "127.0.0.1", port: int = 0,
              schedule: str = "oldest-episode") -> "HFPolicyServer":
        """Serve an already loaded ``model`` (e.g. the trainer's, LoRA-wrapped) from a thread."""
        engine = HFEngine(model, tokenizer, max_batch_size=max_batch_size, batch_wait_s=batch_wait_s,
                             schedule=schedule)
        ps = cls(engine, model_name)
        try:
            ps.url = ps.server.start_in_thread(host, port)
        except BaseException:
            engine.close()
            raise
        return ps

    @classmethod
    def from_pretrained(cls, name_or_path: str, max_batch_size: int, **kwargs) -> "HFPolicyServer":
        from ..models.loading import load_policy

        model, tokenizer = load_policy(name_or_path)
        return cls.start(model, tokenizer, max_batch_size, model_name=kwargs.pop("model_name", name_or_path), **kwargs)

    @property
    def weights_lock(self):
        return self.engine.weights_lock

    # -- weight versions and what is served (run/verify.py) ------------------------------------
    def publish(self, model, version: int) -> PolicyVersion:
        """The engine samples the trainer's own model object: nothing to transfer, only the version
        its answers report from now on (taken under the weights lock, between batches)."""
        if model is not self.engine.model:
            raise ValueError("the hf engine serves the model it was started with; publish that model")
        with self.engine.weights_lock:
            self.server.weight_version = int(version)
        return PolicyVersion(self.server.model_name, int(version))

    def weight_sync(self) -> str:
        return "hf-lora" if hasattr(self.engine.model, "peft_config") else "hf-full"

    def served_dtype(self) -> str:
        from ..models.fingerprint import dtype_name

        return dtype_name(next(self.engine.model.parameters()).dtype)

    def served_fingerprint(self, kind: str, seed: int) -> dict[str, Any]:
        """The version the engine's answers report and the fingerprint of the model it samples."""
        from ..models import fingerprint as fp

        with self.engine.weights_lock:
            # a published snapshot of this version (asynchronous training) is what its episodes sample
            version = self.server.weight_version
            model = self.engine.model_for(version) if version in self.engine.served_versions() else self.engine.model
            dtype = self.served_dtype()
            if kind == fp.LORA:
                got = fp.of_lora(model, dtype, seed)
            else:
                got = fp.of_tensors(model.state_dict().items(), dtype, seed)
            return {"version": self.server.weight_version, "name": self.server.model_name, "fingerprint": got}

    def close(self) -> None:
        self.server.stop_thread()
        self.engine.close()

    def __enter__(self) -> "HFPolicyServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class VLLMOptions:
    """How the vllm engine's server runs (``rollout.vllm_*`` in a training config)."""

    python: str | None = None  # the interpreter with vLLM; None: $AGENTBOOST_VLLM_PYTHON, else .venv-vllm
    lora_sync: str = "auto"  # a LoRA policy reaches vLLM as a runtime "adapter", "merged" weights, or "auto"
    kv_cache_gib: float = 1.0  # KV cache of the CPU build
    max_model_len: int | None = None  # None: the model's own context length
    startup_timeout_s: float = 600.0


def start_policy_server(engine: str, model_path: str | os.PathLike[str], *, model: Any = None, tokenizer: Any = None,
                        served_name: str | None = None, max_batch_size: int = 8, batch_wait_s: float = 0.01,
                        host: str = "127.0.0.1", port: int | None = None, seed: int = 0, slots: int | None = None,
                        vllm: VLLMOptions | None = None, lora_rank: int = 0, full_weight_sync: bool = False,
                        workdir: str | os.PathLike[str] | None = None,
                        weights_version: int = 0) -> tuple[str, HFPolicyServer | VLLMPolicyServer]:
    """(engine name, started server) for ``engine`` (hf, vllm or auto, see ``resolve_engine``).

    ``model_path``: the weights; ``model`` (and ``tokenizer``): the policy already loaded, e.g. the
    trainer's, LoRA-wrapped. Without ``model``, ``model_path`` is an embedded model name or a model
    directory, loaded here (hf) or resolved to its directory (vllm).

    hf: the model is served from a thread of this process, at most ``max_batch_size`` requests
    decoded together after waiting ``batch_wait_s`` for more; ``port`` None: a free one.
    vllm: a server subprocess loads ``model_path`` (``vllm`` says how it runs) with ``max(16, slots)``
    sequences in flight (``slots`` None: vLLM's default) and sampling seed ``seed``; with
    ``weights_version`` > 0, ``model``'s weights (a LoRA adapter when ``lora_rank``, else the full
    weights) are put on it at once, as a checkpoint's. ``full_weight_sync``: the full weights can be
    published to it after an update. ``served_name``: the name the server answers to (default: the
    model name as given when hf loads it here, else ``agentboost-policy``; ``base`` on vLLM)."""
    vllm = vllm or VLLMOptions()
    engine = resolve_engine(engine, vllm.python)
    if engine == "vllm":
        from .vllm_server import VLLMPolicyServer, is_cpu_build, require_vllm_python

        python = require_vllm_python(vllm.python)
        if model is None:
            from ..models.loading import resolve_model_path

            model_path = resolve_model_path(str(model_path))
        merge = bool(lora_rank) and (vllm.lora_sync == "merged" or (vllm.lora_sync == "auto" and is_cpu_build(python)))
        server = VLLMPolicyServer(
            model_path, workdir=workdir, lora_rank=lora_rank, full_weight_sync=full_weight_sync, merge_lora=merge,
            python=python, kv_cache_gib=vllm.kv_cache_gib, max_model_len=vllm.max_model_len,
            startup_timeout_s=vllm.startup_timeout_s, seed=seed, host=host, port=port,
            **({} if slots is None else {"max_num_seqs": max(slots, 16)}),
            **({} if served_name is None else {"served_name": served_name}))
        return engine, server.start(version=weights_version, model=model if weights_version else None)
    kwargs = dict(batch_wait_s=batch_wait_s, host=host, port=port or 0,
                  **({} if served_name is None else {"model_name": served_name}))
    ps = (HFPolicyServer.from_pretrained(str(model_path), max_batch_size, **kwargs) if model is None
          else HFPolicyServer.start(model, tokenizer, max_batch_size, **kwargs))
    ps.publish(ps.engine.model, weights_version)  # the version its answers report
    return engine, ps


# the hf engine's server (beside ``VLLMPolicyServer``) was ``PolicyServer`` before 0.2
__getattr__ = renamed(__name__, {"PolicyServer": "HFPolicyServer"})
