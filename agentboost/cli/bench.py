"""``bench list``, ``bench run``, ``bench report`` and ``bench rescore``: benchmarks behind one command."""

from __future__ import annotations

import json
from pathlib import Path

from .common import add_command, add_options


def add_bench(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks behind one command: list, run, report, rescore",
                       description="Registered benchmarks (versioned recipes: tasks, agent, scorer, protocol, "
                                   "reference figures), run through eval with one report format.")
    bsub = p.add_subparsers(dest="bench_cmd", metavar="COMMAND", required=True)
    ls = add_command(bsub, "list", cmd_bench_list, help="every registered benchmark, its version and data source",
                     description="Every registered benchmark (built-in, and the recipes AGENTBOOST_BENCHMARKS names).")
    ls.add_argument("--json", action="store_true", help="print the recipes as JSON")
    run = add_command(bsub, "run", cmd_bench_run, help="run a benchmark on a model (and a baseline)",
                      description="Run a benchmark's recipe on a model through eval: accuracy with its 95% interval, "
                                  "and with --baseline the paired difference over tasks. The smoke size by default "
                                  "(small enough for CI); --full runs the protocol's full size. Rerun the same "
                                  "command to resume.")
    run.add_argument("name", help="a registered benchmark (agentboost bench list) or a recipe file")
    run.add_argument("--model", default="smollm2-135m-instruct",
                     help="what eval's --model takes: an embedded model name, a model directory, RUN_DIR[:CHECKPOINT], "
                          "or a chat model spec (default: smollm2-135m-instruct)")
    run.add_argument("--baseline", help="the same kinds: compared with the model on the same tasks and seeds")
    run.add_argument("--full", action="store_true", help="the protocol's full size (default: the smoke size)")
    run.add_argument("overrides", nargs="*", help="dotted overrides of the recipe's configuration, right after NAME "
                                                  "(recorded in the report as deviations from the protocol)")
    add_options(run, ("--max-tasks", int, "run on the first N tasks"), ("--samples", int, "episodes per task"),
                ("--seed", 0, "sampling seed, the same for both sides (default: 0)"),
                ("--out", str, "directory for the report and the episodes (default: bench/NAME)"),
                ("--workers", 1, "worker processes (default: 1)"), ("--slots", 16, "episodes in flight per worker (default: 16)"),
                ("--retries", 2, "rounds of retries of episodes the serving side aborted (default: 2)"),
                ("--retry-backoff", 5.0, "seconds before the first retry round, doubling (default: 5)"))
    rep = add_command(bsub, "report", cmd_bench_report, help="print benchmark reports",
                      description="Print the reports of benchmark runs (their report.json), one block each.")
    rep.add_argument("dirs", nargs="*", help="run directories (default: every bench/*/ that has a report)")
    rep.add_argument("--json", action="store_true", help="print the reports as one JSON list")
    res = add_command(bsub, "rescore", cmd_bench_rescore, help="recompute a run's scores from its stored episodes",
                      description="Score a benchmark run's stored episodes again with the scorer installed now (a "
                                  "fixed scorer, a new version), without new inference, and say what changed.")
    res.add_argument("dir", help="a benchmark run directory")
    res.add_argument("--recipe", help="score with this recipe file instead of the registered one of the same name")


def cmd_bench_list(args) -> int:
    from ..bench.registry import benchmarks

    known = benchmarks()
    if args.json:
        print(json.dumps([r.as_dict() for r in known.values()], indent=1))
        return 0
    print(f"{'benchmark':<30} {'version':>7}  {'licence':<14} source")
    for r in known.values():
        print(f"{r.name:<30} {r.version:>7}  {r.licence:<14} {r.source.describe()}")
    print(f"{len(known)} benchmarks; `agentboost bench run NAME --model M` runs one (docs/bench.md)")
    return 0


def cmd_bench_run(args) -> int:
    from ..bench.registry import get_benchmark
    from ..bench.run import REPORT, run_benchmark, summary_lines

    recipe = get_benchmark(args.name)
    out = Path(args.out or f"bench/{recipe.name}")
    report = run_benchmark(recipe, args.model, baseline=args.baseline, size="full" if args.full else "smoke",
                           max_tasks=args.max_tasks, samples=args.samples, seed=args.seed, out=out,
                           overrides=args.overrides, workers=args.workers, slots=args.slots, retries=args.retries,
                           backoff_s=args.retry_backoff)
    print("\n".join(summary_lines(report)))
    print(f"written: {out / REPORT}")
    return 0


def cmd_bench_report(args) -> int:
    from ..bench.recipe import BenchmarkError
    from ..bench.run import REPORT, read_report, summary_lines

    dirs = [Path(d) for d in args.dirs] or sorted(p.parent for p in Path("bench").glob(f"*/{REPORT}"))
    if not dirs:
        raise BenchmarkError("no benchmark reports under bench/; give run directories, or run `agentboost bench run`")
    reports = [read_report(d) for d in dirs]
    if args.json:
        print(json.dumps(reports, indent=1))
        return 0
    for d, report in zip(dirs, reports):
        print(f"{d}:")
        print("\n".join(summary_lines(report)))
    return 0


def cmd_bench_rescore(args) -> int:
    from ..bench.rescore import rescore
    from ..bench.run import summary_lines

    report = rescore(args.dir, recipe_path=args.recipe)
    r = report["rescored"]
    before, after = r["scorer_before"], r["scorer_after"]
    print(f"rescored {args.dir} with {after['name']} {after.get('version', '')} (was {before['name']} "
          f"{before.get('version', '')}) from its stored episodes, no new inference")
    for label, c in r["changes"].items():
        acc = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"  {label}: {c['flipped']} episodes changed outcome; accuracy {acc(c['accuracy_before'])} -> "
              f"{acc(c['accuracy_after'])}")
        for e in c["episodes"][:10]:
            print(f"    {e['task_id']} ({e['episode_id'][:8]}): {'success' if e['before'] else 'failure'} -> "
                  f"{'success' if e['after'] else 'failure'}")
    print("\n".join(summary_lines(report)))
    return 0
