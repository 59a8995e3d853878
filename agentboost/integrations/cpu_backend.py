"""What both cluster paths use to run their trainers on a machine without an accelerator: a test and
development aid (``verl/cpu_platform.py`` + ``verl/cpu_rollout.py`` for stock veRL,
``rllm/cpu.py`` for rLLM's veRL fork), never a way to train real models. No veRL import here: the
two paths run different veRL versions.

- ``CPU_DEVICE_MODULE``: ``torch.cpu`` plus the memory queries veRL makes of a device module;
- ``CpuRolloutPolicy``: the policy a CPU rollout serves (agentboost's batched HF engine), whose weights
  the trainer replaces after each update, with a version and how far the weights moved.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch


class _CPUDeviceModule(ModuleType):
    """``torch.cpu`` plus the memory queries veRL makes of a device module (``torch.cuda``'s names):
    on the CPU there is no device memory to report, so they report none."""

    def __getattr__(self, name: str):
        if name.startswith(("memory_", "max_memory_")) or name in ("mem_get_info",):
            return lambda *a, **k: (0, 0) if name == "mem_get_info" else 0
        if name in ("empty_cache", "reset_peak_memory_stats", "ipc_collect", "set_device"):
            return lambda *a, **k: None
        if name == "get_device_name":  # veRL's flops counter reads it; "CPU" is what it expects of the CPU
            return lambda *a, **k: "CPU"
        return getattr(torch.cpu, name)


CPU_DEVICE_MODULE = _CPUDeviceModule("agentboost_cpu_device")


class CpuRolloutPolicy:
    """A policy served on CPU by agentboost's local engine, its weights replaced by the trainer's."""

    def __init__(self, model_path: str, max_batch_size: int = 16, seed: int = 0):
        from ..models.loading import load_policy
        from ..sampling.hf_engine import HFEngine

        torch.manual_seed(seed)
        model, tokenizer = load_policy(model_path)
        self.engine = HFEngine(model.eval(), tokenizer, max_batch_size=max_batch_size)
        # the weights it started from, to say how far each update moved the served policy
        self.initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.version = 0  # which trained weights are served (0: the weights it started from)
        self.digest: str | None = None  # the verified fingerprint's digest of the weights served
        self.loads = 0
        self.moved = 0.0

    @property
    def dtype(self) -> str:
        from ..models.fingerprint import dtype_name

        return dtype_name(next(self.engine.model.parameters()).dtype)

    def fingerprint(self, seed: int) -> dict[str, Any]:
        """The fingerprint of the weights this policy serves (``models/fingerprint.py``)."""
        from ..models import fingerprint as fp

        with self.engine.weights_lock:
            return fp.of_tensors(self.engine.model.state_dict().items(), self.dtype, seed)

    def load_weights(self, weights: dict[str, torch.Tensor], version: int | None, label: str = "step",
                     expected: dict[str, Any] | None = None) -> int:
        """The trained policy's weights, by their Hugging Face names; every parameter of the served
        model must be among them (a partial load would serve a model nobody trained). ``expected``:
        the sender's fingerprint of what it sent (``run/verify.py``): after loading, the served
        weights' fingerprint must equal it, else ``WeightsMismatch`` (nothing is served from them)."""
        model = self.engine.model
        own = model.state_dict()
        missing = [k for k in own if k not in weights and not k.endswith("rotary_emb.inv_freq")]
        # tied embeddings: the trainer may send only one of the two names
        if missing == ["lm_head.weight"] and "model.embed_tokens.weight" in weights:
            missing = []
        if missing:
            raise ValueError(f"the weight update lacks {len(missing)} of the model's tensors, e.g. {missing[:3]}")
        with torch.no_grad():
            model.load_state_dict({k: v for k, v in weights.items() if k in own}, strict=False)
            moved = max(float((v - self.initial[k]).abs().max()) for k, v in model.state_dict().items()
                        if k in self.initial and v.is_floating_point())
        if expected is not None:
            from ..models import fingerprint as fp
            from ..run.verify import WeightsMismatch

            got = self.fingerprint(expected["seed"])
            problems = fp.differences(expected, got)
            if problems:
                raise WeightsMismatch(f"the CPU rollout's weights after the sync of {label} {version} differ from "
                                      f"the trainer's: {'; '.join(problems)}")
            self.digest = got["digest"]
        if version is not None:
            self.version = int(version)
        self.loads += 1
        self.moved = moved
        # one line per sync in the run's log: what the next rollouts sample
        print(f"agentboost_cpu rollout: serving the weights of {label} {self.version} "
              f"(sync {self.loads}; max |w - w0| = {moved:.3e})", flush=True)
        return self.loads

    def weight_state(self) -> dict[str, Any]:
        return {"version": self.version, "loads": self.loads, "max_abs_change": self.moved, "fingerprint": self.digest}


def sent_fingerprint(weights: dict[str, torch.Tensor], version: int | None, dtype: str) -> dict[str, Any]:
    """The trainer side's fingerprint of full weights it sends to a CPU rollout serving ``dtype``
    (the draw of ``version``, as the local trainer draws it)."""
    from ..models import fingerprint as fp
    from ..run.verify import fingerprint_seed

    # tied embeddings: the sender's gathered state dict holds lm_head.weight as a copy of the
    # embedding, the serving model one tensor under the embedding's name (of_tensors counts a tied
    # tensor once): fingerprint what the replica will hold
    head, embed = weights.get("lm_head.weight"), weights.get("model.embed_tokens.weight")
    if head is not None and embed is not None and head.shape == embed.shape and torch.equal(head, embed):
        weights = {k: v for k, v in weights.items() if k != "lm_head.weight"}
    return fp.of_tensors(weights.items(), dtype, fingerprint_seed(int(version or 0)))
