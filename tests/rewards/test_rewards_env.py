"""Reward registry, StrandsEnv and shaping."""

import pytest
from helpers import cli, model_call

from agentboost.environments.strands_env import StrandsEnv, TaskFormatError
from agentboost.episodes.record import Episode, ToolCallRecord
from agentboost.rewards.groups import apply_group_policy
from agentboost.rewards.registry import (
    RewardResult,
    UnknownRewardError,
    default_reward,
    get_reward,
    register_reward,
    registered_rewards,
    set_default_reward,
)
from agentboost.rewards.shaping import ShapingConfig, shaping_terms


def episode(final="The answer is 42.", tools=(), calls=1, status="ok"):
    ep = Episode(episode_id="e", task_id="t", group_id="g", status=status, final_answer=final)
    ep.tool_calls = [ToolCallRecord(name=n, ok=ok, outcome=o) for n, ok, o in tools]
    ep.calls = [model_call([1], [2], logprob=0.0)] * calls
    return ep


def test_unknown_reward_lists_registered_names():
    with pytest.raises(UnknownRewardError) as e:
        get_reward("exact_anwser")
    assert "exact_answer" in str(e.value) and "registered:" in str(e.value)
    r = cli("rollout", "--reward", "nope", timeout=120)
    assert r.returncode == 2 and "unknown reward 'nope'" in r.stderr and "exact_answer" in r.stderr


def test_register_lookup_defaults_and_import_paths():
    @register_reward("test_length")
    def length_reward(task, ep):
        return RewardResult(score=len(ep.final_answer or "") / 100, components={"outcome": 0.17})

    assert "test_length" in registered_rewards() and get_reward("test_length") is length_reward
    set_default_reward("test_agent", "test_length")
    assert default_reward("test_agent") == "test_length"
    assert default_reward("calculator") == "exact_answer"
    assert get_reward("agentboost.testing.faults:fault_reward")(
        {"task_id": "t"}, episode()) == 1.0
    with pytest.raises(UnknownRewardError):
        set_default_reward("x", "not_registered")


def test_exact_answer():
    fn = get_reward("exact_answer")
    assert fn({"answer": "42"}, episode("so 17 + 25 = 42.")).score == 1.0
    assert fn({"answer": "42"}, episode("I think 41")).score == 0.0
    assert fn({"answer": "1,000"}, episode("It is 1000")).score == 1.0
    assert fn({"answer": "-3.5"}, episode("x = -3.50")).score == 1.0
    r = fn({"answer": "Paris"}, episode(" Paris "))
    assert r.score == 1.0 and r.metadata["expected"] == "Paris"
    assert fn({"answer": "42"}, episode(None)).score == 0.0


def test_failures_get_their_reward_in_one_place_the_group_policy():
    # the environment scores episodes that ran to an end; failed ones (and those whose reward
    # raised) are left for the group policy, the one place that gives them the failed reward
    env = StrandsEnv(reward="exact_answer", failed_reward=-0.5)
    timed_out = episode(status="timeout")
    env.score({"answer": "42"}, timed_out)
    assert timed_out.reward is None and timed_out.status == "timeout"
    raised = episode()
    env.score({"task_id": "t7"}, raised)  # no answer: the reward raises
    assert raised.status == "error" and "no 'answer' field" in raised.error and raised.reward is None
    fine = episode()
    env.score({"answer": "42"}, fine)
    assert fine.reward == 1.0 and fine.reward_components == {"outcome": 1.0}
    for e in (timed_out, raised, fine):
        e.group_id = "g"
    kept, report = apply_group_policy([timed_out, raised, fine], "keep", failed_reward=env.failed_reward)
    assert kept == [timed_out, raised, fine] and report.failed_episodes == 2
    assert timed_out.reward == raised.reward == -0.5 and raised.reward_components == {"failed": -0.5}
    assert fine.reward == 1.0 and not fine.failed and timed_out.failed
    with pytest.raises(ValueError, match="group policy must be one of"):
        apply_group_policy([fine], "kepp")


def test_first_message_from_field_or_template():
    assert StrandsEnv().first_message({"question": "q?"}) == "q?"
    env = StrandsEnv(prompt_template="Solve: {problem} ({level})")
    assert env.first_message({"problem": "1+1", "level": "easy"}) == "Solve: 1+1 (easy)"
    with pytest.raises(TaskFormatError, match="no field 'level'"):
        env.first_message({"task_id": "t", "problem": "1+1"})
    with pytest.raises(TaskFormatError, match="names no task field"):
        StrandsEnv(prompt_template="constant").validate()


def test_shaping_is_separate_capped_and_off_by_default():
    env = StrandsEnv(reward="exact_answer")
    ep = episode(tools=[("calc", True, None)] * 3)
    env.score({"answer": "42"}, ep)
    assert ep.reward_components == {"outcome": 1.0}
    cfg = ShapingConfig.preset()
    farmed = episode(tools=[("calc", True, "verified")] * 50, calls=40)
    terms = shaping_terms(cfg, farmed)
    assert terms == {"tool_success": pytest.approx(0.3), "verification": pytest.approx(0.1),
                     "step_penalty": pytest.approx(-0.1)}
    env = StrandsEnv(reward="exact_answer", shaping=cfg)
    ep = episode(final="wrong", tools=[("calc", True, None), ("calc", False, None)], calls=2)
    env.score({"answer": "42"}, ep)
    assert ep.reward_components == {"outcome": 0.0, "tool_success": pytest.approx(0.1),
                                    "verification": 0.0, "step_penalty": pytest.approx(-0.02)}
    assert ep.reward == pytest.approx(0.08)
    with pytest.raises(ValueError):
        ShapingConfig(step_penalty=0.1)


