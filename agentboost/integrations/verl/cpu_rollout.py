"""A rollout backend for veRL on CPU (``actor_rollout_ref.rollout.name=agentboost_cpu``): a test and
development aid beside the CPU platform (``cpu_platform.py``), for running stock
``python -m verl.trainer.main_ppo`` end to end on a machine without a GPU.

veRL's vLLM replica needs vLLM inside the trainer's environment, and the CPU build of vLLM needs a
``transformers`` that verl 0.9.1 refuses, so on CPU the replica is agentboost's own engine behind
veRL's replica interface, registered through veRL's registries (``RolloutReplicaRegistry`` and the
rollout-class table; nothing of veRL's is edited):

- ``CPURolloutServer``, a Ray actor per replica: the batched HF engine (``sampling/hf_engine.py``)
  over the policy's weights, answering veRL's token-in/token-out ``generate`` with a ``TokenOutput``
  whose ``extra_fields["global_steps"]`` names the weights that sampled it;
- ``CPUServerAdapter``, the rollout object in each actor worker (hybrid mode): veRL hands it the
  trained weights after every update (``update_weights``), and it loads them into the server, so
  the next step samples the new policy (the weight sync the original kit's patches lacked);
- ``CPURolloutReplica``: starts the server and gives veRL its handle.

What veRL does around them (the agent loop workers, the load balancer, FSDP, GRPO) is veRL's own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from ..cpu_backend import CpuRolloutPolicy, sent_fingerprint

logger = logging.getLogger(__name__)


def _server_name(replica_rank: int) -> str:
    return f"agentboost_cpu_rollout_{replica_rank}"


class CPURolloutServer:
    """The policy served on CPU: veRL's server surface over agentboost's served policy
    (``integrations/cpu_backend.py``, shared with the rLLM path)."""

    def __init__(self, model_path: str, max_batch_size: int = 16, seed: int = 0):
        self.policy = CpuRolloutPolicy(model_path, max_batch_size=max_batch_size, seed=seed)
        self.engine = self.policy.engine

    @property
    def global_steps(self) -> int:
        return self.policy.version  # veRL's step whose weights are served (0: the weights it started from)

    async def generate(self, request_id=None, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data=None, video_data=None, **kwargs: Any) -> TokenOutput:
        from ...sampling.protocol import SamplingParams

        if image_data or video_data:
            raise ValueError("the agentboost CPU rollout serves text only")
        sp = sampling_params
        params = SamplingParams(temperature=float(sp.get("temperature", 1.0)), top_p=float(sp.get("top_p", 1.0)),
                                max_new_tokens=int(sp.get("max_tokens") or sp.get("max_new_tokens") or 256),
                                stop_token_ids=tuple(sp.get("stop_token_ids") or ()))
        res = await asyncio.wrap_future(self.engine.submit(list(prompt_ids), params))
        return TokenOutput(token_ids=list(res.response_ids),
                           log_probs=list(res.logprobs) if sp.get("logprobs") else None,
                           stop_reason="completed", extra_fields={"global_steps": self.global_steps,
                                                                  "weight_fingerprint": self.policy.digest})

    def served_dtype(self) -> str:
        return self.policy.dtype

    def load_weights(self, weights: dict[str, torch.Tensor], global_steps: int | None,
                     expected: dict[str, Any] | None = None) -> int:
        """The trained policy's weights, by the Hugging Face names veRL sends (``CpuRolloutPolicy``),
        verified against ``expected``, the sender's fingerprint of them."""
        return self.policy.load_weights(weights, global_steps, label="step", expected=expected)

    def weight_state(self) -> dict[str, Any]:
        state = self.policy.weight_state()
        return {"global_steps": state["version"], "loads": state["loads"], "max_abs_change": state["max_abs_change"],
                "fingerprint": state["fingerprint"]}

    # the control surface veRL calls on every server; on CPU there is no memory to release
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return None

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class CPUServerAdapter(BaseRollout):
    """In each actor worker: passes the trained weights to the replica's server."""

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh)
        self.replica_rank = int(kwargs.get("replica_rank", 0))
        self.sleep_level = 2

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise ValueError(f"the agentboost CPU rollout takes named tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise ValueError("the agentboost CPU rollout syncs full weights; set actor_rollout_ref.model.lora.merge=True "
                             "or train without LoRA")
        if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
            for _ in weights:  # every rank takes part in gathering the full tensors
                pass
            return
        state = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in weights}
        server = ray.get_actor(_server_name(self.replica_rank))
        # what the trainer means the replica to serve, fingerprinted before it leaves (run/verify.py)
        expected = sent_fingerprint(state, kwargs.get("global_steps"), await server.served_dtype.remote())
        await server.load_weights.remote(state, kwargs.get("global_steps"), expected)


class CPURolloutReplica(RolloutReplica):
    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self):
        server_cls = ray.remote(num_cpus=1)(CPURolloutServer)
        server = server_cls.options(name=_server_name(self.replica_rank), max_concurrency=self.max_concurrency).remote(
            getattr(self.model_config, "local_path", None) or self.model_config.path, max_batch_size=max(1, min(32, int(self.config.max_num_seqs or 16))))
        await server.weight_state.remote()  # started (loading the model) before veRL sends requests
        self.servers = [server]
        self._server_handle = server
        self._server_address = _server_name(self.replica_rank)
