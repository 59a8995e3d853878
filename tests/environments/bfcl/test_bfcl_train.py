"""BFCL multi-turn as a training environment: `data prepare bfcl`, then two GRPO steps of the
embedded SmolLM2 on CPU through `agentboost train` with the example's smoke config, BFCL's state and
response checker as the reward, and `agentboost check` clean on every episode written."""

import json
import math

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by setup.sh")

from helpers import REPO, cli  # noqa: E402


@pytest.mark.slow
def test_two_grpo_steps_on_bfcl_multi_turn(tmp_path):
    data = tmp_path / "data"
    r = cli("data", "prepare", "bfcl", "--category", "multi_turn_base", "--out", str(data))
    assert r.returncode == 0, r.stderr
    # the entries of one turn: whatever the small model does in it (a call, text, a turn cut at its token
    # limit), the episode has the entry's turns, so BFCL's checker replays it and checks the state
    rows = [json.loads(x) for x in (data / "multi_turn_base.jsonl").read_text().splitlines()]
    one_turn = [r for r in rows if r["turns"] == 1]
    assert len(one_turn) >= 2
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in one_turn[1:]))
    (data / "test.jsonl").write_text(json.dumps(one_turn[0]) + "\n")
    run = tmp_path / "run"
    r = cli("train", str(REPO / "examples/bfcl/smoke.yaml"), f"data.train_file={data / 'train.jsonl'}",
            f"data.val_file={data / 'test.jsonl'}", "--run-dir", str(run), timeout=1500)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(math.isfinite(m["loss"]) for m in metrics)
    scored = 0
    for step in (1, 2):
        path = run / "episodes" / f"step_{step:06d}.jsonl"
        r = cli("check", str(path))
        assert r.returncode == 0 and "checked=2 violations=0" in r.stdout, r.stdout + r.stderr
        for line in path.read_text().splitlines():
            ep = json.loads(line)
            assert ep["metadata"]["conversation"]["kind"] == "bfcl"
            if ep["status"] in ("ok", "truncated"):  # scored by BFCL's checker: its verdict and version
                meta = ep["reward_metadata"]
                assert meta["scorer"].startswith("bfcl-eval ") and "valid" in meta and meta["official"] is False
                assert ep["reward"] in (0.0, 1.0)
                # the checker replayed the turn (state and responses), not the turn-count pre-check
                assert meta["valid"] or meta["error_type"] != "multi_turn:force_terminated", meta
                scored += 1
    assert scored >= 1
    assert (run / "checkpoints" / "latest").read_text() == "step_000002"