def test_exact_answer_compares_integers_exactly():
    # floats called a 19-digit integer off by one equal, and 42.0000000001 equal to 42
    def score(answer, final):
        return get_reward("exact_answer")({"task_id": "t", "answer": answer}, episode(final=final)).score

    assert score("1234567890123456789", "It is 1234567890123456788.") == 0.0
    assert score("42", "It is 42.0000000001.") == 0.0
    assert score("42", "It is 42.0.") == 1.0 and score("1,234", "1234") == 1.0 and score("0.5", "0.50") == 1.0


def nan_reward(task, ep):
    return float("nan")


def huge_reward(task, ep):
    return RewardResult(score=0.5, components={"outcome": 0.5, "bonus": float("inf")})


def declared_reward(task, ep):
    return 7.0


declared_reward.reward_range = (0.0, 1.0)


def test_a_reward_that_is_not_a_finite_number_is_an_episode_error():
    # a NaN averages into every figure it touches: the episode errs with the reason, never scores
    for name, why in ((f"{__name__}:nan_reward", "its score is nan (not a finite number)"),
                      (f"{__name__}:huge_reward", "its component 'bonus' is inf (not a finite number)"),
                      (f"{__name__}:declared_reward", "its score 7 is outside the reward's declared range [0, 1]")):
        ep = episode()
        StrandsEnv(reward=name).score({"task_id": "t", "answer": "42"}, ep)
        assert ep.status == "error" and ep.reward is None, (name, ep.status, ep.reward)
        assert ep.error == f"reward {name!r} gave an invalid reward: {why}", ep.error
    # shaping terms cannot turn a finite outcome into an infinite total either; a good one still scores
    ep = episode()
    StrandsEnv(reward="exact_answer").score({"task_id": "t", "answer": "42"}, ep)
    assert ep.status == "ok" and ep.reward == 1.0


def test_math_equivalence_ends_within_its_limit_in_any_thread(monkeypatch):
    # math-verify on a tower of powers never returns off the main thread, and holds the interpreter
    # lock while it computes: the process's other threads (serve's event loop) stop too. The check
    # runs in a helper process that is stopped at the limit; the answer scores 0 with the reason,
    # and the thread beside it goes on
    import threading
    import time

    from agentboost.rewards import math
    from agentboost.rewards.scoring import answer_episode

    monkeypatch.setattr(math, "MATH_LIMIT_S", 3.0, raising=False)
    results, ticks = {}, []

    def grade(key, boxed):
        results[key] = math.math_reward({"task_id": "t", "answer": "1"}, answer_episode("t", f"\\boxed{{{boxed}}}"))

    def tick():
        while len(results) < 3:
            ticks.append(time.monotonic())
            time.sleep(0.05)

    t0 = time.monotonic()
    threads = [threading.Thread(target=grade, args=(k, b), daemon=True)
               for k, b in (("tower", "9^{9^{9^{9}}}"), ("googolplex", "10^{10^{100}}"), ("right", "1"))]
    clock = threading.Thread(target=tick, daemon=True)
    for t in threads + [clock]:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert results["right"].score == 1.0
    for key in ("tower", "googolplex"):
        r = results[key]
        assert r.score == 0.0 and r.metadata["reason"] == "math equivalence did not finish within 3 s", r.metadata
    assert time.monotonic() - t0 < 45
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert gaps and max(gaps) < 1.0, max(gaps)  # the other thread never stopped for long


def test_a_function_that_is_no_reward_is_refused_by_name():
    # json:loads is callable and takes one argument: it was accepted, and every episode erred at its
    # first scoring, after the model had loaded
    for name, why in (("json:loads", "is a function of Python's standard library (json), not a reward"),
                      ("os.path:join", "is a function of Python's standard library (posixpath), not a reward"),
                      ("agentboost.files:atomic_write_text", None)):
        if why is None:
            get_reward(name)  # two positional arguments: judged when it runs
            continue
        with pytest.raises(UnknownRewardError, match=f"reward '{name}' " + why.replace("(", r"\(").replace(")", r"\)")):
            get_reward(name)


def test_bounded_helpers_die_with_their_caller_and_are_replaced():
    # a helper is killed when the thread that started it ends (so no computation outlives a killed
    # trainer); the next call finds it dead and starts another; a function's own error keeps it
    import threading

    from agentboost.rewards import bounded

    target = "agentboost.rewards.registry:numbers_equal"
    t = threading.Thread(target=lambda: bounded.call(target, ["42", "42.0"], 5.0))
    t.start()
    t.join()
    assert bounded.call(target, ["42", "42.0"], 5.0) is True
    with pytest.raises(bounded.HelperError, match="InvalidOperation"):
        bounded.call(target, ["42", "x"], 5.0)
    assert bounded.call(target, ["42", "43"], 5.0) is False


def test_reports_never_compute_with_a_reward_that_is_no_number():
    # scoring no longer gives one, but an episode file written before may hold NaN or infinity
    from agentboost.episodes.summary import summarize
    from agentboost.evaluation.evaluate import describe

    eps = [Episode(episode_id=str(i), task_id="t", group_id="g", reward=r)
           for i, r in enumerate([float("nan"), 1.0, float("inf"), 0.0])]
    assert summarize(eps)["reward_mean"] == 0.5 and summarize(eps)["rewards"] == [1.0, 0.0]
    assert describe(eps, "policy").mean_reward == 0.5
