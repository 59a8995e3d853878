"""What isolation costs the judge: median seconds per HumanEval problem (canonical solutions, the
code reward's path, ``run_tests``) with the sandbox before the isolation work (``--before``, a
commit: a uid of its own, a network namespace, a masked /tmp; the check ran inside the program's
process) against the working tree (bubblewrap root, PID namespace, control group, the check in a
process of its own), in one run, alternating rounds so both see the same machine. "after" keeps
the judge's harnesses warm between problems (as the code reward and tool run); "after, cold"
empties the pool before each problem, so each problem pays a sandbox start as before.

Each variant runs in a subprocess that imports agentboost from its own tree (the old one is
extracted with ``git archive``). Both must pass all 164 problems.

    .venv/bin/python benchmarks/judge_isolation.py [--before 545a59d] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from agentboost.sandbox.judge import run_tests
from agentboost.sandbox.runner import describe_protections
problems = json.load(open(sys.argv[2]))
cold = sys.argv[3] == "cold"
if cold:
    from agentboost.sandbox.judge import close_idle_harnesses
times, passed = [], 0
for p in problems:
    if cold:
        close_idle_harnesses()  # each problem starts a sandbox of its own, as before the pool
    t0 = time.perf_counter()
    out = run_tests(p["code"], p["tests"], fn_name=p["fn_name"], stop_on_failure=True)
    times.append(time.perf_counter() - t0)
    passed += all(o.passed for o in out)
print(json.dumps({"times": times, "passed": passed, "sandbox": describe_protections()}))
'''


def problems(out: Path) -> list[dict]:
    import pyarrow.parquet as pq

    from agentboost.data.prepare import prepare

    prepare("humaneval", out)
    rows = pq.read_table(out / "test.parquet").to_pylist()
    return [{"code": r["starter_code"] + json.loads(r["metadata"])["canonical_solution"],
             "tests": json.loads(r["tests"])["hidden"], "fn_name": r["fn_name"]} for r in rows]


def old_tree(rev: str, dest: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, "agentboost"], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest)
    return dest


def run(tree: Path, job: Path, env: dict, how: str) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, str(tree), str(job), how], capture_output=True, text=True,
                       env=env, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"the judge worker failed for {tree}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="545a59d", help="the commit whose sandbox is the baseline")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job = tmp / "problems.json"
        job.write_text(json.dumps(problems(tmp / "humaneval")))
        trees = {"after": REPO, "after, cold": REPO}
        have = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{args.before}^{{commit}}"],
                              capture_output=True).returncode == 0
        if have:
            trees = {"before": old_tree(args.before, tmp / "old"), **trees}
        else:  # a shallow clone: no baseline to compare with, the current figures only
            print(f"commit {args.before} is not in this clone (shallow?): measuring the working tree only")
        env = {**os.environ, "AGENTBOOST_SANDBOX_ALLOW_WEAK": "0"}
        per: dict[str, list[float]] = {name: [] for name in trees}
        names = list(trees)
        for i in range(args.rounds):
            for name in (names if i % 2 == 0 else names[::-1]):
                res = run(trees[name], job, env, "cold" if name.endswith("cold") else "warm")
                if res["passed"] != 164:
                    raise SystemExit(f"{name}: {res['passed']} of 164 canonical solutions passed")
                per[name].append(statistics.median(res["times"]))
                print(f"round {i + 1} {name:11s}: median {per[name][-1] * 1000:.1f} ms per problem, "
                      f"first problem {res['times'][0] * 1000:.1f} ms, 164/164 passed ({res['sandbox']})", flush=True)
    before = statistics.median(per["before"]) if "before" in per else None
    print("\nmedian seconds per problem:" + (f" before ({args.before}) {before:.4f}" if before else ""))
    for name in [n for n in names if n != "before"]:
        after = statistics.median(per[name])
        ratio = f"  x{after / before:.2f} of before (target: at most x1.25)" if before else ""
        print(f"  {name:11s} {after:.4f}{ratio}")
    print("(after: harnesses stay warm between problems, as the code reward and tool use them; "
          "after, cold: a new sandbox per problem)")


if __name__ == "__main__":
    main()
