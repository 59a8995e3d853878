"""``agentboost data prepare bfcl``: BFCL entries of one category as task rows.

A row names its entry (``bfcl_id``) and carries the digest of the entry and its ground truth
(``data_digest``); the conversation and the scorer read the entry itself from the installed
bfcl-eval, and refuse a row whose digest differs (tasks made from another BFCL release). Fields:
``task_id`` (``bfcl/<id>``), ``bfcl_id``, ``category``, ``question`` (the first user message, for
people and for ``StrandsEnv``'s first message), ``turns``, ``involved_classes`` (multi-turn),
``bfcl_version``, ``data_digest``.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from ...files import atomic_file
from . import package


def task_row(bfcl_id: str) -> dict:
    e = package.entry(bfcl_id, hints=False)
    first = next((m["content"] for turn in e["question"] for m in turn if m["role"] == "user"), "")
    row = {"task_id": f"bfcl/{bfcl_id}", "bfcl_id": bfcl_id, "category": package.category_of(bfcl_id),
           "question": first if isinstance(first, str) else json.dumps(first), "turns": len(e["question"]),
           "bfcl_version": package.bfcl().version, "data_digest": package.digest(bfcl_id)}
    if "involved_classes" in e:
        row["involved_classes"] = list(e["involved_classes"])
    return row


def task_rows(category: str, limit: int | None = None) -> list[dict]:
    ids = [e["id"] for e in package.entries(category)]
    return [task_row(i) for i in ids[:limit]]


def _write(path: Path, rows: list[dict]) -> None:
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")


def prepare_bfcl(out_dir: str | os.PathLike[str], category: str | None, test_fraction: float | None = None,
                 seed: int = 0, limit: int | None = None) -> list[tuple[Path, int]]:
    """``<out>/<category>.jsonl`` with every entry (the first ``limit``); with ``test_fraction`` > 0,
    ``<out>/train.jsonl`` and ``<out>/test.jsonl`` instead (a seeded shuffle: held-out tasks for
    evaluation, the rest to train on). Returns [(path, rows)]."""
    if category is None:
        raise package.BfclError(f"data prepare bfcl needs --category (one of {', '.join(package.CATEGORIES)})")
    rows = task_rows(package.check_category(category), limit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not test_fraction:
        _write(out / f"{category}.jsonl", rows)
        return [(out / f"{category}.jsonl", len(rows))]
    if not 0 < test_fraction < 1:
        raise package.BfclError(f"--test-fraction must be in [0, 1), got {test_fraction}")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    held = set(order[:round(len(rows) * test_fraction)])
    train = [r for i, r in enumerate(rows) if i not in held]
    test = [r for i, r in enumerate(rows) if i in held]
    _write(out / "train.jsonl", train)
    _write(out / "test.jsonl", test)
    return [(out / "train.jsonl", len(train)), (out / "test.jsonl", len(test))]
