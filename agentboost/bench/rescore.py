"""``agentboost bench rescore DIR``: a benchmark's scores recomputed from its stored episodes, with the
scorer installed now (a fixed scorer, a new scorer version), without new inference; says what changed.

Every stored episode that ran to an end is scored again by the recipe's environment (the same reward
a run gives it, ``StrandsEnv.score``); failed and aborted episodes keep their status and reason. The
episode files are rewritten atomically (the previous ones are kept beside them, suffixed with the
time), the report is rebuilt with the new scorer's version, and the changes are listed: episodes
whose outcome flipped, each side's accuracy before and after.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from ..episodes.record import Episode
from .recipe import BenchmarkError
from .registry import get_benchmark
from .run import build_report, load_recipe_config, read_report, scorer_info, task_file, write_report


def _clear(ep: Episode) -> None:
    ep.reward, ep.reward_components, ep.reward_metadata = None, {}, {}


def rescore(out: str | Path, recipe_path: str | None = None, log=print) -> dict[str, Any]:
    from ..files import iter_jsonl
    from ..episodes.record import EpisodeFileError
    from ..rewards.groups import apply_group_policy
    from ..tasks import load_tasks
    from ..run.assembly import environment
    from ..evaluation.progress import rewrite_episodes
    from ..evaluation.statistics import paired_comparison

    out = Path(out)
    before = read_report(out)
    recipe = get_benchmark(recipe_path or before["benchmark"])
    if recipe.name != before["benchmark"]:
        raise BenchmarkError(f"{out} holds benchmark {before['benchmark']!r}, not {recipe.name!r}")
    overrides = [d[len("override "):] for d in before.get("deviations") or [] if d.startswith("override ")]
    cfg = load_recipe_config(recipe, overrides)
    env = environment(cfg)
    tasks_all = {str(t["task_id"]): t for t in load_tasks(task_file(recipe, out / "data"),
                                                          question_field=cfg.data.question_field)}
    sides: dict[str, list[Episode]] = {}
    changes: dict[str, dict[str, Any]] = {}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for label in ("model", "baseline"):
        path = out / f"{label}_episodes.jsonl"
        if not before.get(label):
            continue
        if not path.is_file():
            raise BenchmarkError(f"{out}: the report has a {label} side but {path.name} is missing")
        episodes = [Episode.from_dict(row) for _, row in iter_jsonl(path, EpisodeFileError)]
        flips = []
        for ep in episodes:
            if ep.failed or ep.aborted:
                continue  # no outcome to recompute: kept as it was, with its status and reason
            task = tasks_all.get(ep.task_id)
            if task is None:
                raise BenchmarkError(f"{path}: episode of task {ep.task_id!r}, which the benchmark's tasks do not hold")
            old = ep.succeeded
            _clear(ep)
            env.score(task, ep)
            if ep.succeeded != old:
                flips.append({"episode_id": ep.episode_id, "task_id": ep.task_id, "before": old, "after": ep.succeeded})
        apply_group_policy(episodes, "keep", failed_reward=cfg.reward.failed_reward)
        shutil.copy2(path, path.with_name(f"{path.stem}.before-rescore-{stamp}.jsonl"))
        rewrite_episodes(path, episodes)
        sides[label] = episodes
        changes[label] = {"flipped": flips}
    # the tasks of the run, in its order (the report's episodes name them)
    ids = list(dict.fromkeys(ep.task_id for eps in sides.values() for ep in eps))
    report = build_report(recipe, cfg, [tasks_all[i] for i in ids], before["tasks_total"], before["samples"],
                          before["seed"], before["size"], overrides, sides, before["specs"], paired_comparison)
    report["rescored"] = {"at": report["created"], "scorer_before": before["scorer"], "scorer_after": scorer_info(recipe),
                          "recipe_before": {"version": before["version"], "digest": before["recipe"]},
                          "changes": {label: {"flipped": len(c["flipped"]), "episodes": c["flipped"][:50],
                                              "accuracy_before": before[label]["accuracy"],
                                              "accuracy_after": report[label]["accuracy"]}
                                      for label, c in changes.items()}}
    report["wall_s"] = before.get("wall_s")
    write_report(out, report)
    return report
