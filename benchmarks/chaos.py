"""Crash anywhere, lose nothing: each job runs once untouched, then N times killed (SIGKILL of every
process it started) at a seeded random moment of the untouched run's duration and resumed to its
end; each outcome is audited (prompts lost, trained twice, files corrupted) and compared with the
untouched run (``agentboost/testing/chaos.py``, the jobs in ``chaos_jobs.py``).

    .venv/bin/python benchmarks/chaos.py [--n 50] [--seed 0] [--jobs train,eval] [--out DIR]
    .venv/bin/python benchmarks/chaos.py --report DIR/chaos.json [DIR2/chaos.json ...]

Jobs: ``train`` (the quickstart training, HF engine), ``train-vllm`` (the same on the vLLM engine),
``train-http`` (an ``agent.kind: http`` agent through the gateway), ``eval`` (against a baseline),
``service`` (a job-service job with webhooks), ``serve`` (``serve --ab --record`` with feedback
arriving); ``eval`` and ``serve`` use the untouched ``train`` run as their model. ``--report`` merges
the outcomes of the same job from several runs (other seeds: N grows by runs).

Prints one line per kill (the moment, where it landed, the result), then a table per job: kill
points tried, how many landed while the job ran, and how many ended equal; ``--out`` keeps every
attempt's log, the directory of each that did not end equal (``--keep-all``: every one), and
``chaos.json`` with the outcomes. Exit status 1 when any outcome
was not equal. docs/reliability.md's table comes from this output.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import chaos_serve  # beside this script
import chaos_service

from agentboost.progress import progress_bar
from agentboost.testing import chaos, chaos_jobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50, help="kills per job (default: 50)")
    ap.add_argument("--seed", type=int, default=0, help="draws the kill moments")
    ap.add_argument("--jobs", default="train,eval", help=f"comma-separated: {', '.join(JOBS)} (default: train,eval)")
    ap.add_argument("--out", help="keep the attempts here: their logs, and the directories of those not equal "
                                  "(default: a temporary directory, removed)")
    ap.add_argument("--keep-all", action="store_true",
                    help="keep the directories of the attempts that ended equal too (a vLLM run's are ~1 GB each)")
    ap.add_argument("--report", metavar="CHAOS_JSON", nargs="+",
                    help="print the table of earlier runs' chaos.json (a job's outcomes merged across them) and exit")
    args = ap.parse_args()
    if args.report:
        merged = merge_reports([json.loads(Path(f).read_text()) for f in args.report])
        print(HEADER)
        for r in merged.values():
            print(_row(r))
        return 0
    if args.n < 1:
        ap.error("--n must be at least 1")
    names = [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = set(names) - set(JOBS)
    if unknown:
        ap.error(f"unknown job(s): {', '.join(sorted(unknown))} (known: {', '.join(JOBS)})")
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    trained = None  # the untouched training run: the eval job's model
    receiver = None  # the service job's webhook receiver: in this process, which no kill reaches
    try:
        for name in JOBS:
            if name not in names and not (name == "train" and {"eval", "serve"} & set(names)):
                continue
            if name == "service" and receiver is None:
                receiver = chaos_service.WebhookReceiver(root / "service")
            job = {"train": chaos_jobs.train_job, "train-http": lambda: chaos_jobs.train_job(agent="http"),
                   "train-vllm": lambda: chaos_jobs.train_job(engine="vllm"),
                   "eval": lambda: chaos_jobs.eval_job(str(trained)),
                   "service": lambda: chaos_service.service_job(receiver),
                   "serve": lambda: chaos_serve.serve_job(str(trained))}[name]()
            base = root / name
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            reference, span = chaos.untouched(job, base / "untouched")
            if name == "train":
                trained = base / "untouched"
                if "train" not in names:
                    continue
            print(f"{job.name}: untouched run {span:.1f} s; killing at {args.n} moments drawn from 0..{span:.1f} s",
                  flush=True)
            results[name] = {"job": job.name, "untouched_s": span, "tolerance": job.tolerance, "seed": args.seed,
                             "outcomes": []}
            with progress_bar(job.name, args.n) as advance:
                for i, kill in enumerate(chaos.random_moments(args.seed, args.n, span)):
                    t0 = time.monotonic()
                    o = chaos.killed_and_resumed(job, base / f"kill_{i:03d}", kill, reference)
                    if o.ok and not args.keep_all:  # its log stays
                        shutil.rmtree(base / f"kill_{i:03d}", ignore_errors=True)
                    results[name]["outcomes"].append(asdict(o) | {"ok": o.ok})
                    (root / "chaos.json").write_text(json.dumps(results, indent=1))  # after each kill: a stop keeps it
                    print(f"  {o.line()}  ({o.processes_killed} processes killed, {time.monotonic() - t0:.0f} s)",
                          flush=True)
                    advance()
            print(f"{HEADER}\n{_row(results[name])}", flush=True)
    finally:
        if receiver is not None:
            receiver.close()
        if not args.out:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(HEADER)
    for r in results.values():
        print(_row(r))
    for r in results.values():
        print(f"{r['job']}: equal means {r['tolerance']}")
    bad = sum(not o["ok"] for r in results.values() for o in r["outcomes"])
    print(f"chaos: {sum(len(r['outcomes']) for r in results.values())} kills, {bad} not equal")
    return 1 if bad else 0


JOBS = ["train", "eval", "train-http", "train-vllm", "service", "serve"]


def merge_reports(reports: list[dict]) -> dict[str, dict]:
    """One result per job: the outcomes of every report that ran it (runs with other seeds add kill
    points; the same seed twice would repeat its moments, so it is refused)."""
    merged: dict[str, dict] = {}
    for report in reports:
        for name, r in report.items():
            if name not in merged:
                merged[name] = {**r, "seeds": [r.get("seed")], "outcomes": list(r["outcomes"])}
                continue
            if r.get("seed") in merged[name]["seeds"]:
                raise SystemExit(f"chaos: two reports ran {name} with seed {r.get('seed')}: the same kill moments")
            merged[name]["seeds"].append(r.get("seed"))
            merged[name]["outcomes"] += r["outcomes"]
    return merged


HEADER = ("| job | kill points | landed while running | where they landed | prompts lost | trained twice "
          "| files corrupted | equal to untouched |\n|---|---|---|---|---|---|---|---|")


def _row(r: dict) -> str:
    """A job's line of the table, from its outcomes."""
    outs = r["outcomes"]
    ran = [o for o in outs if o["killed"]]
    where = collections.Counter(_phase_kind(o["phase"]) for o in ran)
    return (f"| {r['job']} | {len(outs)} | {len(ran)} | {', '.join(f'{k} {v}' for k, v in sorted(where.items()))} "
            f"| {sum(len(o['lost']) for o in outs)} | {sum(len(o['twice']) for o in outs)} "
            f"| {sum(len(o['corrupted']) for o in outs)} | {sum(o['ok'] for o in outs)}/{len(outs)} |")


def _phase_kind(phase: str) -> str:
    """A landing place without its numbers ("step 2: 3/4 episodes written" -> "episodes written")."""
    text = re.sub(r"step_\d+", "a checkpoint", phase.rsplit(": ", 1)[-1].split(" (")[0])
    return " ".join(re.sub(r"\d+(/\d+)?", "", text).split()) or phase


if __name__ == "__main__":
    sys.exit(main())
