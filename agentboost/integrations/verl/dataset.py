"""Task files -> veRL dataset rows, for ``verl.trainer.main_ppo`` with the Strands agent loop.

One row per task, the columns veRL's ``RLHFDataset`` and agent-loop worker read:

- ``prompt``: the task's question as one user message (veRL shows it in logs and can filter
  over-long prompts by it; the agent loop renders the real conversation, with the agent's system
  prompt and tools, itself);
- ``agent_name``: the YAML entry that runs the row (``strands_agent`` in the examples);
- ``data_source``: the task's own, else the file's name (veRL groups validation metrics by it);
- ``reward_model``: ``{"style": "agentboost", "ground_truth": answer}``, for veRL's tools that
  look at it; the agent loop scores with the agentboost reward;
- ``extra_info``: ``index``, ``task_id`` and ``agentboost_task``, the whole task as JSON text.
  JSON because tasks carry fields whose types differ between rows (answers, test lists, metadata)
  and a parquet column holds one type.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...files import atomic_file
from ...tasks import load_tasks

DEFAULT_AGENT_NAME = "strands_agent"


def verl_row(task: dict[str, Any], index: int, agent_name: str, data_source: str) -> dict[str, Any]:
    answer = task.get("answer")
    return {
        "prompt": [{"role": "user", "content": task["question"]}],
        "agent_name": agent_name,
        "data_source": str(task.get("data_source") or data_source),
        "reward_model": {"style": "agentboost", "ground_truth": "" if answer is None else str(answer)},
        "extra_info": {"index": index, "task_id": str(task["task_id"]),
                       "agentboost_task": json.dumps(task, ensure_ascii=False, default=str)},
    }


def write_verl_rows(tasks: list[dict[str, Any]], out: str | os.PathLike[str], agent_name: str = DEFAULT_AGENT_NAME,
                    data_source: str = "agentboost") -> int:
    """Write ``tasks`` as veRL rows to the parquet file ``out`` (atomically); returns the count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(t, i, agent_name, data_source) for i, t in enumerate(tasks)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out) as tmp:  # a reader never sees half a file
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


def task_file_to_verl(path: str | os.PathLike[str], out: str | os.PathLike[str], agent_name: str = DEFAULT_AGENT_NAME,
                      question_field: str = "question", id_field: str = "task_id") -> int:
    """Any agentboost task file (JSONL or parquet, e.g. what ``data prepare`` wrote) -> veRL rows."""
    tasks = load_tasks(path, question_field=question_field, id_field=id_field)
    return write_verl_rows(tasks, out, agent_name=agent_name, data_source=Path(path).stem)


def prepared_splits_to_verl(out_dir: str | os.PathLike[str], counts: dict[str, int],
                            agent_name: str = DEFAULT_AGENT_NAME) -> list[tuple[Path, int]]:
    """After ``data prepare``: ``<out>/<split>.parquet`` -> ``<out>/verl_<split>.parquet`` for
    every split that has rows (``counts``: split -> rows written)."""
    out, written = Path(out_dir), []
    for split, n in counts.items():
        if n:
            dest = out / f"verl_{split}.parquet"
            written.append((dest, task_file_to_verl(out / f"{split}.parquet", dest, agent_name=agent_name)))
    return written
