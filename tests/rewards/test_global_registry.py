"""The GRPO guide's reward registry API over agentboost's one registry: ``get_global_registry``,
``register``, ``set_agent_strategy``, one-argument rewards over a ``Trajectory`` (and the
two-argument form kept), as ``StrandsEnv`` scores with them; what crosses to another process."""

import pytest
from helpers import answer_episode

from agentboost import Trajectory, get_global_registry
from agentboost.environments.strands_env import StrandsEnv
from agentboost.episodes.record import Status
from agentboost.rewards import registry as reg


def guide_reward(trajectory):
    return (0.5 if trajectory.success else 0.0) + (0.3 if trajectory.steps == 0 else 0.0)


def two_arg_reward(task, episode):
    return 0.25


def test_register_strategy_and_score_both_forms():
    registry = get_global_registry()
    assert registry is get_global_registry()
    registry.register("guide_test_reward", guide_reward)
    registry.register("guide_test_reward", guide_reward)  # the same function again: fine
    with pytest.raises(reg.RewardRegistrationError, match="already registered"):
        registry.register("guide_test_reward", two_arg_reward)
    try:
        registry.set_agent_strategy("guide-test-agent", "guide_test_reward")
        assert registry.get_agent_strategy("guide-test-agent") == reg.default_reward("guide-test-agent")
        with pytest.raises(reg.UnknownRewardError, match="unknown reward 'nope'"):
            registry.set_agent_strategy("guide-test-agent", "nope")
        env = StrandsEnv(reward="guide_test_reward")
        right, wrong = answer_episode("It is 42."), answer_episode("It is 41.")
        env.score({"question": "6*7?", "answer": "42"}, right)
        env.score({"question": "6*7?", "answer": "42"}, wrong)
        # success comes from the trajectory, the rest is the function's own term
        assert (right.reward, right.reward_components, right.succeeded) == (0.8, {"outcome": 1.0, "custom": pytest.approx(-0.2)}, True)
        assert (wrong.reward, wrong.succeeded) == (0.3, False)
        env = StrandsEnv(reward=f"{__name__}:two_arg_reward")  # agentboost's form, unchanged
        ep = answer_episode("x")
        env.score({"question": "q"}, ep)
        assert (ep.reward, ep.reward_components) == (0.25, {"outcome": 0.25})
    finally:
        reg._DEFAULTS.pop("guide-test-agent", None)
        reg._REWARDS.pop("guide_test_reward", None)


def test_trajectory_fields():
    ep = answer_episode("The list sorted: [1, 2, 5, 8]")
    t = Trajectory.of({"question": "Sort [5, 2, 8, 1]", "answer": {"result": 8, "test_passed": True}}, ep)
    assert (t.query, t.success, t.steps, t.status, t.tool_calls) == ("Sort [5, 2, 8, 1]", True, 0, "ok", [])
    assert t.final_answer == "The list sorted: [1, 2, 5, 8]" and t.expected_outcome == {"result": 8, "test_passed": True}
    ep.status = Status.TIMEOUT
    assert not Trajectory.of({"question": "q", "answer": "8"}, ep).success
    assert Trajectory.of({"question": "q"}, answer_episode("anything")).success  # no expected outcome: it ended


def test_what_crosses_to_another_process():
    assert reg.portable_reward("exact_answer") == "exact_answer"  # agentboost's own names stay names
    assert reg.portable_reward("pkg.mod:fn") == "pkg.mod:fn"
    assert reg.portable_reward(guide_reward) == f"{__name__}:guide_reward"
    reg.register_reward("guide_portable", guide_reward)
    try:
        assert reg.portable_reward("guide_portable") == f"{__name__}:guide_reward"  # registered here only
    finally:
        reg._REWARDS.pop("guide_portable", None)
    with pytest.raises(reg.UnknownRewardError, match="must be importable"):
        reg.portable_reward(lambda trajectory: 1.0)
