"""Modules that moved in 0.2 (one folder per concept, see CHANGELOG.md) stay importable under their old
names until 0.3: importing an old name warns once (``DeprecationWarning``) and gives the module at its
new place, the same module object, so registries and ``isinstance`` checks are shared. Configs that
name a tool module, a reward or an agent loop by an old path keep working the same way.

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
    "agentboost.data.verl_rows": "agentboost.integrations.verl.rows",
    "agentboost.testing.verl_server": "agentboost.integrations.verl.server_client",
    "agentboost.integrations.verl_fork_server": "agentboost.integrations.rllm.fork_server",
    "agentboost.integrations.rllm_patcher": "agentboost.integrations.rllm.patcher",
    "agentboost.integrations.rllm_agents": "agentboost.integrations.rllm.agents",
    "agentboost.integrations.rllm_engine": "agentboost.integrations.rllm.engine",
    "agentboost.integrations.rllm_rows": "agentboost.integrations.rllm.rows",
    "agentboost.integrations.rllm_trainer": "agentboost.integrations.rllm.trainer",
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
