"""``check`` and ``stats``: an episodes file's token invariant, and tables over it."""

from __future__ import annotations

from .common import add_command


def add_check(sub) -> None:
    p = add_command(sub, "check", cmd_check,
                    help="verify an episodes file's token invariant, or a whole run: weights, versions, parity",
                    description="An episode JSONL file: verify, from the JSONL alone, that in every segment the "
                                "tokens under loss mask 1 are exactly the response_ids of its calls. A run "
                                "directory: that too for every episode, and that the weight versions never go "
                                "back, every version's fingerprints matched, every call came from a verified "
                                "version the step could sample, and every step's log-prob parity was within its "
                                "bound (docs/verification.md).")
    p.add_argument("episodes", help="an episode JSONL file (rollout, a run's episodes/, an export), or a run directory")


def add_stats(sub) -> None:
    p = add_command(sub, "stats", cmd_stats,
                    help="tables over an episodes file (code categories, tool outcomes, statuses)",
                    description="Episodes by code category, test_code calls by outcome, statuses and tool calls.")
    p.add_argument("episodes", help="an episode JSONL file (rollout, a run's episodes/, an export)")
    p.add_argument("--tasks", help="tau2 episodes: the task file they ran on (`data prepare tau2`), for the null "
                                   "baseline and the success rate on non-trivial tasks")


def cmd_check(args) -> int:
    from pathlib import Path

    from ..episodes.record import check_episode, read_episodes

    if Path(args.episodes).is_dir():
        return _check_run(Path(args.episodes))

    n = bad = 0
    for ep in read_episodes(args.episodes):
        n += 1
        problems = check_episode(ep)
        if problems:
            bad += 1
            print(f"{ep.episode_id}: " + "; ".join(problems))
    print(f"checked={n} violations={bad}")
    return 1 if bad else 0


def _check_run(run_dir) -> int:
    from ..errors import InputError
    from ..run.verify import check_run

    if not (run_dir / "config.yaml").is_file():
        raise InputError(f"{run_dir}: not a run directory (no config.yaml); give a run directory or an episode file")
    problems, counts = check_run(run_dir)
    for problem in problems:
        print(problem)
    print(f"checked={run_dir} versions={counts['versions']} steps={counts['steps']} episodes={counts['episodes']} "
          f"calls={counts['calls']} problems={len(problems)}")
    return 1 if problems else 0


def cmd_stats(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..episodes.record import read_episodes
    from ..episodes.stats import TOOL_USE_ROWS, generic_stats
    from ..rewards.code import CATEGORIES, OUTCOME_ROWS, code_stats

    episodes = list(read_episodes(args.episodes))
    n = len(episodes) or 1
    code, generic = code_stats(episodes), generic_stats(episodes)
    console = Console()

    def table(title, header, rows):
        t = Table(title=title)
        for h in header:
            t.add_column(h, justify="right" if h != header[0] else "left")
        for r in rows:
            t.add_row(*[str(x) for x in r])
        console.print(t)

    table(f"episodes by category ({len(episodes)})", ["category", "count", "%"],
          [(c, code["categories"][c], f"{100 * code['categories'][c] / n:.1f}") for c in CATEGORIES])
    total_calls = sum(code["outcomes"].values()) or 1
    table(f"test_code calls by outcome ({sum(code['outcomes'].values())})", ["outcome", "count", "%"],
          [(name, code["outcomes"][name], f"{100 * code['outcomes'][name] / total_calls:.1f}") for name, _ in OUTCOME_ROWS])
    table("episodes by status", ["status", "count", "%"],
          [(s, c, f"{100 * c / n:.1f}") for s, c in generic["statuses"].most_common()])
    table("tool calls by name", ["tool", "ok", "error"],
          [(name, generic["tools"][(name, "ok")], generic["tools"][(name, "error")])
           for name in sorted({k[0] for k in generic["tools"]})])
    table(f"episodes by tool use ({len(episodes)}; no tool call: {generic['tool_use_no_call_success'][True]} succeeded)",
          ["tool use", "count", "%"],
          [(row, generic["tool_use"][row], f"{100 * generic['tool_use'][row] / n:.1f}") for row in TOOL_USE_ROWS])
    tau2 = [ep for ep in episodes if str(ep.task_id).startswith("tau2/")]
    if tau2:
        from ..environments.tau2.metrics import null_baseline, tau2_metrics
        from ..tasks import load_tasks

        null = null_baseline([t for t in load_tasks(args.tasks) if t["task_id"] in {e.task_id for e in tau2}]) \
            if args.tasks else None
        m = tau2_metrics(tau2, null=null)
        rows = [("episodes / tasks", f"{m['episodes']} / {m['tasks']}"), ("average reward", f"{m['avg_reward']:.3f}")]
        rows += [(f"pass^{k}", f"{v:.3f}") for k, v in m["pass_hat_k"].items()]
        rows += [(f"pass@{k}", f"{v:.3f}") for k, v in m["pass_at_k"].items()]
        if null is not None:
            rows += [("null baseline (do nothing)", f"{m['null_baseline']:.3f}"),
                     (f"success on non-trivial tasks ({m['nontrivial_tasks']})",
                      "-" if m["nontrivial_success"] is None else f"{m['nontrivial_success']:.3f}")]
        rows += [(f"termination: {k}", v) for k, v in sorted(m["terminations"].items())]
        rows += [(f"user signal: {k}", v) for k, v in sorted(m["user_signals"].items())]
        rows += [("tool errors per episode", f"{m['tool_errors_per_episode']:.2f}")]
        table("tau2 (pass^k as tau2 reports it)", ["metric", "value"], rows)
    return 0
