"""The live A/B test's sequential test (mSPRT, ``evaluation/statistics.py``): its p-value stays valid
however often it is looked at. Type-I error by simulation under "no difference" with a look after
every outcome, in the cases that break a naive plug-in (a small arm, rare successes, arms of unequal
spread); power and direction on a real difference; the always-valid interval holds the truth; and
the naive alternative (the fixed-sample test repeated after every outcome) fails the same
simulation, which is why the loop does not use it."""

import numpy as np
import pytest

from agentboost.evaluation.statistics import (
    EvalInputError,
    msprt_path,
    sequential_comparison,
    unpaired_comparison,
)

REPS, N, ALPHA = 1000, 500, 0.05
SE3 = 3 * (ALPHA * (1 - ALPHA) / REPS) ** 0.5  # three Monte-Carlo standard errors


def false_positive_rate(draw, split, rng, mixture_sd=0.1, min_per_arm=10):
    hits = 0
    for _ in range(REPS):
        arms = rng.random(N) < split
        p, _, _, _ = msprt_path(arms, draw(arms, rng), mixture_sd, min_per_arm)
        hits += p[-1] <= ALPHA  # the running minimum: a rejection at ANY of the N looks
    return hits / REPS


@pytest.mark.parametrize("rate,split", [(0.5, 0.5), (0.1, 0.1), (0.9, 0.1), (0.1, 0.5), (0.5, 0.2)])
def test_type_one_error_under_continuous_peeking(rate, split):
    rng = np.random.default_rng(1000 + int(rate * 100) + int(split * 10))
    fp = false_positive_rate(lambda arms, r: (r.random(len(arms)) < rate).astype(float), split, rng)
    assert fp <= ALPHA + SE3, fp


def test_type_one_error_with_arms_of_unequal_spread():
    """The same mean, one arm 0/1 and the other nearly constant: pooled variance alone rejects 89%
    of the time at a 10% split (measured while choosing the variance), the larger of the two stays
    within alpha."""
    rng = np.random.default_rng(7)

    def draw(arms, r):
        return np.where(arms, r.random(len(arms)) < 0.5, 0.5 + 0.05 * r.standard_normal(len(arms))).astype(float)

    assert false_positive_rate(draw, 0.1, rng) <= ALPHA + SE3


def test_peeking_with_the_fixed_sample_test_is_what_goes_wrong():
    """The same stream, checked with the unpaired test's normal approximation after every 10
    outcomes: far above alpha (why a live test needs a sequential one)."""
    rng = np.random.default_rng(3)
    naive = 0
    for _ in range(200):
        arms = rng.random(N) < 0.5
        x = (rng.random(N) < 0.5).astype(float)
        for n in range(20, N + 1, 10):
            e, b = x[:n][arms[:n]], x[:n][~arms[:n]]
            if len(e) > 1 and len(b) > 1 and unpaired_comparison(list(e), list(b), exact_up_to=0).p_value <= ALPHA:
                naive += 1
                break
    assert naive / 200 > 3 * ALPHA, naive


def test_power_direction_and_interval():
    rng = np.random.default_rng(11)
    decided, worse, covered = [], 0, 0
    for _ in range(100):
        arms = rng.random(400) < 0.5
        x = (rng.random(400) < np.where(arms, 0.9, 0.4)).astype(float)
        r = sequential_comparison(list(arms), list(x), alpha=0.01)
        assert r.decision == "better" and r.p_value <= 0.01, r
        decided.append(r.decided_at)
        covered += r.ci[0] <= 0.5 <= r.ci[1]
        # the mirror image: the candidate worse, at the rollback's own level
        w = sequential_comparison(list(arms), list(1.0 - x), alpha=0.01, alpha_worse=0.05)
        worse += w.decision == "worse" and w.decided_at <= r.decided_at
    assert np.median(decided) < 120  # a 50-point gain: decided within about a hundred sessions
    assert worse == 100
    assert covered >= 95  # the 99% always-valid interval holds the true difference (0.5)


def test_no_look_before_each_arm_has_its_minimum_and_bad_input():
    r = sequential_comparison([True] * 9 + [False] * 50, [1.0] * 9 + [0.0] * 50, min_per_arm=10)
    assert r.looks == 0 and r.p_value == 1.0 and r.decision is None and r.mean_difference is None
    r = sequential_comparison([True, False] * 30, [1.0, 0.0] * 30, min_per_arm=10, alpha=0.01)
    assert r.decision == "better" and r.decided_at >= 20 and r.n_experiment == r.n_baseline == 30
    assert sequential_comparison([], []).p_value == 1.0
    with pytest.raises(EvalInputError, match="alpha must be in"):
        sequential_comparison([True], [1.0], alpha=1.5)
    with pytest.raises(EvalInputError, match="mixture_sd"):
        sequential_comparison([True], [1.0], mixture_sd=0)
    with pytest.raises(EvalInputError, match="1 arms for 2 outcomes"):
        sequential_comparison([True], [1.0, 0.0])
