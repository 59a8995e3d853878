"""Task files: JSONL or parquet rows with at least a question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import InputError
from .files import iter_jsonl, read_parquet_rows


class TaskFileError(InputError):
    pass


def not_a_file(p: Path) -> str | None:
    """Why ``p`` cannot be read as a file of rows (None when it can): it does not exist, or it is a
    directory, a device (``/dev/zero`` would be read for ever) or a FIFO."""
    if not p.exists():
        return "does not exist"
    if not p.is_file():
        return "is not a regular file (a directory, a device or a pipe): expected a .jsonl, .json or .parquet file"
    return None


def load_tasks(path: str | Path, question_field: str = "question", id_field: str = "task_id") -> list[dict[str, Any]]:
    """Each row becomes a task dict with ``task_id`` (the row's, or ``<file stem>-<row>``) and
    ``question``; every other field is kept (ground truth, metadata)."""
    p = Path(path)
    problem = not_a_file(p)
    if problem:
        raise TaskFileError(f"task file {p} {problem}")
    if p.suffix == ".parquet":
        rows = read_parquet_rows(p, TaskFileError)
    elif p.suffix in (".jsonl", ".json"):
        rows = [row for _, row in iter_jsonl(p, TaskFileError)]
    else:
        raise TaskFileError(f"task file {p}: expected .jsonl, .json (one object per line) or .parquet")
    tasks, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{p}: row {i + 1}"
        if not isinstance(row, dict):
            raise TaskFileError(f"{where}: expected an object, got {type(row).__name__}")
        q = row.get(question_field)
        if not isinstance(q, str) or not q.strip():
            raise TaskFileError(f"{where}: field {question_field!r} is missing or empty "
                                f"(expected the task's question as text; fields present: {sorted(row)})")
        task = dict(row)
        task["question"] = q
        task["task_id"] = str(row.get(id_field) if row.get(id_field) is not None else f"{p.stem}-{i}")
        if task["task_id"] in seen:
            raise TaskFileError(f"{where}: duplicate {id_field} {task['task_id']!r}")
        seen.add(task["task_id"])
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"task file {p} has no rows")
    return tasks


def write_generated_splits(problem, out: str | Path, train: int, test: int, seed: int) -> None:
    """Draw ``train + test`` distinct problems from ``problem(rng)`` (a dict with a ``question``;
    seeded, so the files are reproducible) and write ``train.jsonl`` and ``test.jsonl`` with task
    ids ``train-i`` / ``test-i``. No question lands in both splits. The examples' generators use it."""
    import json
    import random

    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    rows = []
    while len(rows) < train + test:
        p = problem(rng)
        if p["question"] not in seen:
            seen.add(p["question"])
            rows.append(p)
    for split, part in (("train", rows[:train]), ("test", rows[train:])):
        with open(out / f"{split}.jsonl", "w") as f:
            for i, p in enumerate(part):
                f.write(json.dumps({"task_id": f"{split}-{i}", **p}) + "\n")


def generated_splits_main(problem, default_out: str | Path, default_seed: int, argv: list[str] | None = None) -> None:
    """The examples' data generators' command line (``--out``, ``--train``, ``--test``, ``--seed``)
    around ``write_generated_splits``."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--test", type=int, default=100)
    ap.add_argument("--seed", type=int, default=default_seed)
    args = ap.parse_args(argv)
    write_generated_splits(problem, args.out, args.train, args.test, args.seed)
    print(f"wrote {args.train} train and {args.test} test problems to {args.out}")
