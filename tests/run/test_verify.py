"""run/verify.py: a sync checked against the real hf policy server, calls from versions that were
never verified, the parity figures and their bounds, and ``check_run`` on a run's files (each check
also shown failing). The faults against a real vLLM server and whole runs: test_verify_vllm.py and
tests/trainer/test_verify_runs.py."""

import json

import pytest
import torch
from helpers import model_call

from agentboost.episodes.record import Episode, EpisodeWriter, build_segments
from agentboost.run import verify


def tiny_peft():
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    return get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False)).eval()


@pytest.fixture
def hf_server(smollm2_path):
    from transformers import AutoTokenizer

    from agentboost.sampling.policy_server import HFPolicyServer

    server = HFPolicyServer.start(tiny_peft(), AutoTokenizer.from_pretrained(str(smollm2_path)), max_batch_size=2)
    yield server
    server.close()


def test_a_sync_is_recorded_and_a_version_the_engine_does_not_serve_is_named(hf_server, tmp_path):
    model = hf_server.engine.model
    ledger = verify.WeightLedger(tmp_path, truncate_after_version=-1)
    hf_server.publish(model, 1)
    record = verify.verify_sync(hf_server, model, 1, hf_server.weight_sync(), "float32", step=1, ledger=ledger)
    assert record["match"] and record["sync"] == "hf-lora" and record["tensors"] == 2
    assert record["trainer_digest"] == record["engine_digest"]
    with torch.no_grad():  # the next update, never published: the engine still says version 1
        next(p for n, p in model.named_parameters() if "lora_B" in n).add_(1e-3)
    with pytest.raises(verify.WeightsMismatch, match=r"weight version 2 \(hf-lora sync.*samplers are told version 1, "
                                                     r"not 2"):
        verify.verify_sync(hf_server, model, 2, "hf-lora", "float32", step=2, ledger=ledger)
    rows = [json.loads(line) for line in (tmp_path / verify.LEDGER).read_text().splitlines()]
    assert [(r["version"], r["match"]) for r in rows] == [(1, True), (2, False)]
    assert ledger.verified(1) and not ledger.verified(2) and not ledger.verified(None)


def episode(eid: str, versions: list[int | None]) -> Episode:
    calls, prompt = [], [1, 2, 3]
    for i, v in enumerate(versions):
        calls.append(model_call(prompt, [10 + i, 11 + i], weight_version=v))
        prompt = prompt + [10 + i, 11 + i, 5]
    return Episode(episode_id=eid, task_id="t", group_id="t:0", calls=calls, segments=build_segments(calls))


def test_calls_must_come_from_a_verified_version_the_step_samples(tmp_path):
    ledger = verify.WeightLedger(tmp_path, truncate_after_version=-1)
    ledger.add({"version": 1, "match": True})
    ledger.add({"version": 2, "match": False})
    verify.check_calls([episode("a", [1, 1])], {1}, ledger, step=2)  # all well
    with pytest.raises(verify.UnsyncedVersion) as e:
        verify.check_calls([episode("a", [1, None]), episode("b", [2, 5]), episode("c", [1])], {3, 1}, ledger, step=3)
    assert str(e.value) == ("step 3: 1 call from version 2 (its fingerprint did not match); 1 call from version 5 "
                            "(never synced); 1 call from version None (no version reported); expected version 1 or 3")
    with pytest.raises(verify.UnsyncedVersion, match="2 calls from version 1 \\(not a version this step samples\\)"):
        verify.check_calls([episode("a", [1, 1])], {2}, ledger, step=3)


def test_parity_figures_and_bounds():
    sampler = torch.tensor([-1.0, -2.0, -0.5, -3.0], dtype=torch.float64)
    stats = verify.parity_stats(sampler + torch.tensor([1e-6, -2e-6, 0.0, 4e-6], dtype=torch.float64), sampler)
    assert stats["parity_tokens"] == 4 and stats["parity_max_abs_diff"] == pytest.approx(4e-6, rel=1e-3)
    assert stats["parity_mean_abs_diff"] == pytest.approx(1.75e-6, rel=1e-3)
    bounds = verify.parity_bounds("hf", "float32")
    assert bounds == verify.DEFAULT_PARITY_BOUNDS[("hf", "float32")]
    assert verify.parity_problem(stats, bounds) is None
    assert verify.parity_bounds("vllm", "float16") == verify.DEFAULT_PARITY_BOUNDS[("vllm", "bfloat16")]
    assert verify.parity_bounds("hf", "float32", mean=0.5) == (0.5, bounds[1])  # configured wins
    shifted = verify.parity_stats(sampler + 0.2, sampler)  # e.g. log-probs at another temperature
    problem = verify.parity_problem(shifted, bounds)
    assert problem.startswith("mean |Δ| 0.2 > ") and "p99 |Δ| 0.2 >" in problem and "over 4 tokens" in problem
    assert verify.parity_problem({"parity_tokens": 0}, bounds) is None  # nothing sampled, nothing to compare
    nan = verify.parity_stats(torch.tensor([float("nan")]), torch.tensor([0.0]))
    assert verify.parity_problem(nan, bounds)  # a non-finite figure never passes


def write_run(root, ledger_rows, metric_rows, episodes_by_file):
    root.mkdir()
    (root / verify.LEDGER).write_text("".join(json.dumps(r) + "\n" for r in ledger_rows))
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metric_rows))
    (root / "episodes").mkdir()
    for name, eps in episodes_by_file.items():
        with EpisodeWriter(root / "episodes" / name) as w:
            for ep in eps:
                w.write(ep)
    return root


