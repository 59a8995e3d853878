"""The statistics ``eval``, validation and A/B reports share: the paired test of two policies on the
same tasks, its unpaired counterpart for two groups of independent outcomes (an A/B test's arms), a
rate with its interval, and the one-line difference the console prints.

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
