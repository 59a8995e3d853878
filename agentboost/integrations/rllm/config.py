"""rLLM's trainer configuration (its Hydra ``ppo_trainer`` at 1fc3c4b, with the veRL fork's sections)
plus the ``agentboost`` block of the launch script, composed and validated where rLLM is installed,
with no GPU and no Ray: the rLLM counterpart of ``integrations/verl/config.py``, which the rLLM
script's ``DRY_RUN=1`` runs.

Validated as the run itself would before its first step, in this order:

1. Hydra composes the overrides with rLLM's ``ppo_trainer`` (a misspelt key is refused);
2. the fork's own ``RayPPOTrainer._validate_config`` (batch and micro-batch sizes against the GPUs,
   mutually exclusive settings, ...) with the roles rLLM's ``train_agent`` gives it: a reference
   policy when a KL term is on, a critic for GAE;
3. what agentboost's engine needs: ``actor_rollout_ref.rollout.mode=async`` (episodes reach the
   fork's async servers over HTTP) and ``agent.use_stepwise_advantage=False`` (one row per episode);
4. the ``agentboost`` block: the agent's specification (its tools import) and the environment (its
   reward is registered), as ``StrandsRLLMAgent``/``StrandsRLLMEnv`` build them.

``strands_args`` is the one mapping from that block to ``AgentTrainer``'s ``agent_args``/``env_args``
(the example script trains with it).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable
from typing import Any

CODE_SYSTEM_PROMPT = (
    "You are an expert competitive programmer. Write a complete Python solution. Test it with the "
    "test_code tool, fix what fails, then give the final solution in one ```python code block."
)


def compose_rllm_config(overrides: Iterable[str], config_name: str = "ppo_trainer"):
    """The ``DictConfig`` rLLM's trainer would see for these command-line overrides."""
    import importlib.util

    from hydra import compose, initialize_config_dir

    spec = importlib.util.find_spec("rllm.trainer.config")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("rLLM is not installed in this environment (bash setup.sh --rllm; docs/rllm.md)")
    with initialize_config_dir(config_dir=str(list(spec.submodule_search_locations)[0]), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides))


def strands_args(config) -> tuple[dict[str, Any], dict[str, Any]]:
    """``agent_args`` and ``env_args`` for ``AgentTrainer`` from the ``agentboost`` block (the
    example script's keys; its docstring lists them) and the data section."""
    from omegaconf import OmegaConf

    ab = OmegaConf.to_container(config.get("agentboost", {}), resolve=True) or {}
    agent_args = {
        "tools": list(ab.get("tools", ["agentboost.tools.strands_code_tool:test_code"])),
        "system_prompt": ab.get("system_prompt", CODE_SYSTEM_PROMPT),
        "max_model_calls": int(ab.get("max_model_calls", 4)),
        # the whole episode's sampled tokens; the engine also caps it at data.max_response_length
        "max_response_tokens": int(config.data.max_response_length),
        "timeout_s": float(ab.get("timeout_s", 900)),
        "agent_type": ab.get("agent_type", "code"),
    }
    env_args = {"strands_env": {"reward": ab.get("reward", "code"),
                                "failed_reward": float(ab.get("failed_reward", 0.0))}}
    return agent_args, env_args


def validate_rllm_config(config) -> None:
    """Steps 2-4 of the module's docstring on a composed config; raises what the fork raises, or
    ``ValueError`` naming the key."""
    from verl.trainer.ppo.ray_trainer import AdvantageEstimator, RayPPOTrainer

    # the fork's checks read only these three attributes. RayPPOTrainer.__init__ sets them from the
    # roles: a reference policy where one is mapped (rLLM's train_agent maps it when a KL term is
    # on) and the actor has a KL loss; a critic for GAE
    trainer = type("ConfigCheck", (), {})()
    trainer.config = config
    trainer.use_reference_policy = bool(config.actor_rollout_ref.actor.use_kl_loss)
    trainer.use_critic = config.algorithm.adv_estimator == AdvantageEstimator.GAE
    RayPPOTrainer._validate_config(trainer)

    if config.actor_rollout_ref.rollout.mode != "async":
        raise ValueError("actor_rollout_ref.rollout.mode must be async for agentboost's Strands agents "
                         f"(episodes reach the fork's async servers over HTTP); got {config.actor_rollout_ref.rollout.mode!r}")
    if config.agent.use_stepwise_advantage:
        raise ValueError("agent.use_stepwise_advantage must be False for agentboost's Strands agents "
                         "(one token row per episode)")

    from .agents import StrandsRLLMAgent, StrandsRLLMEnv

    agent_args, env_args = strands_args(config)
    StrandsRLLMAgent(**agent_args).spec.validate()
    StrandsRLLMEnv.from_dict(env_args).strands_env.validate()


def main(argv: list[str] | None = None) -> int:
    """``python -m agentboost.integrations.rllm.config OVERRIDE ...``: compose and validate as the
    rLLM script's run would (its ``DRY_RUN=1`` runs this); one line on stderr, exit 1 on any problem."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        # stdout is the script's list of overrides; the fork's validation prints its verdict there
        with contextlib.redirect_stdout(sys.stderr):
            validate_rllm_config(compose_rllm_config(overrides))
    except Exception as e:  # Hydra's, the fork's and agentboost's errors name the key; one line is enough
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"rLLM config: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    print(f"rLLM config: {len(overrides)} overrides compose with rLLM's ppo_trainer and pass its validation "
          "and agentboost's", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
