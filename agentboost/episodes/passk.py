"""pass@k and pass^k for one task: the one implementation the trainer's validation and the tau2
metrics both use.

Both are exact (unbiased) estimators over ``n`` recorded trials of which ``c`` succeeded, drawing
``k`` of the ``n`` without replacement:

- pass@k, the chance that at least one of the k succeeds: ``1 - C(n - c, k) / C(n, k)``
  (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", the HumanEval paper);
- pass^k, the chance that all k succeed: ``C(c, k) / C(n, k)`` (tau-bench's and tau2's pass^k).

The edge rule, the same for both: ``1 <= k <= n`` and ``0 <= c <= n`` are required, anything else
raises ``ValueError`` (k trials cannot be drawn from fewer than k, so the estimate is undefined
there; a task with no trials has no estimate). Within the rule the values need no special case:
``n - c < k`` gives pass@k 1.0 (every draw of k holds a success) and ``c < k`` gives pass^k 0.0.
"""

from __future__ import annotations

import math

__all__ = ["pass_at_k", "pass_hat_k"]


def _check(n: int, c: int, k: int, name: str) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"{name} needs 1 <= k <= n (k trials drawn from the n recorded); got n={n}, k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"{name} needs 0 <= successes <= n; got n={n}, successes={c}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of the ``n`` trials (``c`` of them successes), drawn
    without replacement, succeeds: ``1 - C(n - c, k) / C(n, k)``. Raises ``ValueError`` unless
    ``1 <= k <= n`` and ``0 <= c <= n``."""
    _check(n, c, k, f"pass@{k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau2's pass^k: the chance that ``k`` of the ``n`` trials (``c`` of them successes), drawn
    without replacement, all succeed: ``C(c, k) / C(n, k)``. Raises ``ValueError`` unless
    ``1 <= k <= n`` and ``0 <= c <= n``."""
    _check(n, c, k, f"pass^{k}")
    return math.comb(c, k) / math.comb(n, k)
