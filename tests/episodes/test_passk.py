"""pass@k and pass^k: the one implementation (``agentboost.episodes.passk``), its edge rule, known
values, and the callers that use it (the trainer's validation, the tau2 metrics)."""

import itertools
import math

import pytest

from agentboost.episodes.passk import pass_at_k, pass_hat_k


def _enumerated(n: int, c: int, k: int) -> tuple[float, float]:
    """pass@k and pass^k by definition: every way of drawing k of the n trials."""
    trials = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(trials, k))
    return sum(any(d) for d in draws) / len(draws), sum(all(d) for d in draws) / len(draws)


@pytest.mark.parametrize("n", range(1, 8))
def test_both_match_drawing_every_k_of_n(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            at, hat = _enumerated(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(at) and pass_hat_k(n, c, k) == pytest.approx(hat)


def test_known_values():
    # pass@1 is the success rate; pass@k over n = k trials is "any success"; pass^n "all succeed"
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 1) == 1.0 and pass_at_k(4, 1, 1) == 0.25
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6) and pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(10, 3, 3) == pytest.approx(1 - math.comb(7, 3) / math.comb(10, 3))  # 0.7083...
    # n - c < k: every draw of k holds a success, no special case needed
    assert pass_at_k(5, 3, 3) == 1.0
    assert pass_hat_k(4, 2, 1) == 0.5 and pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(5, 0, 2) == 0.0 and pass_hat_k(4, 1, 2) == 0.0
    # the HumanEval paper's numerically stable product form agrees
    n, c, k = 200, 13, 10
    stable = 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(stable)


@pytest.mark.parametrize("fn", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize("n, c, k", [(2, 0, 4),  # k > n: k trials cannot be drawn from fewer
                                     (3, 3, 4),
                                     (0, 0, 1),  # a task without trials has no estimate
                                     (4, 1, 0),  # k < 1
                                     (4, 5, 2),  # more successes than trials
                                     (4, -1, 2)])
def test_the_edge_rule_raises_outside_1_le_k_le_n_and_0_le_c_le_n(fn, n, c, k):
    with pytest.raises(ValueError, match="needs"):
        fn(n, c, k)


def test_the_callers_use_the_one_implementation():
    from agentboost.environments.tau2 import metrics as tau2_metrics
    from agentboost.run import metrics  # both trainers' validation figures

    assert metrics.pass_at_k is pass_at_k
    assert tau2_metrics.pass_at_k is pass_at_k and tau2_metrics.pass_hat_k is pass_hat_k


def test_tau2s_own_pass_hat_k_agrees():
    agent_metrics = pytest.importorskip("tau2.metrics.agent_metrics")
    for n in range(1, 6):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_hat_k(n, c, k) == pytest.approx(agent_metrics.pass_hat_k(n, c, k))
