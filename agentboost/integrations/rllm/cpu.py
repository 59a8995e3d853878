"""rLLM's trainer on CPU (rLLM 1fc3c4b with agentica's veRL fork): a test and development aid, the
rLLM counterpart of ``integrations/verl/cpu_platform.py``, for running ``AgentTrainer`` end to end
on a machine without a GPU; never a way to train real models.

The fork (veRL 0.3.1.dev) has no platform plugin registry, so its few CUDA-only calls are adjusted
at run time, in every process of the run, and only when asked: the launcher starts Ray with
``init_ray()``, whose ``worker_process_setup_hook`` runs ``install()`` in each Ray worker before it
imports the fork's workers. Nothing of the fork's or rLLM's files is edited. ``install()``:

- makes the fork's device module (``verl.utils.device.get_torch_device``, already ``cpu`` by its
  own detection) answer CUDA's memory queries (``cpu_backend.CPU_DEVICE_MODULE``);
- initialises every process group with gloo (the fork names ``nccl``/``hccl``), and lets FSDP
  broadcast CPU tensors over it (``sync_module_states``: torch refuses them for NCCL's sake);
- adds the rollout ``actor_rollout_ref.rollout.name=agentboost_cpu``: in each actor worker a
  ``CPUWorkerRollout`` that hands the FSDP module's full weights over on request (the fork's vLLM
  sharding manager's job), and as the fork's async server a ``CPUCompletionsServer`` Ray actor:
  agentboost's completions server (token ids in, token ids and log-probs out, as the fork's patched
  vLLM server answers) over ``cpu_backend.CpuRolloutPolicy``. Its ``wake_up()`` (which rLLM's engine, with
  agentboost's override, calls before every rollout phase) pulls the actor's current weights and
  serves them, verified against the actor's fingerprint of what it sent (``run/verify.py``); every
  response carries ``weight_version``: the number of optimizer updates the served weights have had
  (the actor's LR-scheduler count), which each episode records per call, and ``weight_fingerprint``.

Ray's ``GPU`` resources are logical: ``init_ray(num_gpus=N)`` declares as many as the fork's
workers need (``trainer.n_gpus_per_node``), so its placement groups work unchanged on the CPU.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

NAME = "agentboost_cpu"
_WEIGHTS = "agentboost_weights"  # the method name the server sends through the fork's execute_method
_HOOK = "agentboost.integrations.rllm.cpu.install"


def transformers4_model_dir(model_dir: str | Path, out: str | Path, tokenizer_class: str = "GPT2TokenizerFast") -> Path:
    """The embedded model's cache is written by agentboost's own environment's transformers (5.x);
    the 4.x that rLLM@1fc3c4b needs cannot name its tokenizer class. The same files (linked), with
    the class named as 4.x knows it; the directory itself where nothing needs changing."""
    import transformers

    model_dir, out = Path(model_dir), Path(out)
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    if int(transformers.__version__.split(".")[0]) >= 5 or cfg.get("tokenizer_class") != "TokenizersBackend":
        return model_dir
    out = out / model_dir.name
    out.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.name != "tokenizer_config.json" and not (out / f.name).exists():
            (out / f.name).symlink_to(f)
    cfg["tokenizer_class"] = tokenizer_class
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return out


def init_ray(num_gpus: int, env_vars: dict[str, str] | None = None) -> None:
    """Ray for a CPU run: a local cluster of its own with ``num_gpus`` logical GPUs and ``install()``
    in every worker process. ``address="local"``: ``ray.init()`` would otherwise join the last
    cluster started on this machine (``/tmp/ray/ray_current_cluster``), such as another run's, whose
    GPUs are taken ("Total available GPUs 0 is less than total desired GPUs 1"). No dashboard: a CPU
    run has no use for its processes, which take a core's time at start."""
    import ray

    install()  # the driver too (the Ray actors run everything heavy, but it imports the fork)
    env = {"TOKENIZERS_PARALLELISM": "true", **(env_vars or {})}
    ray.init(address="local", num_gpus=int(num_gpus), include_dashboard=False,
             runtime_env={"env_vars": env, "worker_process_setup_hook": _HOOK})


def install() -> None:
    """The fork's CPU adjustments in this process (idempotent); see the module's docstring."""
    import torch.distributed as dist
    import verl.utils.device as device

    from ..cpu_backend import CPU_DEVICE_MODULE

    if getattr(device, "_agentboost_cpu", False):
        return
    if device.is_cuda_available:
        raise RuntimeError("agentboost's CPU adjustments for rLLM's veRL fork were asked for on a machine with CUDA; "
                           "run the GPU recipe in docs/rllm.md instead")
    # the fork's modules import it by name: rebound in those already loaded, and set before the rest
    original = device.get_torch_device

    def get_torch_device():
        return CPU_DEVICE_MODULE

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("verl.") and getattr(module, "get_torch_device", None) is original:
            module.get_torch_device = get_torch_device
    device._agentboost_cpu = True

    init_process_group = dist.init_process_group

    def gloo_process_group(backend=None, *args, **kwargs):
        return init_process_group("gloo", *args, **kwargs)

    dist.init_process_group = gloo_process_group

    from verl.workers import fsdp_workers
    from verl.workers.rollout import async_server

    # FSDP(..., sync_module_states=True) refuses CPU tensors because NCCL cannot broadcast them;
    # the process group here is gloo, which can: the check goes, the broadcast stays
    from torch.distributed.fsdp import _init_utils

    _init_utils._check_module_states_for_sync_module_states = lambda module_states: None

    build_rollout = fsdp_workers.ActorRolloutRefWorker._build_rollout

    def _build_rollout(self, trust_remote_code=False):
        if self.config.rollout.name != NAME:
            return build_rollout(self, trust_remote_code)
        from verl.workers.sharding_manager.base import BaseShardingManager

        # the actor's weights travel at wake-up (CPUCompletionsServer.wake_up), not through a
        # sharding manager around generate_sequences, which the async mode never calls
        return CPUWorkerRollout(self), BaseShardingManager()

    fsdp_workers.ActorRolloutRefWorker._build_rollout = _build_rollout

    server_class = async_server.async_server_class

    def async_server_class(rollout_backend: str):
        if rollout_backend != NAME:
            return server_class(rollout_backend)
        import ray

        return ray.remote(num_cpus=1)(CPUCompletionsServer)

    async_server.async_server_class = async_server_class


