"""An evaluation that resumes and tells outages from failures (``agentboost eval``).

Each finished episode is appended to its policy's JSONL as it finishes (one flushed line: a kill
loses none). Run again with the same arguments, an evaluation reads what is there, keeps each
(task, sample) that has a finished episode and runs only the others; seeds are derived per
(task, sample) (``sampling.protocol.derive_seed``), so the rerun's report is the uninterrupted
run's. The arguments are kept in ``eval_args.json`` beside the episodes: another evaluation's
directory is refused rather than mixed.

A group-ranking judge scores a task's episodes together, after all of them ran: until then the
file holds them unscored (a kill loses none); then ``rewrite_episodes`` replaces it, atomically, by
one record per (task, sample) with its score. A resumed run judges only the groups that still have
a member waiting for its score.

An ``aborted`` episode (the serving side was unavailable) is not finished: it is run again, in
rounds with a growing pause, up to a limit; what is still aborted then is reported with its count
and left out of the statistics, never scored as a wrong answer.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..episodes.record import Episode, EpisodeFileError, EpisodeWriter
from ..errors import InputError
from ..files import atomic_write_text, drop_torn_tail, iter_jsonl

ARGS_FILE = "eval_args.json"


class EvalResumeError(InputError):
    pass


@dataclass
class Progress:
    """What one policy's side has, by (task id, sample)."""

    done: dict[tuple[str, int], Episode] = field(default_factory=dict)
    resumed: int = 0  # finished episodes read back from an earlier run
    aborted_rounds: int = 0  # retry rounds run for aborted episodes


def check_args(out: Path, args: dict[str, Any]) -> None:
    """Write ``args`` to ``out/eval_args.json``, or check that an earlier run there had the same."""
    path = out / ARGS_FILE
    args = json.loads(json.dumps(args, sort_keys=True, default=str))
    if path.is_file():
        before = json.loads(path.read_text())
        if before != args:
            changed = sorted(k for k in set(before) | set(args) if before.get(k) != args.get(k))
            raise EvalResumeError(f"{out} holds an evaluation with other arguments ({', '.join(changed)} differ); "
                                  "give another --out, or remove that directory to start over")
        return
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(args, indent=1, sort_keys=True))
    os.replace(tmp, path)


def read_progress(path: Path, tasks: list[dict], samples: int) -> Progress:
    """The finished episodes already in ``path`` for these tasks and samples (the last record of a
    (task, sample) wins; aborted ones do not count as finished)."""
    progress = Progress()
    if not path.is_file():
        return progress
    drop_torn_tail(path)  # a run killed mid-append left part of a line: the reading would stop at it
    wanted = {(str(t["task_id"]), k) for t in tasks for k in range(samples)}
    for lineno, row in iter_jsonl(path, EpisodeFileError):
        try:
            ep = Episode.from_dict(row)
        except (ValueError, TypeError, KeyError) as e:
            raise EvalResumeError(f"{path}:{lineno}: not an episode record ({e}); remove the file to start over") from None
        key = (ep.task_id, int(ep.metadata.get("sample", -1)))
        if key not in wanted:
            raise EvalResumeError(f"{path}:{lineno}: episode of task {key[0]!r}, sample {key[1]} is not part of this "
                                  "evaluation; give another --out")
        if ep.aborted:
            progress.done.pop(key, None)
        else:
            progress.done[key] = ep
    progress.resumed = len(progress.done)
    return progress


def run_resumable(run_batch: Callable[[list[tuple[dict, int]], Callable[[Episode], None]], list[Episode]],
                  tasks: list[dict], samples: int, path: Path | None, progress: Progress, retries: int = 2,
                  backoff_s: float = 5.0, log=print) -> list[Episode]:
    """Run what ``progress`` lacks with ``run_batch(jobs, on_episode)`` (jobs: (task, sample) pairs;
    it calls ``on_episode`` as each finishes), appending each episode to ``path`` as it comes; then
    up to ``retries`` rounds, ``backoff_s`` doubling between them, for the aborted ones. Returns
    every (task, sample)'s episode in task order: finished ones, and the aborted ones that stayed so."""
    pending = [(t, k) for t in tasks for k in range(samples) if (str(t["task_id"]), k) not in progress.done]
    last: dict[tuple[str, int], Episode] = {}
    writer = EpisodeWriter(path) if path is not None else None
    try:
        def on_episode(ep: Episode) -> None:
            if writer is not None:
                writer.write(ep)

        for attempt in range(retries + 1):
            if not pending:
                break
            if attempt:
                pause = backoff_s * 2 ** (attempt - 1)
                log(f"{len(pending)} episodes aborted by the serving side; retrying them in {pause:g} s "
                    f"(round {attempt} of {retries})")
                time.sleep(pause)
                progress.aborted_rounds += 1
            by_key = {(str(t["task_id"]), k): (t, k) for t, k in pending}
            for ep in run_batch(pending, on_episode):
                key = (ep.task_id, int(ep.metadata.get("sample", -1)))
                last[key] = ep
                if not ep.aborted:
                    progress.done[key] = ep
            pending = [by_key[k] for k in by_key if k not in progress.done]
    finally:
        if writer is not None:
            writer.close()
    return [progress.done.get((str(t["task_id"]), k)) or last[(str(t["task_id"]), k)]
            for t in tasks for k in range(samples)]


def rewrite_episodes(path: Path, episodes: list[Episode]) -> None:
    """``path`` holding exactly ``episodes`` (one JSONL record each, as ``EpisodeWriter`` writes
    them), replaced atomically: a kill leaves the old file or the new one."""
    atomic_write_text(path, "".join(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n" for ep in episodes))
