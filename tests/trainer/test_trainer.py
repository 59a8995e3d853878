"""The local trainer: advantages and losses against veRL's definitions, logprob alignment with the
sampler on real episodes, a smoke run, and resume after SIGKILL."""

import asyncio
import json
import math
import re
from pathlib import Path

import pytest
import torch
from helpers import REPO, cli, model_call

from agentboost.episodes.passk import pass_at_k
from agentboost.episodes.record import Episode, build_segments, read_episodes
from agentboost.run.config import load_config
from agentboost.run.lifecycle import TaskStream
from agentboost.run.metrics import figure_text, validation_figure
from agentboost.trainer import batch as batching
from agentboost.trainer import loss as losses
from agentboost.trainer.loop import Trainer

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")


def episode(eid, group, reward, prompt, response):
    calls = [model_call(prompt, response, logprob=-0.5)]
    return Episode(episode_id=eid, task_id=group, group_id=group, calls=calls, segments=build_segments(calls),
                   reward=reward, reward_components={"outcome": reward})


def test_grpo_and_rloo_advantages_match_their_definitions():
    eps = [episode(f"e{i}", g, r, [1, 2], [3, 4]) for i, (g, r) in
           enumerate([("a", 1.0), ("a", 0.0), ("a", 0.0), ("a", 1.0), ("b", 1.0), ("b", 1.0), ("c", 0.5), ("c", 0.0)])]
    res = losses.compute_advantages(eps, "grpo")
    a = torch.tensor([1.0, 0.0, 0.0, 1.0])
    expected = ((a - a.mean()) / (a.std() + 1e-6)).tolist()  # veRL: unbiased std, epsilon 1e-6
    assert [res.by_episode[f"e{i}"] for i in range(4)] == pytest.approx(expected, abs=1e-5)
    assert res.by_episode["e4"] == 0.0 and res.by_episode["e5"] == 0.0
    assert res.informative_groups == {"a", "c"} and res.all_equal_groups == 1 and res.groups == 3
    rloo = losses.compute_advantages(eps, "rloo")
    # leave-one-out baseline: r_i - mean of the others
    assert rloo.by_episode["e0"] == pytest.approx(1.0 - 1 / 3) and rloo.by_episode["e6"] == pytest.approx(0.5)


def test_clipped_loss_matches_the_ppo_formula():
    torch.manual_seed(0)
    rows = [batching.TrainRow("e0", "g", [5, 6, 7, 8], [0, 1, 1, 0], [0, -1.0, -2.0, 0], advantage=1.5),
            batching.TrainRow("e1", "g", [5, 6, 9], [0, 0, 1], [0, 0, -0.3], advantage=-0.7)]
    batch = batching.pad_batch(rows, pad_id=0)
    assert batch["response_mask"].tolist() == [[1, 1, 0], [0, 1, 0]]
    assert torch.allclose(batch["old_log_prob"], torch.tensor([[-1.0, -2.0, 0.0], [0.0, -0.3, 0.0]]))
    log_prob = torch.tensor([[-0.5, -2.5, 0.0], [0.0, -0.1, 0.0]])
    cfg = losses.actor_config(0.2, 0.28, 3.0, "seq-mean-token-mean")
    loss, metrics = losses.policy_loss(log_prob, batch, cfg)
    ratio = torch.exp(log_prob - batch["old_log_prob"])
    adv = batch["advantages"]
    per_tok = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.28))
    per_tok = torch.where(adv < 0, torch.minimum(per_tok, -adv * 3.0), per_tok)
    m = batch["response_mask"]
    expected = (((per_tok * m).sum(1) / m.sum(1)).mean())  # seq-mean-token-mean
    assert float(loss) == pytest.approx(float(expected), abs=1e-6)
    assert 0 < metrics["actor/pg_clipfrac"] <= 1