class CPUWorkerRollout:
    """The rollout object of each actor worker: the fork's ``AsyncActorRolloutRefWorker`` routes the
    server's ``execute_method`` calls here (as it routes vLLM's to its vLLM worker)."""

    def __init__(self, worker: Any):
        self.worker = worker

    def execute_method(self, method: str | bytes, *args: Any, **kwargs: Any) -> Any:
        if method != _WEIGHTS:
            raise NotImplementedError(f"the agentboost_cpu rollout answers {_WEIGHTS!r} only, not {method!r}")
        return self.weights(*args, **kwargs)

    def weights(self, dtype: str = "float32") -> dict[str, Any] | None:
        """The actor's full weights (on rank 0; every rank takes part in gathering them), how many
        optimizer updates they have had, and their fingerprint as a server of ``dtype`` will hold
        them (``run/verify.py``: taken here, on the trainer's side, before they travel)."""
        import torch.distributed as dist
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        module = self.worker.actor_module_fsdp
        if not isinstance(module, FSDP):
            raise TypeError("the agentboost_cpu rollout reads FSDP (strategy=fsdp) actors; "
                            f"got {type(module).__name__}")
        with FSDP.state_dict_type(module, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            state = module.state_dict()
        if dist.is_initialized() and dist.get_rank() != 0:
            return None
        scheduler = getattr(self.worker, "actor_lr_scheduler", None)
        # LambdaLR counts from 0 and steps once per update_actor: the updates these weights have had
        updates = int(scheduler.last_epoch) if scheduler is not None else None
        from ..cpu_backend import sent_fingerprint

        weights = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
        return {"weights": weights, "updates": updates, "fingerprint": sent_fingerprint(weights, updates, dtype)}


class CPUCompletionsServer:
    """The fork's async server interface (``AsyncServerBase``: constructed by
    ``AsyncLLMServerManager`` with ``(config, dp_size, dp_rank, wg_prefix)``, then
    ``get_server_address``, ``init_engine``, ``wake_up``, ``sleep``) over agentboost's completions
    server; a Ray actor, one per rollout data-parallel rank."""

    def __init__(self, config: Any, vllm_dp_size: int, vllm_dp_rank: int, wg_prefix: str):
        import ray
        from verl.utils.fs import copy_to_local

        from ...sampling.completions_server import CompletionsServer
        from ..cpu_backend import CpuRolloutPolicy
        from .engine import served_model_name

        self.config = config
        self.dp_size, self.dp_rank, self.wg_prefix = int(vllm_dp_size), int(vllm_dp_rank), wg_prefix
        model_path = str(config.model.path)
        self.policy = CpuRolloutPolicy(copy_to_local(model_path), max_batch_size=16)
        self.server = CompletionsServer(self.policy.engine, model_name=served_model_name(model_path))
        url = self.server.start_in_thread(host="0.0.0.0", port=0)
        self.address = f"{ray.util.get_node_ip_address()}:{url.rsplit(':', 1)[1]}"
        self.workers: list[Any] = []
        self.awake = False

    async def get_server_address(self) -> str:
        return self.address

    async def init_engine(self) -> None:
        """The actor workers of this rank's group, found as the fork's vLLM executor finds them."""
        import ray

        tp = int(self.config.rollout.tensor_model_parallel_size)
        names = [n for n in ray.util.list_named_actors()
                 if n.startswith((f"{self.wg_prefix}WorkerDict", f"{self.wg_prefix}ActorRolloutRefWorker"))]
        if len(names) != self.dp_size * tp:
            raise RuntimeError(f"found {len(names)} actor workers named {self.wg_prefix}*, "
                               f"expected {self.dp_size} x {tp}")

        def order(name: str) -> tuple[int, int]:
            group, local_rank = name.split(":")
            return int(group.split("_")[-1]), int(local_rank)

        names = sorted(names, key=order)[self.dp_rank * tp:(self.dp_rank + 1) * tp]
        self.workers = [ray.get_actor(n) for n in names]

    async def wake_up(self) -> None:
        """The actor's current weights into the served policy (every worker takes part)."""
        if not self.workers:
            raise RuntimeError("wake_up before init_engine: the server knows no actor workers")
        outs = await asyncio.gather(*[w.execute_method.remote(_WEIGHTS, self.policy.dtype) for w in self.workers])
        state = next(o for o in outs if o is not None)
        await asyncio.to_thread(self.policy.load_weights, state["weights"], state["updates"], "update",
                                state["fingerprint"])
        self.server.weight_version = self.policy.version
        self.server.weight_fingerprint = self.policy.digest
        self.awake = True

    async def sleep(self) -> None:
        self.awake = False  # on CPU there is no memory to give back to the trainer

    async def weight_state(self) -> dict[str, Any]:
        return {**self.policy.weight_state(), "awake": self.awake, "pid": os.getpid()}
