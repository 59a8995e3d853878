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
    _Run,
    describe_protections,
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
    scratch = tempfile.mkdtemp()
    prog = os.path.join(scratch, "main.py")
    with open(prog, "w") as f:
        f.write(PROGRAM)

    def bare():
        subprocess.run([python, "-I", prog], capture_output=True, check=True)

    def rlimits():
        subprocess.run([python, "-I", prog], capture_output=True, check=True, start_new_session=True,
                       env={"PATH": "/usr/bin:/bin"}, preexec_fn=_child_setup(limits, None, False, None, None))

    def mode(name: str, group: bool):
        def go():
            run = _Run.start(PROGRAM, None, limits, subprocess.PIPE, mode=name, python=python, group=group)
            try:
                out, _ = run.proc.communicate()
                assert out.strip() == b"4950", out
            finally:
                run.finish()
        return go

    rows = [("bare subprocess.run", rate(bare, args.runs)),
            ("+ rlimits, own session, minimal env", rate(rlimits, args.runs))]
    if prot["mode"] == "bwrap-root":
        rows.append(("+ leased uid, network namespace, masked /tmp (the sandbox before bubblewrap)",
                     rate(mode("weak-root", False), args.runs)))
    if str(prot["mode"]).startswith("bwrap"):
        rows.append((f"bubblewrap instead: own root, PID/IPC/UTS/network namespaces ({prot['mode']})",
                     rate(mode(str(prot["mode"]), False), args.runs)))
        if prot["whole_run_limits"]:
            rows.append(("+ control group (whole-run memory limit)", rate(mode(str(prot["mode"]), True), args.runs)))
    full = rate(lambda: run_python(PROGRAM, limits=limits), args.runs)
    rows.append(("run_python (all active protections, output readers)", full))
    shutil.rmtree(scratch)
    base = rows[0][1]
    print(describe_protections())
    prev = base
    for name, r in rows:
        print(f"{name:86s} {r:7.1f} runs/s  {1000 / r:6.1f} ms/run  (+{1000 / r - 1000 / prev:5.1f} ms)")
        prev = r
    print(f"sandbox_runs_per_s={full:.1f} bare_runs_per_s={base:.1f} ratio_sandbox_vs_bare={full / base:.2f}")


if __name__ == "__main__":
    main()
