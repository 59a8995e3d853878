"""A CPU platform for veRL, through veRL's own plugin registry (``verl.plugin.platform``): a test and
development aid that lets stock ``python -m verl.trainer.main_ppo`` start on a machine without an
accelerator (FSDP over gloo, Ray actors on CPU), never a way to train real models.

Registered only when asked: ``VERL_USE_EXTERNAL_MODULES=agentboost.integrations.verl.cpu_platform``
makes every process that imports veRL (the driver and each Ray worker, which inherit the variable)
import this module, and ``VERL_PLATFORM=cpu`` selects it. Nothing of veRL's is edited.

Ray schedules veRL's workers by its ``GPU`` resource, and veRL checks the cluster's GPU count before
it starts (``ResourcePoolManager``). Ray's resources are logical: the launcher declares as many
"GPUs" as veRL workers on the CPU node (``+ray_kwargs.ray_init.num_gpus=N``), so veRL's placement
groups and bundles work unchanged while every tensor stays on the CPU.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from ..cpu_backend import CPU_DEVICE_MODULE as _DEVICE_MODULE


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """Every device call is a no-op or the CPU's answer; collectives use gloo."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # never auto-detected: only VERL_PLATFORM=cpu chooses it
        return False

    def current_device(self) -> str:
        # veRL moves tensors with ``.to(get_device_id())``: an index would mean cuda:N, the name
        # means the CPU
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "AGENTBOOST_CPU_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "GPU"  # logical: see the module's docstring

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def cudart(self) -> Any:
        return None


def selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def _one_gloo_backend() -> None:
    """veRL initialises its process group with ``"cpu:gloo,<device>:<backend>"``, which for the CPU
    device names ``cpu`` twice, and torch refuses that string. The one change made to veRL at run
    time, and only when this platform is selected: the default backend becomes plain ``gloo``."""
    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_agentboost_cpu", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray._agentboost_cpu = True
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def _fsdp_engines_on_cpu() -> None:
    """veRL registers its FSDP engines per device (cuda, npu); the same classes serve the CPU
    (torch FSDP runs there over gloo). Registered through veRL's own ``EngineRegistry``."""
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, engine in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        for backend in ("fsdp", "fsdp2"):
            if "cpu" not in EngineRegistry._engines.get(model_type, {}).get(backend, {}):
                EngineRegistry.register(model_type=model_type, backend=backend, device="cpu")(engine)


def _cpu_rollout() -> None:
    """``actor_rollout_ref.rollout.name=agentboost_cpu`` (``cpu_rollout.py``), through veRL's rollout
    registries; the module is imported only when veRL asks for it (it imports veRL itself)."""
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    def replica():
        from .cpu_rollout import CPURolloutReplica

        return CPURolloutReplica

    _ROLLOUT_REGISTRY[("agentboost_cpu", "async")] = "agentboost.integrations.verl.cpu_rollout.CPUServerAdapter"
    RolloutReplicaRegistry.register("agentboost_cpu", replica)


if selected():
    _one_gloo_backend()
    _fsdp_engines_on_cpu()
    _cpu_rollout()
