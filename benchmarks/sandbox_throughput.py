"""Sandbox executions per second for a trivial program against a bare ``subprocess.run`` of the
same program, in one run, and the cost of each protection added one at a time.

    .venv/bin/python benchmarks/sandbox_throughput.py [--runs 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time

from agentboost.sandbox.runner import (
    SandboxLimits,
    _child_setup,
    _next_uid,
    _scratch_base,
    protections,
    run_python,
)

PROGRAM = "print(sum(range(100)))\n"


def rate(fn, runs: int) -> float:
    fn()  # warm
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return runs / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    prot = protections()
    python = str(prot["python"])
    limits = SandboxLimits()
    scratch = tempfile.mkdtemp(dir=_scratch_base())  # outside the directories the namespaces mask
    prog = os.path.join(scratch, "main.py")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    os.chmod(scratch, 0o755)
    os.chmod(prog, 0o644)

    def bare():
        subprocess.run([python, "-I", prog], capture_output=True, check=True)

    def with_setup(uid, namespaces):
        def go():
            subprocess.run([python, "-I", prog], capture_output=True, check=True, start_new_session=True,
                           env={"PATH": "/usr/bin:/bin"}, preexec_fn=_child_setup(limits, uid, namespaces))
        return go

    rows = [("bare subprocess.run", rate(bare, args.runs))]
    rows.append(("+ rlimits, own session, minimal env", rate(with_setup(None, False), args.runs)))
    if prot["drop_user"]:
        uid = _next_uid()
        rows.append(("+ own unprivileged uid", rate(with_setup(uid, False), args.runs)))
        if prot["network_namespace"]:
            rows.append(("+ network and mount namespaces, private /tmp", rate(with_setup(uid, True), args.runs)))
    full = rate(lambda: run_python(PROGRAM, limits=limits), args.runs)
    rows.append(("run_python (all active protections, scratch dir, output readers, uid sweep)", full))
    shutil.rmtree(scratch)
    base = rows[0][1]
    print(f"protections active: {', '.join(k for k, v in prot.items() if v is True)}")
    prev = base
    for name, r in rows:
        print(f"{name:78s} {r:7.1f} runs/s  {1000 / r:6.1f} ms/run  (+{1000 / r - 1000 / prev:5.1f} ms)")
        prev = r
    print(f"sandbox_runs_per_s={full:.1f} bare_runs_per_s={base:.1f} ratio_sandbox_vs_bare={full / base:.2f}")


if __name__ == "__main__":
    main()
