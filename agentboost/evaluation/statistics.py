"""The statistics ``eval``, validation and A/B reports share: the paired test of two policies on the
same tasks, its unpaired counterpart for two groups of independent outcomes (an A/B test's arms), the
sequential test a live A/B test may peek at after every outcome (``sequential_comparison``), a rate
with its interval, and the one-line difference the console prints.

Paired: the unit of the test is the task: each task's success rate under the model minus its success
rate under the baseline (several samples per task are averaged within the task, so they are not
counted as independent). The 95% confidence interval of the mean difference is the normal
approximation over tasks; the p-value is a paired sign-flip permutation test over the same
per-task differences: under "no difference" each task's difference is as likely to have either
sign. It needs no normality, handles binary outcomes and ties (tasks with difference 0 carry no
information and change nothing), is exact when few tasks differ (all 2^m sign patterns) and
Monte-Carlo otherwise; with one sample per task it is the exact McNemar test.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..episodes.summary import interval_text, mean_ci95
from ..errors import InputError

EXACT_UP_TO = 16  # tasks with a nonzero difference; above this the permutation test samples


class EvalInputError(InputError):
    """An evaluation or comparison that cannot be made as asked."""


@dataclass
class PairedResult:
    tasks: int
    differing_tasks: int
    mean_difference: float  # model minus baseline, success rate averaged over tasks
    ci95: tuple[float, float] | None  # None from one task: no interval (said so in reports, never nan)
    p_value: float
    alpha: float
    significant: bool
    method: str = "paired sign-flip permutation test over tasks"


def paired_comparison(model: dict[str, list[float]], baseline: dict[str, list[float]], alpha: float = 0.05,
                      permutations: int = 20_000, seed: int = 0) -> PairedResult:
    """Per-task outcomes (lists of 0/1, or rewards) of the two policies on the same tasks."""
    if set(model) != set(baseline):
        only_m, only_b = sorted(set(model) - set(baseline)), sorted(set(baseline) - set(model))
        raise EvalInputError(f"the two evaluations cover different tasks (only the model's: {only_m[:5]}, "
                             f"only the baseline's: {only_b[:5]}); compare on the same task file")
    if not model:
        raise EvalInputError("no tasks to compare")
    if not 0 < alpha < 1:
        raise EvalInputError(f"alpha must be in (0, 1), got {alpha}")
    tasks = sorted(model)
    d = np.array([np.mean(model[t]) - np.mean(baseline[t]) for t in tasks], dtype=float)
    n, mean = len(d), float(d.mean())
    half = 1.96 * float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else None
    nonzero = d[np.abs(d) > 1e-12]
    observed = abs(float(nonzero.sum()))
    if len(nonzero) == 0:
        p = 1.0
    elif len(nonzero) <= EXACT_UP_TO:
        sums = [abs(float(np.dot(signs, nonzero))) for signs in itertools.product((1.0, -1.0), repeat=len(nonzero))]
        p = sum(s >= observed - 1e-12 for s in sums) / len(sums)
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((-1.0, 1.0), size=(permutations, len(nonzero)))
        hits = int((np.abs(signs @ nonzero) >= observed - 1e-12).sum())
        p = (hits + 1) / (permutations + 1)
    return PairedResult(tasks=n, differing_tasks=len(nonzero), mean_difference=mean,
                        ci95=(mean - half, mean + half) if half is not None else None,
                        p_value=float(p), alpha=alpha, significant=bool(p < alpha))


@dataclass
class UnpairedResult:
    n_experiment: int
    n_baseline: int
    mean_difference: float  # experiment minus baseline
    ci95: tuple[float, float] | None  # None below two outcomes in an arm
    p_value: float
    alpha: float
    significant: bool
    method: str


def unpaired_comparison(experiment: list[float], baseline: list[float], alpha: float = 0.05,
                        permutations: int = 20_000, seed: int = 0, exact_up_to: int = 20_000) -> UnpairedResult:
    """The unpaired counterpart of ``paired_comparison``, for two groups of independent outcomes
    (0/1 or rewards) such as the sessions of an A/B test's two arms: the difference of the means,
    its 95% CI (normal approximation, each arm's variance: Welch), and a two-sided permutation
    test of the arm labels (under "no difference" the labels are exchangeable; no normality, fine
    for binary outcomes). Above ``exact_up_to`` outcomes in all the test is the normal
    approximation it converges to, so a long-running A/B test stays cheap to report."""
    if not experiment or not baseline:
        raise EvalInputError(f"each arm needs at least one outcome (experiment {len(experiment)}, "
                             f"baseline {len(baseline)})")
    if not 0 < alpha < 1:
        raise EvalInputError(f"alpha must be in (0, 1), got {alpha}")
    # sorted: the Monte-Carlo p-value depends on the outcomes only, never on their order of arrival
    a, b = np.sort(np.asarray(experiment, dtype=float)), np.sort(np.asarray(baseline, dtype=float))
    diff = float(a.mean() - b.mean())
    var = (a.var(ddof=1) / len(a) if len(a) > 1 else 0.0) + (b.var(ddof=1) / len(b) if len(b) > 1 else 0.0)
    half = 1.96 * math.sqrt(var) if len(a) > 1 and len(b) > 1 else None
    pooled = np.concatenate([a, b])
    if np.ptp(pooled) == 0:
        p, method = 1.0, "permutation test of the arm labels (all outcomes equal)"
    elif len(pooled) <= exact_up_to:
        rng = np.random.default_rng(seed)
        hits, done, chunk = 0, 0, max(1, 2_000_000 // len(pooled))
        while done < permutations:
            k = min(chunk, permutations - done)
            perm = rng.permuted(np.broadcast_to(pooled, (k, len(pooled))), axis=1)
            d = perm[:, : len(a)].mean(axis=1) - perm[:, len(a):].mean(axis=1)
            hits += int((np.abs(d) >= abs(diff) - 1e-12).sum())
            done += k
        p, method = (hits + 1) / (permutations + 1), "permutation test of the arm labels"
    else:
        z = abs(diff) / math.sqrt(var) if var > 0 else float("inf")
        p, method = math.erfc(z / math.sqrt(2)), "normal approximation (Welch z-test)"
    return UnpairedResult(n_experiment=len(a), n_baseline=len(b), mean_difference=diff,
                          ci95=(diff - half, diff + half) if half is not None else None, p_value=float(p), alpha=alpha,
                          significant=bool(p < alpha), method=method)


def rate_with_ci(xs: list[float]) -> tuple[float | None, float | None]:
    """(mean, 95% CI half-width) of outcomes: the same interval as ``eval``'s per-policy one; None
    where there are too few outcomes for the figure (never ``nan``)."""
    return (float(np.mean(xs)) if xs else None), mean_ci95(list(map(float, xs)))


def difference_text(model_rate: float, base_rate: float, mean_difference: float, ci95, p_value: float,
                    tasks: int = 0) -> str:
    """One line for a paired comparison, as the run's console gives it (``compare_to_base``, the
    prompt policy's gate): both success rates, the difference with its 95% CI, the p-value."""
    return (f"success {model_rate:.3f} vs {base_rate:.3f}, difference {mean_difference:+.3f} "
            f"({interval_text(ci95, tasks)}), p = {p_value:.4f}")


# -- the sequential test ---------------------------------------------------------------------------
SEQUENTIAL_METHOD = "mSPRT, normal mixture (always-valid p-value)"


@dataclass
class SequentialResult:
    """The state of a sequential A/B test after its last outcome. ``p_value`` is always valid: the
    probability, under "no difference", that the test would EVER have shown a p-value this small,
    however often it was looked at; so a decision may be taken at any look. ``ci`` is the
    always-valid interval of the difference (the intersection of every look's), ``decision``
    "better", "worse" or None, ``decided_at`` the outcome count when it was reached."""

    n_experiment: int
    n_baseline: int
    mean_difference: float | None  # experiment minus baseline
    ci: tuple[float, float] | None
    p_value: float
    alpha: float
    alpha_worse: float
    decision: str | None
    decided_at: int | None
    looks: int
    mixture_sd: float
    min_per_arm: int
    method: str = SEQUENTIAL_METHOD


def msprt_path(experiment: "np.ndarray", values: "np.ndarray", mixture_sd: float, min_per_arm: int):
    """The mixture sequential probability ratio test (mSPRT; Johari, Pekelis and Walsh, "Always valid
    inference", 2017, the test behind Optimizely's Stats Engine) of the difference of two arms'
    means, at every look: after each outcome, in arrival order. ``experiment``: a boolean per
    outcome (its arm), ``values``: the outcomes (0/1 or rewards). Returns ``(p, 1/Lambda, difference,
    V)``, one entry per outcome: the always-valid p-value (the running minimum of 1/Lambda), 1/Lambda
    at that look, the difference of the means (nan before the first look) and its variance.

    Lambda_n = sqrt(V / (V + tau^2)) * exp(tau^2 d^2 / (2 V (V + tau^2))) is the likelihood ratio of
    the observed difference d under a normal mixture N(0, tau^2) of alternatives against "no
    difference"; 1/Lambda is a p-value valid at any stopping time (Ville's inequality). V is the
    larger of the pooled variance's (what "no difference" implies: the same mean, and for 0/1
    outcomes the same variance) and the per-arm (Welch) one: the per-arm estimate alone makes a
    small arm of rare successes look certain (simulated: 30% false positives at alpha 0.05 with a
    10% split and a 10% success rate), the pooled one alone over-trusts an arm of steadier rewards;
    the larger is within alpha in both (``tests/evaluation/test_sequential.py``). No look before
    each arm has ``min_per_arm`` outcomes (a variance from a handful is no variance)."""
    e = np.asarray(experiment, dtype=bool)
    x = np.asarray(values, dtype=float)
    fe = e.astype(float)
    fb = 1.0 - fe
    ne, nb = np.cumsum(fe), np.cumsum(fb)
    se, sb = np.cumsum(fe * x), np.cumsum(fb * x)
    qe, qb = np.cumsum(fe * x * x), np.cumsum(fb * x * x)
    ready = (ne >= max(2, min_per_arm)) & (nb >= max(2, min_per_arm))
    ne_, nb_ = np.maximum(ne, 2.0), np.maximum(nb, 2.0)
    me, mb = se / ne_, sb / nb_
    ve = np.maximum((qe - ne_ * me ** 2) / (ne_ - 1), 0.0)
    vb = np.maximum((qb - nb_ * mb ** 2) / (nb_ - 1), 0.0)
    pooled = ((ne_ - 1) * ve + (nb_ - 1) * vb) / (ne_ + nb_ - 2) * (1 / ne_ + 1 / nb_)
    var = np.maximum(np.maximum(pooled, ve / ne_ + vb / nb_), 1e-12)
    d = np.where(ready, me - mb, np.nan)
    t2 = float(mixture_sd) ** 2
    with np.errstate(over="ignore", invalid="ignore"):
        log_lambda = 0.5 * np.log(var / (var + t2)) + t2 * np.nan_to_num(d) ** 2 / (2 * var * (var + t2))
        instant = np.where(ready, np.minimum(1.0, np.exp(-log_lambda)), 1.0)
    return np.minimum.accumulate(instant) if len(instant) else instant, instant, d, var


def sequential_comparison(experiment: list[bool], values: list[float], alpha: float = 0.05,
                          alpha_worse: float | None = None, mixture_sd: float = 0.1,
                          min_per_arm: int = 10) -> SequentialResult:
    """The sequential test of an A/B test's outcomes, in arrival order (``msprt_path``). The
    decision is taken at the first look whose p-value reaches a threshold: "better" at ``alpha``
    with a positive difference, "worse" at ``alpha_worse`` (default ``alpha``) with a negative one;
    a later look never undoes it. ``mixture_sd`` (tau) is the spread of the differences the test
    is tuned to find, in the outcome's units (0.1: ten points of success rate): smaller finds
    small effects sooner and large ones later. Always-valid interval: every d with
    Lambda_n(d) < 1/alpha at every look."""
    for name, a in (("alpha", alpha), ("alpha_worse", alpha_worse if alpha_worse is not None else alpha)):
        if not 0 < a < 1:
            raise EvalInputError(f"{name} must be in (0, 1), got {a}")
    if not mixture_sd > 0 or not math.isfinite(mixture_sd):
        raise EvalInputError(f"mixture_sd must be a positive number, got {mixture_sd}")
    if len(experiment) != len(values):
        raise EvalInputError(f"{len(experiment)} arms for {len(values)} outcomes")
    worse_at = alpha if alpha_worse is None else alpha_worse
    e = np.asarray(experiment, dtype=bool)
    n_e, n_b = int(e.sum()), int((~e).sum())
    if len(values) == 0:
        return SequentialResult(n_e, n_b, None, None, 1.0, alpha, worse_at, None, None, 0, mixture_sd, min_per_arm)
    p, instant, d, var = msprt_path(e, np.asarray(values, dtype=float), mixture_sd, min_per_arm)
    ready = ~np.isnan(d)
    t2 = mixture_sd ** 2
    decision, decided_at = None, None
    hits = np.nonzero(ready & (((instant <= alpha) & (d > 0)) | ((instant <= worse_at) & (d < 0))))[0]
    if len(hits):
        i = int(hits[0])
        decision, decided_at = ("better" if d[i] > 0 else "worse"), i + 1
    ci = None
    if ready.any():
        # (d - delta)^2 < 2 V (V + tau^2) / tau^2 * log(sqrt((V + tau^2) / V) / alpha), intersected over looks
        v = var[ready]
        half = np.sqrt(2 * v * (v + t2) / t2 * np.log(np.sqrt((v + t2) / v) / alpha))
        lo, hi = float(np.max(d[ready] - half)), float(np.min(d[ready] + half))
        # empty only with probability alpha (the intervals hold the true difference at every look
        # at once): then the last look's interval, which alone is still valid at this look
        ci = (lo, hi) if lo <= hi else (float(d[ready][-1] - half[-1]), float(d[ready][-1] + half[-1]))
    last = float(d[-1]) if ready[-1] else None
    return SequentialResult(n_e, n_b, last, ci, float(p[-1]), alpha, worse_at, decision, decided_at,
                            int(ready.sum()), mixture_sd, min_per_arm)