def test_recomputed_logprobs_equal_the_samplers_on_real_episodes(smollm2_engine):
    """The training sequence, its shift and the temperature are right: at the start of an update
    the policy's log-probs of the sampled tokens equal what the sampler reported (ratio 1)."""
    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.hf_engine import EngineSampler
    from agentboost.sampling.protocol import SamplingParams

    async def go():
        return await asyncio.gather(*(run_episode(StrandsAgentSpec(max_model_calls=2),
                                                  {"task_id": f"t{i}", "question": f"What is {i} + 4?"},
                                                  EngineSampler(smollm2_engine), ChatRenderer(smollm2_engine.tokenizer),
                                                  SamplingParams(temperature=0.8, max_new_tokens=24, seed=i))
                                      for i in range(3)))

    eps = asyncio.run(go())
    for ep in eps:
        ep.reward = 0.0
    rows = batching.rows_from_episodes(eps)
    batch = batching.pad_batch(rows, smollm2_engine.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = losses.token_logprobs(smollm2_engine.model, batch, temperature=0.8)
    m = batch["response_mask"].bool()
    assert m.sum() > 10
    assert torch.allclose(logp[m], batch["old_log_prob"][m], atol=2e-3)


def test_micro_batches_respect_the_token_budget():
    rows = [batching.TrainRow(str(i), "g", [1] * n, [1] * n, [0.0] * n) for i, n in enumerate([10, 50, 20, 40, 30, 100])]
    batches = batching.micro_batches(rows, token_budget=100)
    assert sorted(r.episode_id for b in batches for r in b) == [str(i) for i in range(6)]
    for b in batches:
        assert len(b) == 1 or max(len(r.input_ids) for r in b) * len(b) <= 100


def test_pass_at_k_and_task_stream():
    assert pass_at_k(4, 0, 1) == 0 and pass_at_k(4, 4, 1) == 1 and pass_at_k(4, 1, 1) == 0.25
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)
    tasks = [{"task_id": str(i)} for i in range(5)]
    a = TaskStream(tasks, 3, seed=1, shuffle=True)
    first, second = a.next_batch(), a.next_batch()
    b = TaskStream(tasks, 3, seed=1, shuffle=True)
    b.next_batch()
    state = b.state()
    c = TaskStream(tasks, 3, seed=1, shuffle=True)
    c.load(state)
    assert c.next_batch() == second
    assert sorted(t["task_id"] for t in first + second[:2]) == [str(i) for i in range(5)]  # an epoch, then the next


