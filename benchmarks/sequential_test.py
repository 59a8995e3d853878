"""The live A/B test's sequential test (the mSPRT of ``evaluation/statistics.py``) by simulation:
its type-I error with a look after every outcome, against the fixed-sample test peeked at the same
way, and its power: how many sessions a difference of each size takes to be decided.

    .venv/bin/python benchmarks/sequential_test.py [--reps 4000] [--sessions 2000] [--alpha 0.01]

Outcomes are 0/1 (a session's success), each session on the experiment with probability
``--split``. Type-I error: both arms share one success rate (0.1, 0.5, 0.9); the fraction of
simulated tests that ever reach p <= alpha within ``--sessions`` outcomes. The fixed-sample test
(the normal approximation of ``unpaired_comparison``, what ``ab report`` prints) is read after
every 10 outcomes on the same streams. Power: a baseline rate of 0.4 and an experiment higher by
0.05 to 0.5; the share of tests decided "better" and the median outcomes to the decision.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from agentboost.evaluation.statistics import msprt_path, sequential_comparison


def naive_rejects(arms: np.ndarray, x: np.ndarray, alpha: float, every: int = 10, start: int = 20) -> bool:
    e, b = arms.astype(float), 1 - arms.astype(float)
    ne, nb = np.cumsum(e), np.cumsum(b)
    me, mb = np.cumsum(e * x) / np.maximum(ne, 1), np.cumsum(b * x) / np.maximum(nb, 1)
    for n in range(start, len(x) + 1, every):
        i = n - 1
        if ne[i] < 2 or nb[i] < 2:
            continue
        var = me[i] * (1 - me[i]) / ne[i] + mb[i] * (1 - mb[i]) / nb[i]
        if var <= 0:
            continue
        z = abs(me[i] - mb[i]) / math.sqrt(var)
        if math.erfc(z / math.sqrt(2)) <= alpha:
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--split", type=float, default=0.5)
    ap.add_argument("--mixture-sd", type=float, default=0.1)
    ap.add_argument("--min-outcomes", type=int, default=10)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    se = 3 * math.sqrt(args.alpha * (1 - args.alpha) / args.reps)
    print(f"type-I error at alpha {args.alpha:g}, a look after every outcome, {args.sessions} outcomes, split "
          f"{args.split:g}, {args.reps} simulated tests (3 Monte-Carlo SE: {se:.4f}):")
    print(f"{'rate':>6} {'mSPRT':>8} {'fixed test, peeked every 10':>28}")
    for rate in (0.1, 0.5, 0.9):
        seq = naive = 0
        for r in range(args.reps):
            arms = rng.random(args.sessions) < args.split
            x = (rng.random(args.sessions) < rate).astype(float)
            p, _, _, _ = msprt_path(arms, x, args.mixture_sd, args.min_outcomes)
            seq += p[-1] <= args.alpha
            if r < args.reps // 10:  # the naive test is slow in Python: a tenth of the streams
                naive += naive_rejects(arms, x, args.alpha)
        print(f"{rate:>6.1f} {seq / args.reps:>8.4f} {naive / (args.reps // 10):>28.4f}")
    print(f"\npower at alpha {args.alpha:g} (baseline 0.4), {args.reps // 4} simulated tests each:")
    print(f"{'gain':>6} {'decided better':>15} {'median outcomes':>16} {'p90 outcomes':>13}")
    for gain in (0.05, 0.1, 0.2, 0.3, 0.5):
        decided, at = 0, []
        for _ in range(args.reps // 4):
            arms = rng.random(args.sessions) < args.split
            x = (rng.random(args.sessions) < np.where(arms, 0.4 + gain, 0.4)).astype(float)
            res = sequential_comparison(list(arms), list(x), alpha=args.alpha, mixture_sd=args.mixture_sd,
                                        min_per_arm=args.min_outcomes)
            if res.decision == "better":
                decided += 1
                at.append(res.decided_at)
        med = f"{np.median(at):.0f}" if at else "-"
        p90 = f"{np.quantile(at, 0.9):.0f}" if at else "-"
        print(f"{gain:>+6.2f} {decided / (args.reps // 4):>15.3f} {med:>16} {p90:>13}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
