"""agentboost's BFCL scores equal bfcl-eval's own evaluation of the same outputs: every category
agentboost offers, a few hundred outputs each (right and wrong ones, ``bfcl_outputs.py``), scored by
agentboost from the Strands messages an episode stores and by `bfcl evaluate`'s runner from BFCL's
result format in a process of its own (``official_eval.py``); 0 differences.

BFCL_AGREEMENT_FULL=1 takes every entry of every category (about 12,000 outputs) instead of the
first ``PER_CATEGORY``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by setup.sh")

import bfcl_outputs as gen  # noqa: E402  (tests/environments/bfcl/bfcl_outputs.py)

from agentboost.environments.bfcl import package, scoring  # noqa: E402
from agentboost.environments.bfcl.tasks import task_row  # noqa: E402

HERE = Path(__file__).parent
FULL = os.environ.get("BFCL_AGREEMENT_FULL") == "1"
PER_CATEGORY = {"single": 60, "multi": 45}  # entries; 3-7 outputs each


def _cases(category):
    multi = package.is_multi_turn(category)
    entries = package.entries(category)
    if not FULL:
        entries = entries[: PER_CATEGORY["multi" if multi else "single"]]
    cases = []
    for e in entries:
        variants = gen.multi_turn_variants(e) if multi else gen.single_call_variants(e)
        for k, v in enumerate(variants):
            cases.append((e, k, v))
    return cases


@pytest.mark.slow
def test_scores_equal_bfcl_evals_own(tmp_path):
    categories = package.CATEGORIES
    cases = {c: _cases(c) for c in categories}
    # BFCL's result files hold one output per entry: round k holds each entry's k-th output
    rounds = {}
    for c, cs in cases.items():
        multi = package.is_multi_turn(c)
        by_round = {}
        for e, k, v in cs:
            by_round.setdefault(k, []).append({"id": e["id"], "result": gen.fc_multi(v) if multi else gen.fc_single(v)})
        rounds[c] = [by_round[k] for k in sorted(by_round)]
    (tmp_path / "outputs.json").write_text(json.dumps(rounds))
    (tmp_path / "scores").mkdir()
    official = subprocess.Popen([sys.executable, str(HERE / "official_eval.py"), str(tmp_path / "outputs.json"),
                                 str(tmp_path / "scores"), str(tmp_path / "verdicts.json")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ours = {}
    for c, cs in cases.items():
        multi = package.is_multi_turn(c)
        for e, k, v in cs:
            msgs = gen.messages_multi(e, v) if multi else gen.messages_single(e, v)
            ours[(c, k, e["id"])] = scoring.score_messages(task_row(e["id"]), msgs)["valid"]
    _, err = official.communicate(timeout=900)
    assert official.returncode == 0, err[-3000:]
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    theirs = {(c, k, i): valid for c, rs in verdicts.items() for k, r in enumerate(rs) for i, valid in r.items()}
    assert set(theirs) == set(ours)
    differences = [(key, ours[key], theirs[key]) for key in ours if ours[key] != theirs[key]]
    assert differences == [], f"{len(differences)} differences, e.g. {differences[:5]}"
    for c in categories:  # a test of agreement needs both verdicts in every category
        verdicts = [v for (cc, _, _), v in ours.items() if cc == c]
        assert len(verdicts) >= (30 if c in ("live_parallel", "live_parallel_multiple", "live_relevance") else 150), c
        assert any(verdicts) and not all(verdicts), (c, sum(verdicts), len(verdicts))
    print(f"{len(ours)} outputs in {len(categories)} categories: 0 differences, "
          f"{sum(ours.values())} valid, {len(ours) - sum(ours.values())} invalid")
