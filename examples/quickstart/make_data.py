"""Arithmetic word problems for the quickstart, generated deterministically (seeded).

    python examples/quickstart/make_data.py [--out examples/quickstart/data] [--train 400] [--test 100]

Difficulty is chosen so that SmolLM2-135M-Instruct solves some but not all (single-digit addition
and small subtraction, in a sentence: about 19% of samples at temperature 0.7 for addition), so
that GRPO groups carry signal.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from agentboost.tasks import write_generated_splits

NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]
THINGS = ["apples", "books", "coins", "pencils", "stamps", "marbles", "cards", "shells"]


def problem(rng: random.Random) -> dict:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if rng.random() < 0.5:
        q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
        answer = a + b
    else:
        a, b = max(a, b) + rng.randint(1, 5), min(a, b)
        q = f"{name} has {a} {thing} and gives away {b}. How many {thing} does {name} have left?"
        answer = a - b
    return {"question": q, "answer": str(answer)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).parent / "data"))
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--test", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    write_generated_splits(problem, args.out, args.train, args.test, args.seed)
    print(f"wrote {args.train} train and {args.test} test problems to {args.out}")


if __name__ == "__main__":
    main()