def test_check_run_passes_a_verified_run_and_names_every_problem(tmp_path):
    good = {"parity_tokens": 10, "parity_mean_abs_diff": 1e-6, "parity_p99_abs_diff": 1e-5,
            "parity_max_abs_diff": 2e-5, "parity_mean_bound": 1e-3, "parity_p99_bound": 1e-2}
    # step 2 had no update (no version 2): step 3 and the validation after it still sample version 1
    run = write_run(tmp_path / "ok", [{"version": 0, "step": 0, "match": True}, {"version": 1, "step": 1, "match": True}],
                    [{"step": 1, **good}, {"step": 2, **good}, {"step": 3, **good}],
                    {"step_000001.jsonl": [episode("a", [0, 0])], "step_000002.jsonl": [episode("b", [1])],
                     "step_000003.jsonl": [episode("c", [1])], "val_step_000003.jsonl": [episode("v", [1])]})
    assert verify.check_run(run) == ([], {"versions": 2, "steps": 3, "calls": 5, "episodes": 4})
    bad = write_run(tmp_path / "bad", [{"version": 1, "step": 1, "match": True},
                                       {"version": 0, "step": 2, "match": False, "problem": "x"}],
                    [{"step": 1, **good, "parity_mean_abs_diff": 0.3}, {"step": 2}],
                    {"step_000002.jsonl": [episode("b", [0, 7, 1])], "step_000001.jsonl": [episode("a", [1])]})
    problems, _ = verify.check_run(bad)
    assert problems == [
        "weights.jsonl:2: version 0 after version 1 (versions must not go back)",
        "weights.jsonl:2: version 0 did not match: x",
        "step 1: log-prob parity mean |Δ| 0.3 > 0.001 (max |Δ| 2e-05 over 10 tokens)",
        "step 2: no log-prob parity figures (verify.logprob_parity was off)",
        "step_000001.jsonl: a: version 1 sampled for step 1 (the newest synced by then is None)",
        "step_000002.jsonl: b: calls from versions [0, 1, 7] (an episode runs on one version from start to end)",
        "step_000002.jsonl: b: version 0's fingerprints differ",
        "step_000002.jsonl: b: version 7 was never synced",
    ]
    assert verify.check_run(tmp_path / "bad", max_staleness=0)[0] == problems
    (bad / verify.LEDGER).unlink()
    assert "weights.jsonl: missing" in verify.check_run(bad)[0][0]


def test_a_check_turned_off_says_so_and_checks_nothing(hf_server, smollm2_path, tmp_path):
    from transformers import AutoTokenizer

    from agentboost.run.config import TrainConfig
    from agentboost.trainer.verify import StepVerifier

    cfg = TrainConfig()
    cfg.verify.weights = cfg.verify.logprob_parity = False
    lines, events = [], []

    class Metrics:
        log_event = staticmethod(events.append)

    verifier = StepVerifier(cfg, tmp_path, hf_server, "hf", hf_server.engine.model,
                            AutoTokenizer.from_pretrained(str(smollm2_path)), log=lines.append,
                            metrics=Metrics())
    off = ["warning: verify.weights is off: weight syncs are not fingerprinted: nothing checks that the engine "
           "serves the weights just trained",
           "warning: verify.logprob_parity is off: the sampler's log-probs are not compared with the trainer's"]
    assert lines == off and [("warning: " + e["warning"], e["step"]) for e in events] == [(x, 0) for x in off]
    # a version the engine was never told about passes unchecked, and nothing is recorded
    assert verifier.after_publish(7, 1) == {} and verifier.after_rollouts([], 1) == {}
    assert not (tmp_path / "weights.jsonl").exists()


def test_check_run_holds_an_async_run_to_its_own_staleness_bound(tmp_path):
    good = {"parity_tokens": 0}
    ledger = [{"version": 0, "step": 0, "match": True}, {"version": 1, "step": 1, "match": True},
              {"version": 2, "step": 2, "match": True}]
    one_behind = episode("late", [0])  # sampled for step 3 from version 0: 2 versions behind version 2
    one_behind.metadata["weight_version"] = 0
    pinned_elsewhere = episode("moved", [2])
    pinned_elsewhere.metadata["weight_version"] = 1
    # step 2 sampled nothing from the weights its update started from: no parity figures, and none owed
    run = write_run(tmp_path / "k", ledger, [{"step": 1, **good}, {"step": 2, "parity_episodes": 0}, {"step": 3, **good}],
                    {"step_000001.jsonl": [episode("a", [0])], "step_000002.jsonl": [episode("b", [1])],
                     "step_000003.jsonl": [one_behind, pinned_elsewhere]})
    late = "step_000003.jsonl: late: version 0 sampled for step 3 (the newest synced by then is 2)"
    moved = "step_000003.jsonl: moved: pinned to version 1, its calls report version 2"
    # no config.yaml: a synchronous run; the bound is the run's own rollout.max_staleness once it has one
    assert verify.check_run(run)[0] == [late, moved]
    (run / "config.yaml").write_text("rollout:\n  max_staleness: 1\n")
    assert verify.check_run(run)[0] == [late, moved]
    (run / "config.yaml").write_text("rollout:\n  max_staleness: 2\n")
    assert verify.check_run(run)[0] == [moved]
    assert verify.check_run(run, max_staleness=0)[0] == [late, moved]  # an explicit bound wins