@pytest.mark.slow
def test_smoke_run_updates_the_adapter_and_writes_everything(tmp_path, smollm2_path):
    cfg = load_config(SMOKE, ["run.steps=2", "data.tasks_per_step=2", "data.group_size=3", "sampling.max_new_tokens=24",
                              "validation.max_tasks=2", "validation.max_new_tokens=24", "reward.name=helpers:length_reward"])
    trainer = Trainer(cfg, tmp_path / "run", log=lambda m: None)
    base = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if "lora_B" in k}
    seen = []  # after_step: once per step, after its update and checkpoint, with the step's metrics
    result = trainer.run(after_step=lambda t, m: seen.append(
        (t.step, m["step"], (t.run_dir / "checkpoints" / "latest").read_text(),
         any(torch.count_nonzero(v) > 0 for k, v in t.model.named_parameters() if "lora_B" in k))))
    # smoke.yaml validates only at the end: the first and the last validation are that one
    only = {"step": 2, "pass@1": result["validation"]["last"]["pass@1"],
            "tool_call_rate": result["validation"]["last"]["tool_call_rate"], "episodes": 4}
    # the figure named for what it is, in the words of Run.status() and the job service
    only["figure"] = figure_text(validation_figure(json.loads((tmp_path / "run" / "validation.jsonl")
                                                              .read_text().splitlines()[-1])))
    assert re.fullmatch(r"pass@1 \d\.\d{3} (± \d\.\d{3}|no 95% CI from \d+ episodes?) \(2 tasks x 2 samples at "
                        r"temperature [\d.]+, 4 episodes\)", only["figure"]), only["figure"]
    # the one validation picks the best checkpoint: the last step's
    best = {"checkpoint": "step_000002", "step": 2, "metric": "val_pass@1", "value": only["pass@1"],
            "ci95": result["best_checkpoint"]["ci95"]}
    assert result == {"steps": 2, "stopped": "reached 2 steps", "stop_requested": False,
                      "validation": {"first": only, "last": only}, "best_checkpoint": best}
    assert 0.0 <= only["pass@1"] <= 1.0 and 0.0 <= only["tool_call_rate"] <= 1.0
    assert seen == [(1, 1, "step_000001", True), (2, 2, "step_000002", True)]
    assert json.loads((tmp_path / "run" / "result.json").read_text()) == result
    after = {k: v for k, v in trainer.model.named_parameters() if "lora_B" in k}
    assert all(torch.count_nonzero(base[k]) == 0 for k in base)  # LoRA B starts at zero
    assert any(torch.count_nonzero(after[k]) > 0 for k in after), "the adapter did not change"
    run = tmp_path / "run"
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert math.isfinite(m["loss"]) and m["grad_norm"] > 0 and m["trained_tokens"] > 0
        assert m["all_equal_group_rate"] == 0.0 and sum(m["statuses"].values()) == 6
        # the policy served is the policy trained: each publish verified, each step's log-probs checked
        assert m["weights_version"] == m["step"] and len(m["weights_fingerprint"]) == 16
        assert m["parity_tokens"] > 0 and m["parity_mean_abs_diff"] < m["parity_mean_bound"]
        assert m["parity_p99_abs_diff"] < m["parity_p99_bound"]
        # read from the update's own first pass: every token it trained on, no forward pass of its own
        assert m["parity_source"] == "update" and m["parity_tokens"] == m["trained_tokens"]
    synced = [json.loads(line) for line in (run / "weights.jsonl").read_text().splitlines()]
    assert [(r["version"], r["sync"], r["match"]) for r in synced] == [(0, "hf-lora", True), (1, "hf-lora", True),
                                                                     (2, "hf-lora", True)]
    checked = cli("check", str(run))
    episodes = sum(len(f.read_text().splitlines()) for f in (run / "episodes").glob("*.jsonl"))  # training + validation
    assert checked.returncode == 0 and f"versions=3 steps=2 episodes={episodes} " in checked.stdout, checked.stdout
    assert (run / "checkpoints" / "latest").read_text() == "step_000002"
    assert (run / "checkpoints" / "step_000002" / "adapter" / "adapter_model.safetensors").is_file()
    assert (run / "plots" / "reward.png").is_file() and any((run / "tensorboard").iterdir())
    assert json.loads((run / "validation.jsonl").read_text().splitlines()[-1])["val_tasks"] == 2
    assert len(list(read_episodes(run / "episodes" / "step_000001.jsonl"))) == 6
    r = cli("export", str(run), "--out", str(tmp_path / "x.jsonl"), "--limit", "4")
    assert r.returncode == 0 and "exported 4 episodes" in r.stdout
    assert all("segments" in json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines())
    # what `agentboost eval --model RUN_DIR` loads: the newest intact checkpoint on the base model
    from agentboost.run.checkpoint import load_policy_from_run

    loaded, _, desc, _ = load_policy_from_run(run)
    assert "step_000002" in desc
    ours = dict(loaded.named_parameters())
    for k, v in after.items():
        assert torch.equal(ours[k].detach(), v.detach()), k


# killed at any moment and resumed (before the first checkpoint too), a damaged latest checkpoint: tests/run/test_chaos.py


def test_resume_of_a_directory_that_is_not_a_run_is_a_named_error(tmp_path):
    r = cli("train", "--resume", str(tmp_path / "nope"), cwd=REPO, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "is not a run directory (it has no config.yaml)" in r.stderr
    assert not (tmp_path / "nope").exists()  # nothing created
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("{}")
    from agentboost.run.checkpoint import CheckpointError, load_latest_intact

    with pytest.raises(CheckpointError, match="has no checkpoint to resume from"):
        load_latest_intact(tmp_path / "run", None, None, None, True)


def test_checkpoint_manifest_detects_damage_and_state_loads_weights_only(tmp_path):
    from agentboost.run.checkpoint import (
        load_latest_intact,
        save_checkpoint,
        verify_checkpoint,
    )

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    for step in (1, 2):
        save_checkpoint(tmp_path, step, _Saving(model), opt, sched, {"data": {}}, lora=False)
    two = tmp_path / "checkpoints" / "step_000002"
    assert verify_checkpoint(two) is None
    (two / "rng.pt").unlink()
    assert verify_checkpoint(two) == "rng.pt is missing"
    opt2 = torch.optim.AdamW(model.parameters(), lr=0.1)
    path, state, skipped = load_latest_intact(tmp_path, _Saving(model), opt2, sched, lora=False)
    assert path.name == "step_000001" and state["step"] == 1
    assert skipped == ["checkpoint step_000002 is damaged (rng.pt is missing); trying an older one"]
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]


class _Saving(torch.nn.Module):
    """A plain module with save_pretrained, standing in for a transformers model in a unit test."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def save_pretrained(self, path, safe_serialization=True):
        from safetensors.torch import save_file

        Path(path).mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(Path(path) / "model.safetensors"))

