"""Two-step arithmetic word problems on 2–5-digit numbers, generated deterministically (seeded).

    python examples/tool_use/make_data.py [--out examples/tool_use/data] [--train 400] [--test 100]

A 135M model cannot multiply 412 by 37 in its head, but it can copy the numbers of the question into
a calculator call. Each row carries its ground truth (``answer``) and a ``solution`` — the one
calculator call that solves it and the final answer — from which `agentboost rollout
--demonstrations` writes the warm start's episodes. Eight templates, each needing two operations
in the order the sentence gives them; train and test share templates, never a question.
"""

from __future__ import annotations

import random
from pathlib import Path

from agentboost.tasks import generated_splits_main
from agentboost.tools.calculator import evaluate

NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]


def problem(rng: random.Random) -> dict:
    r = rng.randint
    kind = rng.randrange(8)
    name = rng.choice(NAMES)
    if kind == 0:
        a, b, c = r(2000, 9999), r(100, 1999), r(100, 9999)
        q, e = (f"A warehouse holds {a} boxes. It ships out {b} boxes and then receives {c} more. "
                "How many boxes does it hold now?"), f"{a} - {b} + {c}"
    elif kind == 1:
        a, b, c = r(12, 96), r(100, 999), r(10, 99)
        q, e = (f"Each crate holds {a} bottles. A shop has {b} crates and {c} loose bottles. "
                "How many bottles does the shop have?"), f"{a} * {b} + {c}"
    elif kind == 2:
        a, b = r(100, 999), r(12, 96)
        c = r(100, a * b - 1)
        q, e = (f"A school buys {a} tickets at {b} dollars each and pays {c} dollars with a voucher. "
                "How many dollars does it still owe?"), f"{a} * {b} - {c}"
    elif kind == 3:
        a, k, c = r(12, 48), r(100, 999), r(10, 99)
        q, e = (f"A farm packs {a * k} eggs into cartons of {a} and sells {c} cartons. "
                "How many cartons are left?"), f"{a * k} / {a} - {c}"
    elif kind == 4:
        a, b = r(100, 999), r(12, 48)
        c = r(100, a * b - 1)
        q, e = (f"{name} saves {a} dollars a month for {b} months and then spends {c} dollars. "
                f"How many dollars does {name} have left?"), f"{a} * {b} - {c}"
    elif kind == 5:
        a, b, c = r(20, 99), r(100, 999), r(100, 9999)
        q, e = (f"A library has {a} books on each of {b} shelves and {c} books in storage. "
                "How many books does it have in all?"), f"{a} * {b} + {c}"
    elif kind == 6:
        a, b, c = r(1000, 9999), r(1000, 9999), r(1000, 9999)
        q, e = (f"A train travels {a} km on Monday, {b} km on Tuesday and {c} km on Wednesday. "
                "How many km does it travel in all?"), f"{a} + {b} + {c}"
    else:
        a, k = r(12, 64), r(200, 999)
        c = r(10, k - 1)
        q, e = (f"A company splits {a * k} dollars equally among {a} teams, and each team gives {c} "
                "dollars to charity. How many dollars does each team keep?"), f"{a * k} / {a} - {c}"
    value = evaluate(e)  # the calculator tool's own arithmetic
    answer = str(int(value))
    return {"question": q, "answer": answer, "template": kind,
            "solution": {"calls": [{"name": "calculator", "arguments": {"expression": e}}],
                         "answer": f"The answer is {answer}."}}


def main() -> None:
    generated_splits_main(problem, Path(__file__).parent / "data", default_seed=2026)


if __name__ == "__main__":
    main()
