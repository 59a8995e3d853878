"""``score`` and ``sandbox info``: answers graded by a reward, and the sandbox that runs graded code."""

from __future__ import annotations

import json
from pathlib import Path

from .common import UsageError, add_command


def add_score(sub) -> None:
    p = add_command(sub, "score", cmd_score, help="score given answers with a reward",
                    description="Score answers (JSONL rows with task_id and answer) with any registered reward; "
                                "the last line is passed=<n> total=<n>.")
    p.add_argument("--reward", required=True, help="registered reward name or module:function, or judge (with --judge)")
    p.add_argument("--judge", help="with --reward judge: the judge, as reward.judge in a config (model, rubric, ...), "
                                   "a YAML/JSON file or inline mapping (docs/judge-rewards.md)")
    p.add_argument("--verifier", default="exact_answer",
                   help="with --reward judge: the verifier the judge is compared with (default: exact_answer)")
    p.add_argument("--tasks", required=True, help="task file (.jsonl or .parquet)")
    p.add_argument("--answers", required=True, help="JSONL with task_id and answer")
    p.add_argument("--jobs", type=int, default=4, help="answers scored at once (default: 4)")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run model-written code even where the sandbox cannot isolate it (warned)")
    p.add_argument("--results", help="write one JSON line per answer: task_id, score, verdict, the reward's "
                                     "metadata (for code: each test's verdict and time)")


def add_sandbox(sub) -> None:
    p = sub.add_parser("sandbox", help="the code sandbox", description="The sandbox for model-written code.")
    ssub = p.add_subparsers(dest="sandbox_cmd", metavar="COMMAND", required=True)
    add_command(ssub, "info", cmd_sandbox_info, help="which protections are active on this machine",
                description="Probe and print which sandbox protections are active here.")


def cmd_score(args) -> int:
    from collections import Counter

    from ..rewards.scoring import read_answers, score_answers, tests_by_verdict
    from ..tasks import load_tasks

    from ..run.assembly import check_sandbox

    warning = check_sandbox(args.reward, [], args.allow_weak_sandbox or None)  # before any answer runs
    if warning:
        print(f"warning: {warning}")
    tasks = {t["task_id"]: t for t in load_tasks(args.tasks)}
    answers = read_answers(args.answers, tasks, args.tasks)
    judge = None
    if args.reward == "judge":
        import yaml

        from ..rewards.judge import judge_config

        if not args.judge:
            raise UsageError("--reward judge needs --judge (the judge's model and rubric)")
        spec = Path(args.judge).read_text() if Path(args.judge).is_file() else args.judge
        judge = judge_config(yaml.safe_load(spec), "--judge")
        judge.model.api_key()
    results = score_answers(args.reward, tasks, answers, jobs=args.jobs, judge=judge)
    threshold = judge.pass_threshold if judge is not None else 1.0  # a judge passes at its threshold
    passed = sum(1 for r in results if r.score >= threshold)
    total = len(results)
    print(f"reward {args.reward}: {total} answers, pass rate {passed / total:.1%}" if total else "no answers")
    for verdict, n in Counter(r.verdict for r in results).most_common():
        print(f"  {verdict}: {n} ({n / total:.1%})")
    tests = tests_by_verdict(results)
    if tests:
        print(f"tests run: {sum(tests.values())}; " + ", ".join(f"{v} {n}" for v, n in tests.most_common()))
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps({"task_id": r.task_id, "score": r.score, "verdict": r.verdict,
                                    "metadata": r.metadata}, default=str) + "\n")
    if judge is not None:
        from ..rewards.scoring import judge_agreement

        verified = score_answers(args.verifier, tasks, answers, jobs=args.jobs)
        agree = judge_agreement(results, verified, judge.pass_threshold)
        calls = sum(r.metadata.get("judge", {}).get("calls", 0) for r in results)
        cost = sum(r.metadata.get("judge", {}).get("cost_usd", 0.0) for r in results)
        print(f"judge {judge.model.describe()} against verifier {args.verifier} on {agree.answers} answers: "
              f"agreement {agree.rate:.1%} (both pass {agree.both_pass}, both fail {agree.both_fail}, "
              f"judge only {agree.judge_only}, verifier only {agree.verifier_only}); "
              f"{agree.errors} not scored by the judge; {calls} judge calls, ${cost:.4f}")
    print(f"passed={passed} total={total}")
    return 0


def cmd_sandbox_info(args) -> int:
    from ..sandbox.runner import describe_protections, protections

    print(describe_protections())
    for k, v in protections().items():
        if k == "missing":
            for m in v:
                print(f"  missing: {m}")
        else:
            print(f"  {k}: {v}")
    return 0
