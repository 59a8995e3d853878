"""The ``algorithm`` section against veRL's registries (``core_algos``): which advantage estimators and
policy losses exist and which of them the local trainer can run, the actor config a loss takes, and a
configured loss run once on a tiny batch. The run's configuration validates with these before anything
starts; the trainer's update (``trainer/loss.py``) computes with the same functions."""

from __future__ import annotations

import inspect

import torch

from ..errors import InputError

# What the local trainer can hand an estimator; one that needs more (a critic's values, a greedy
# baseline, the policy's per-token statistics) is refused by name.
_ESTIMATOR_INPUTS = ("token_level_rewards", "response_mask", "index", "norm_adv_by_std_in_grpo", "config")


class AlgorithmError(InputError):
    pass


def estimator_missing_inputs(fn) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in _ESTIMATOR_INPUTS]


def advantage_estimators() -> dict[str, str | None]:
    """Every estimator veRL registers -> None when the local trainer can run it, else why not."""
    from verl.trainer.ppo import core_algos

    out = {}
    for name in sorted(core_algos.ADV_ESTIMATOR_REGISTRY):
        missing = estimator_missing_inputs(core_algos.get_adv_estimator_fn(name))
        out[name] = f"needs {', '.join(missing)}, which outcome-reward training on one machine does not have" if missing else None
    return out


def policy_losses() -> list[str]:
    from verl.trainer.ppo import core_algos

    return sorted(core_algos.POLICY_LOSS_REGISTRY)


def policy_loss(log_prob: torch.Tensor, batch: dict[str, torch.Tensor], config) -> tuple[torch.Tensor, dict]:
    """veRL's registered loss ``config.policy_loss.loss_mode`` (``vanilla`` is PPO's clipped loss)."""
    from verl.trainer.ppo import core_algos

    fn = core_algos.get_policy_loss_fn(config.policy_loss.loss_mode)
    # the off-policy correction (asynchronous training): veRL's token-level importance weights
    extra = {"rollout_is_weights": batch["rollout_is_weights"]} if "rollout_is_weights" in batch else {}
    return fn(old_log_prob=batch["old_log_prob"], log_prob=log_prob, advantages=batch["advantages"],
              response_mask=batch["response_mask"], loss_agg_mode=config.loss_agg_mode, config=config, **extra)


def actor_config(clip_low: float, clip_high: float, clip_c: float, loss_agg_mode: str,
                 policy_loss: str = "vanilla"):
    from verl.workers.config import ActorConfig
    from verl.workers.config.actor import PolicyLossConfig

    return ActorConfig(strategy="fsdp", clip_ratio=clip_low, clip_ratio_low=clip_low, clip_ratio_high=clip_high,
                       clip_ratio_c=clip_c, loss_agg_mode=loss_agg_mode, ppo_micro_batch_size_per_gpu=1, rollout_n=1,
                       policy_loss=PolicyLossConfig(loss_mode=policy_loss))


def check_policy_loss(config) -> None:
    """Run the configured loss once on a tiny batch, so that a loss that needs settings the
    configuration lacks fails before training starts, with veRL's own message."""
    x = torch.full((1, 2), -1.0)
    try:
        policy_loss(x, {"old_log_prob": x, "advantages": torch.ones(1, 2), "response_mask": torch.ones(1, 2)}, config)
    except Exception as e:  # veRL raises several kinds here; all mean "not usable as configured"
        raise AlgorithmError(f"policy loss {config.policy_loss.loss_mode!r} cannot run as configured: "
                             f"{type(e).__name__}: {e}") from None
