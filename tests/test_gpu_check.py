"""benchmarks/gpu_check.sh: the one command a lent GPU runs. Its dry run (every section at its
smallest, on CPU here) must work before a GPU is ever lent, and print every figure labelled with the
device it came from."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import REPO


@pytest.mark.slow
def test_dry_run_prints_every_figure_labelled_with_its_device(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    block = (out / "gpu_check.txt").read_text()
    assert block == proc.stdout[proc.stdout.index("== agentboost gpu_check"):].strip() + "\n"
    lines = block.strip().splitlines()[1:]
    for start in ("env:", "quickstart (hf engine):", "log-prob parity bfloat16", "log-prob parity float32",
                  "rollout, 8 episodes in flight", "measured dense GEMM", "update float32", "update bfloat16"):
        assert any(line.startswith(start) for line in lines), (start, block)
    assert all(line.endswith("cores]") and "[cpu: " in line for line in lines), block  # no GPU here: every figure says cpu
    res = json.loads((out / "gpu_check.json").read_text())
    assert set(res) == {"env", "quickstart", "parity", "rollout", "update"}
    assert not any("error" in r for r in res.values())
    q = res["quickstart"]
    assert q["steps"] == 1 and q["s_per_step"] > 0 and q["peak_rss_gib"] > 0
    # the same weights and tokens in float32: the sampler's log-probs are the trainer's
    assert res["parity"]["float32"]["tokens"] > 0 and res["parity"]["float32"]["max_abs_delta"] < 1e-3
    # bfloat16 differs, measurably but boundedly (the figure a GPU gives for its own kernels)
    assert 0 < res["parity"]["bfloat16"]["mean_abs_delta"] < 0.5
    r = res["rollout"]["8"]
    assert r["episodes"] == 8 and r["not_ok"] == 0 and r["tokens_per_s"] > 0
    for dtype in ("float32", "bfloat16"):
        u = res["update"][dtype]
        assert u["tokens_per_s"] > 0 and u["trained_tokens"] == 4 * 16 and 0 < u["fraction_of_measured_gemm"]


def test_unknown_option_and_missing_bundle_are_one_line_errors(tmp_path):
    bad = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--frobnicate"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip() == "gpu_check.sh: unknown option --frobnicate (see --help)"
    empty = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--bundle", str(tmp_path)], cwd=REPO, capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin", "AGENTBOOST_GPU_SITE": str(tmp_path / "site")})
    assert empty.returncode == 2 and "has no site.tar.xz (made by --make-bundle)" in empty.stderr
