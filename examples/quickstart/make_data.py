"""Arithmetic word problems for the quickstart, generated deterministically (seeded).

    python examples/quickstart/make_data.py [--out examples/quickstart/data] [--train 400] [--test 100]

Difficulty is chosen so that SmolLM2-135M-Instruct solves some but not all (single-digit addition
and small subtraction, in a sentence: about 19% of samples at temperature 0.7 for addition), so
that GRPO groups carry signal. Each row carries the ``solution`` a demonstration follows (one
calculator call, then the answer): ``smoke.yaml``'s warm start (``warm_start.demonstrations``)
teaches the model to call its calculator from them before GRPO; SmolLM2 never calls it on its own.
"""

from __future__ import annotations

import random
from pathlib import Path

from agentboost.tasks import generated_splits_main

NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]
THINGS = ["apples", "books", "coins", "pencils", "stamps", "marbles", "cards", "shells"]


def problem(rng: random.Random) -> dict:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if rng.random() < 0.5:
        q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
        answer, expression = a + b, f"{a} + {b}"
    else:
        a, b = max(a, b) + rng.randint(1, 5), min(a, b)
        q = f"{name} has {a} {thing} and gives away {b}. How many {thing} does {name} have left?"
        answer, expression = a - b, f"{a} - {b}"
    return {"question": q, "answer": str(answer),
            "solution": {"calls": [{"name": "calculator", "arguments": {"expression": expression}}],
                         "answer": f"The answer is {answer}."}}


def main() -> None:
    generated_splits_main(problem, Path(__file__).parent / "data", default_seed=1234)


if __name__ == "__main__":
    main()
