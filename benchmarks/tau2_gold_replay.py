"""tau2's gold actions replayed for every task of every domain's base split, through the Strands
tools an agent gets and through tau2's own environment (``agentboost.environments.tau2.gold``):
every database hash must agree. The tests replay a sample of each domain (``gold_sample``: every
tool the gold actions use, and the longest gold runs); this is the full replay, and it prints the
sample's time against the full one's, measured in the same run.

    .venv/bin/python benchmarks/tau2_gold_replay.py [--domain airline ...]

Exit status 1 when any task differs (each is named).
"""

from __future__ import annotations

import argparse
import sys
import time

from agentboost.environments.tau2 import domain as td
from agentboost.environments.tau2.gold import gold_sample, replay_gold


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--domain", action="append", choices=td.DOMAINS, help="a domain (default: all)")
    args = p.parse_args()
    failed = 0
    print(f"{'domain':8} {'tasks':>5} {'full s':>7} {'sample':>6} {'sample s':>8} {'ratio':>6}  result")
    for domain in args.domain or td.DOMAINS:
        rows = td.task_rows(domain, "base")
        t0 = time.perf_counter()
        problems = replay_gold(domain, rows)
        full = time.perf_counter() - t0
        sample = gold_sample(rows)
        t0 = time.perf_counter()
        problems += replay_gold(domain, sample)
        part = time.perf_counter() - t0
        failed += len(problems)
        verdict = "every hash agrees" if not problems else f"{len(problems)} differ"
        print(f"{domain:8} {len(rows):5d} {full:7.1f} {len(sample):6d} {part:8.1f} {full / part:5.1f}x  {verdict}", flush=True)
        for line in problems:
            print("  " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
