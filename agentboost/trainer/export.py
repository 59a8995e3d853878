"""``agentboost export``: a run's episodes as JSONL for fine-tuning or inspection.

The export format is what ``agentboost sft`` reads (``load_sft_rows``): one object per line with
``episode_id``, ``task_id``, ``reward``, ``status``, ``messages``, ``final_answer`` and ``segments``
(``input_ids``, ``loss_mask``, ``call_indices``), so ``export --success-only`` followed by ``sft`` is
rejection-sampling fine-tuning. The visible text is content only: an assistant message's reasoning
is its own ``reasoningContent`` block (episodes recorded with the reasoning still in the text are
split with the ``<think>`` format), and ``final_answer`` is the last turn's content. The training
tokens (``segments``) are exactly what was sampled, reasoning included.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..episodes.record import Episode, read_episodes
from ..errors import InputError
from ..files import atomic_file
from ..reasoning import answer_content, split_message


def export_record(ep: Episode) -> dict[str, Any]:
    return {"episode_id": ep.episode_id, "task_id": ep.task_id, "reward": ep.reward, "status": str(ep.status),
            "messages": [split_message(m) for m in ep.messages], "final_answer": answer_content(ep.final_answer),
            "segments": [asdict(s) for s in ep.segments]}


def selected(ep: Episode, min_reward: float | None, success_only: bool) -> bool:
    if min_reward is not None and (ep.reward is None or ep.reward < min_reward):
        return False
    return ep.succeeded or not success_only


def export_run(run_dir: str | Path, out: str | Path, min_reward: float | None = None, success_only: bool = False,
               limit: int | None = None, include_validation: bool = False) -> int:
    """Write the selected episodes of ``run_dir`` to ``out``; returns how many."""
    episodes_dir = Path(run_dir, "episodes")
    files = sorted(episodes_dir.glob("step_*.jsonl"))
    if include_validation:
        files += sorted(episodes_dir.glob("val_step_*.jsonl"))
    if not files:
        raise InputError(f"{episodes_dir} holds no episode files: is {run_dir} a training run directory?")
    if limit is not None and limit < 0:
        raise InputError(f"--limit must be >= 0, got {limit}")
    n = 0
    # written under a temporary name: an error half-way leaves no partial export behind
    with atomic_file(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for path in files:
            for ep in read_episodes(path):
                if limit is not None and n >= limit:
                    break
                if selected(ep, min_reward, success_only):
                    f.write(json.dumps(export_record(ep)) + "\n")
                    n += 1
            if limit is not None and n >= limit:
                break
    return n
