"""veRL's registries drive the local trainer's advantages and losses; agentboost's own registries
(rewards, tool-call parsers) refuse a second function under a taken name."""

import numpy as np
import pytest
import torch
from helpers import REPO, model_call

from agentboost.agents.tool_parsers import (
    ToolParserRegistrationError,
    parse_hermes,
    register_tool_parser,
)
from agentboost.episodes.record import Episode
from agentboost.rewards.registry import (
    RewardRegistrationError,
    exact_answer,
    get_reward,
    register_reward,
    registered_rewards,
)
from agentboost.run.algorithm import policy_losses
from agentboost.run.config import ConfigError, load_config
from agentboost.trainer import batch as batching
from agentboost.trainer import loss as losses

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


def episodes(rewards, lengths, groups):
    eps = []
    for i, (r, n, g) in enumerate(zip(rewards, lengths, groups)):
        call = model_call([1], [5] * n, logprob=-1.0)
        eps.append(Episode(episode_id=f"e{i}", task_id=g, group_id=g, calls=[call], reward=r))
    return eps


REWARDS, LENGTHS, GROUPS = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [3, 5, 5, 2, 4, 6], list("aaabbb")


def test_grpo_and_rloo_match_the_group_formulas():
    adv = losses.compute_advantages(episodes(REWARDS, LENGTHS, GROUPS), "grpo").by_episode
    a = np.array(REWARDS[:3])
    assert adv["e0"] == pytest.approx((1 - a.mean()) / (a.std(ddof=1) + 1e-6), rel=1e-5)
    rloo = losses.compute_advantages(episodes(REWARDS, LENGTHS, GROUPS), "rloo").by_episode
    assert rloo["e0"] == pytest.approx(1.0 - (0 + 1) / 2) and rloo["e1"] == pytest.approx(0 - 1.0)


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_plus_plus", "gpg", "opo", "grpo_vectorized",
                                  "rloo_vectorized", "reinforce_plus_plus_baseline"])
def test_each_registered_estimator_runs_and_equals_verl_on_the_same_tensors(name):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos

    res = losses.compute_advantages(episodes(REWARDS, LENGTHS, GROUPS), name)
    # veRL's function called directly on token-level tensors built by hand
    width = max(LENGTHS)
    mask = torch.zeros(6, width)
    rew = torch.zeros(6, width)
    for i, n in enumerate(LENGTHS):
        mask[i, :n] = 1
        rew[i, n - 1] = REWARDS[i]
    fn = core_algos.get_adv_estimator_fn(name)
    kwargs = {"token_level_rewards": rew, "response_mask": mask, "index": np.array(GROUPS, dtype=object),
              "config": AlgoConfig(gamma=1.0, adv_estimator=name)}
    import inspect

    params = inspect.signature(fn).parameters
    adv, _ = fn(**{k: v for k, v in kwargs.items() if k in params})
    for i, n in enumerate(LENGTHS):
        assert res.by_episode[f"e{i}"] == pytest.approx(float(adv[i, :n].mean()), abs=1e-6)
    assert res.groups == 2


def test_opo_weights_episodes_by_their_length():
    # OPO's baseline is the length-weighted mean of the group: real lengths must reach it
    adv = losses.compute_advantages(episodes(REWARDS, LENGTHS, GROUPS), "opo").by_episode
    baseline_a = (3 * 1 + 5 * 0 + 5 * 1) / 13
    assert adv["e0"] == pytest.approx(1 - baseline_a, abs=1e-5)


def test_estimators_that_need_a_critic_are_refused_by_name():
    with pytest.raises(losses.AlgorithmError, match="'gae' needs values"):
        losses.compute_advantages(episodes(REWARDS, LENGTHS, GROUPS), "gae")
    with pytest.raises(ConfigError, match="algorithm.adv_estimator 'remax' needs reward_baselines"):
        load_config(SMOKE, ["algorithm.adv_estimator=remax"])


def test_config_choices_come_from_the_registries_and_typos_name_the_closest():
    from verl.trainer.ppo import core_algos

    with pytest.raises(ConfigError, match="did you mean 'grpo'"):
        load_config(SMOKE, ["algorithm.adv_estimator=grpp"])
    with pytest.raises(ConfigError, match="did you mean 'gspo'"):
        load_config(SMOKE, ["algorithm.policy_loss=gsp"])
    assert set(policy_losses()) == set(core_algos.POLICY_LOSS_REGISTRY)
    assert load_config(SMOKE, ["algorithm.adv_estimator=opo", "algorithm.policy_loss=gspo"]).algorithm.policy_loss == "gspo"
    # a loss that needs a setting the configuration lacks fails before training, with veRL's reason
    with pytest.raises(ConfigError, match="policy loss 'dro' cannot run as configured.*dro_beta"):
        load_config(SMOKE, ["algorithm.policy_loss=dro"])


@pytest.mark.parametrize("name", ["vanilla", "gspo", "gpg", "cispo", "sapo"])
def test_policy_losses_come_from_the_registry_and_give_gradients(name):
    from verl.trainer.ppo import core_algos

    rows = [batching.TrainRow("e0", "g", [5, 6, 7, 8], [0, 1, 1, 0], [0, -1.0, -2.0, 0], advantage=1.5),
            batching.TrainRow("e1", "g", [5, 6, 9], [0, 0, 1], [0, 0, -0.3], advantage=-0.7)]
    batch = batching.pad_batch(rows, pad_id=0, device="cpu")
    log_prob = (batch["old_log_prob"] + 0.05).requires_grad_(True)
    cfg = losses.actor_config(0.2, 0.28, 3.0, "seq-mean-token-mean", name)
    loss, _ = losses.policy_loss(log_prob, batch, cfg)
    expected, _ = core_algos.get_policy_loss_fn(name)(
        old_log_prob=batch["old_log_prob"], log_prob=log_prob.detach(), advantages=batch["advantages"],
        response_mask=batch["response_mask"], loss_agg_mode="seq-mean-token-mean", config=cfg)
    assert float(loss.detach()) == pytest.approx(float(expected))
    loss.backward()
    assert log_prob.grad.abs().sum() > 0
    assert (log_prob.grad * (1 - batch["response_mask"])).abs().sum() == 0  # only sampled tokens


def test_a_second_function_under_a_taken_name_is_an_error():
    with pytest.raises(RewardRegistrationError, match="'exact_answer' is already registered"):
        register_reward("exact_answer", lambda task, ep: 1.0)
    with pytest.raises(RewardRegistrationError, match="'code' is already registered"):
        register_reward("code", lambda task, ep: 1.0)  # a built-in that is not imported yet
    register_reward("exact_answer", exact_answer)  # the same function again is harmless
    with pytest.raises(ToolParserRegistrationError, match="'hermes' is already registered"):
        register_tool_parser("hermes", lambda text: parse_hermes(text))
    # built-ins are found by name without importing their modules into the registry module
    assert {"code", "code_partial", "math", "exact_answer"} <= set(registered_rewards())
    assert get_reward("code_partial").keywords == {"partial_credit": True}
