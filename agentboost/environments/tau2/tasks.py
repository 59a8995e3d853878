"""``agentboost data prepare tau2``: a tau2 domain's split as a JSONL task file, one row per task
(see ``environments.tau2.domain.task_row``), each recording the tau2 version and the domain data's
digests so that a worker refuses other data."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...files import atomic_file
from .domain import Tau2Error, task_rows


def prepare_tau2(out_dir: str | os.PathLike[str], domain: str | None, split: str, source: str | None) -> tuple[Path, int]:
    """Write ``<out>/<split>.jsonl`` for the domain; returns (path, number of tasks)."""
    if domain is None:
        raise Tau2Error("data prepare tau2 needs --domain (airline, retail or telecom)")
    rows = task_rows(domain, split, source)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{split}.jsonl"
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")
    return path, len(rows)
