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


def main(argv: list[str] | None = None) -> int:
    """``python -m agentboost.integrations.verl.config OVERRIDE ...``: compose and validate as main_ppo
    would (the scripts' ``DRY_RUN=1`` runs it); one line on stderr, exit 1 on any problem."""
    import sys

    import contextlib

    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        # stdout is the scripts' list of overrides; veRL's validation prints its verdict there
        with contextlib.redirect_stdout(sys.stderr):
            validate_ppo_config(compose_ppo_config(overrides))
    except Exception as e:  # Hydra's and veRL's errors name the override; one line is enough here
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"veRL config: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    print(f"veRL config: {len(overrides)} overrides compose with ppo_trainer and pass main_ppo's validation",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
