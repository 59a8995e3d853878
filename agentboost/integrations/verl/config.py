"""veRL's own trainer configuration, composed and validated on any machine (no GPU, no Ray).

``python -m verl.trainer.main_ppo`` composes ``ppo_trainer.yaml`` with the command line's
overrides through Hydra and then runs ``verl.utils.config.validate_config``; both steps are pure
Python, so a launch script's overrides can be checked here before a cluster is booked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def compose_ppo_config(overrides: Iterable[str], config_name: str = "ppo_trainer"):
    """The ``DictConfig`` main_ppo would see for these command-line overrides."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name=config_name, overrides=list(overrides))


def validate_ppo_config(config) -> None:
    """main_ppo's own validation (batch sizes against GPUs, mutually exclusive options, ...);
    raises what veRL raises."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
