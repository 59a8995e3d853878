"""Modules that moved in 0.2 (one folder per concept; the run, evaluation and rollout in folders of their
own; names that say what they are; see CHANGELOG.md) stay importable under their old names until 0.3:
importing an old name warns once (``DeprecationWarning``) and gives the module at its new place, the
same module object, so registries and ``isinstance`` checks are shared. Configs that name a tool
module, a reward or an agent loop by an old path keep working the same way.

The finder is installed by ``agentboost/__init__.py``, so it is active as soon as any
``agentboost`` module is imported."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED: dict[str, str] = {
    "agentboost.environments.rewards": "agentboost.rewards.registry",
    "agentboost.environments.code_reward": "agentboost.rewards.code",
    "agentboost.environments.math_reward": "agentboost.rewards.math",
    "agentboost.environments.shaping": "agentboost.rewards.shaping",
    "agentboost.environments.groups": "agentboost.rewards.groups",
    "agentboost.environments.scoring": "agentboost.rewards.scoring",
    "agentboost.environments.code_tasks": "agentboost.rewards.code_tasks",
    "agentboost.environments.tau2_domain": "agentboost.environments.tau2.domain",
    "agentboost.environments.tau2_eval": "agentboost.environments.tau2.evaluator",
    "agentboost.environments.tau2_conversation": "agentboost.environments.tau2.conversation",
    "agentboost.environments.tau2_users": "agentboost.environments.tau2.users",
    "agentboost.environments.tau2_metrics": "agentboost.environments.tau2.metrics",
    "agentboost.tools.tau2_airline": "agentboost.environments.tau2.tools.airline",
    "agentboost.tools.tau2_retail": "agentboost.environments.tau2.tools.retail",
    "agentboost.tools.tau2_telecom": "agentboost.environments.tau2.tools.telecom",
    "agentboost.data.tau2_tasks": "agentboost.environments.tau2.tasks",
    "agentboost.integrations.verl_agent_loop": "agentboost.integrations.verl.agent_loop",
    "agentboost.integrations.verl_sampler": "agentboost.integrations.verl.sampler",
    "agentboost.integrations.verl_config": "agentboost.integrations.verl.config",
    "agentboost.data.verl_rows": "agentboost.integrations.verl.dataset",
    "agentboost.testing.verl_server": "agentboost.integrations.verl.server_client",
    "agentboost.integrations.verl_fork_server": "agentboost.integrations.rllm.fork_server",
    "agentboost.integrations.rllm_patcher": "agentboost.integrations.rllm.patcher",
    "agentboost.integrations.rllm_agents": "agentboost.integrations.rllm.agents",
    "agentboost.integrations.rllm_engine": "agentboost.integrations.rllm.engine",
    "agentboost.integrations.rllm_rows": "agentboost.integrations.rllm.episode_rows",
    "agentboost.integrations.rllm_trainer": "agentboost.integrations.rllm.trainer",
    # the run (config, preflight, run directory, checkpoints, metrics, health, the prompt-policy artifact,
    # the assembly) in run/, evaluation in evaluation/, the trainer keeps its loops; episodes run in
    # rollout/ (above the gateway, which the agents no longer import); names that say what they are
    "agentboost.trainer.config": "agentboost.run.config",
    "agentboost.trainer.config_reference": "agentboost.run.config_reference",
    "agentboost.trainer.preflight": "agentboost.run.preflight",
    "agentboost.trainer.run_dir": "agentboost.run.directory",
    "agentboost.trainer.checkpoint": "agentboost.run.checkpoint",
    "agentboost.trainer.metrics": "agentboost.run.metrics",
    "agentboost.trainer.prometheus": "agentboost.run.prometheus",
    "agentboost.trainer.health": "agentboost.run.health",
    "agentboost.trainer.prompt_policy": "agentboost.run.prompt_policy",
    "agentboost.trainer.agent_setup": "agentboost.run.assembly",
    "agentboost.trainer.policy_engine": "agentboost.run.assembly",
    "agentboost.run.policy_engine": "agentboost.run.assembly",
    "agentboost.trainer.evaluation": "agentboost.evaluation.evaluate",
    "agentboost.trainer.eval_progress": "agentboost.evaluation.progress",
    "agentboost.trainer.prompt_training": "agentboost.trainer.prompt.loop",
    "agentboost.agents.episode_runner": "agentboost.rollout.episode_runner",
    "agentboost.agents.strands_process_pool": "agentboost.rollout.pool",
    "agentboost.agents.strands_worker": "agentboost.rollout.worker",
    "agentboost.agents.sampler_factory": "agentboost.rollout.sampler_factory",
    "agentboost.sampling.local_engine": "agentboost.sampling.hf_engine",
    "agentboost.protocols": "agentboost.extensions",
    "agentboost.integrations.cpu_aids": "agentboost.integrations.cpu_backend",
    "agentboost.integrations.rows": "agentboost.integrations.episode_rows",
    "agentboost.integrations.verl.rows": "agentboost.integrations.verl.dataset",
    "agentboost.integrations.rllm.rows": "agentboost.integrations.rllm.episode_rows",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new place (the module object itself, not a copy)."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new
        self._spec = None

    def create_module(self, spec):
        warnings.warn(f"{self.old} moved to {self.new}; the old name goes in agentboost 0.3",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__  # importlib sets the alias spec on the module; put the real one back
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname, new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


def renamed(module: str, names: dict[str, str]):
    """A module's ``__getattr__`` for names that changed in 0.2 (``names``: old -> new): the old name
    gives the object under its new name, with a ``DeprecationWarning`` once, until 0.3."""
    warned: set[str] = set()

    def __getattr__(name: str):
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if name not in warned:
            warned.add(name)
            warnings.warn(f"{module}.{name} is now {new}; the old name goes in agentboost 0.3",
                          DeprecationWarning, stacklevel=2)
        return getattr(sys.modules[module], new)

    return __getattr__
