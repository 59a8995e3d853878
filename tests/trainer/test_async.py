"""Asynchronous training (``rollout.max_staleness``): staleness 0 through the asynchronous machinery
equals the synchronous trainer exactly; K = 1 pins every episode to one weight version and stays
within it; the HF engine serves published versions side by side; unsupported settings are refused
in one line before any work."""

import hashlib
import json

import pytest
import torch
from helpers import REPO, chat_prompt_ids, cli

from agentboost.episodes.record import read_episodes
from agentboost.run.config import load_config
from agentboost.sampling.protocol import SamplerError, SamplingParams
from agentboost.trainer.loop import Trainer

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
# the smallest run that still trains every step: one task, groups of 3 (length_reward tells them
# apart), one worker slot so that every engine batch is one request (HF generate draws one random
# stream per batch: equal runs need equal batches), no validation
LEAN = ["run.steps=3", "data.tasks_per_step=1", "data.group_size=3", "data.val_file=", "agent.max_model_calls=2",
        "sampling.max_new_tokens=16", "run.slots=1", "run.checkpoint_every=0", "optim.lr=1e-3",
        "reward.name=helpers:length_reward"]


class _PipelinedAtZero(Trainer):
    pipeline_at_zero = True


def _train(cls, run_dir, overrides):
    trainer = cls(load_config(SMOKE, LEAN + overrides), run_dir, log=lambda m: None)
    trainer.run()
    params = [(k, v.detach().clone()) for k, v in trainer.model.named_parameters() if v.requires_grad]
    digest = hashlib.sha256(b"".join(v.float().numpy().tobytes() for _, v in params)).hexdigest()
    episodes = [list(read_episodes(run_dir / "episodes" / f"step_{s:06d}.jsonl")) for s in (1, 2, 3)]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return digest, params, episodes, metrics


def _tokens(episodes):
    return [[(ep.task_id, ep.metadata["sample"], ep.status, [list(c.prompt_ids) + list(c.response_ids) for c in ep.calls])
             for ep in step] for step in episodes]


@pytest.mark.slow
def test_staleness_zero_through_the_async_machinery_equals_the_synchronous_trainer(tmp_path, smollm2_path):
    sync_digest, sync_params, sync_eps, sync_m = _train(Trainer, tmp_path / "sync", [])
    async_digest, async_params, async_eps, async_m = _train(_PipelinedAtZero, tmp_path / "async", [])
    # every step trained (else later steps would not depend on the earlier updates)
    assert all(m["trained_tokens"] > 0 for m in sync_m), [m["trained_tokens"] for m in sync_m]
    assert any(torch.count_nonzero(v) for k, v in sync_params if "lora_B" in k), "the adapter did not change"
    assert _tokens(async_eps) == _tokens(sync_eps)
    assert async_digest == sync_digest
    # the synchronous trainer samples the live model; the asynchronous one the published snapshot of
    # the newest weights, pinned per episode and recorded on every call
    for step, eps in enumerate(async_eps):
        for ep in eps:
            assert ep.metadata["weight_version"] == step and ep.metadata["staleness"] == 0
            assert {c.weight_version for c in ep.calls} == {step}
    assert all("weight_version" not in ep.metadata for eps in sync_eps for ep in eps)
    assert [m["staleness_max"] for m in async_m] == [0, 0, 0]
    assert [m["loss"] for m in async_m] == [m["loss"] for m in sync_m]


@pytest.mark.slow
def test_staleness_one_pins_each_episode_to_one_version_within_the_bound(tmp_path, smollm2_path):
    _, _, episodes, metrics = _train(Trainer, tmp_path / "k1", ["rollout.max_staleness=1", "run.slots=2",
                                                                 "data.group_size=2"])
    seen = []
    for step, eps in enumerate(episodes, start=1):
        assert len(eps) == 2
        for ep in eps:
            v = ep.metadata["weight_version"]
            assert step - 2 <= v <= step - 1  # the update from step - 1 trains on it: at most 1 behind
            assert ep.metadata["staleness"] == step - 1 - v
            assert {c.weight_version for c in ep.calls} == {v}  # one version from start to end
            seen.append(ep.metadata["staleness"])
    # step 2 was admitted with step 1: its first episode started during step 1, on version 0
    assert 1 in seen
    for m in metrics:
        assert 0 <= m["staleness_max"] <= 1
        if m["trained_tokens"]:  # the correction's figures, on whenever K > 0
            assert m["importance_ratio_mean"] > 0 and 0 <= m["importance_truncated_frac"] <= 1
            assert 0 <= m["pg_clipfrac"] <= 1
        if m.get("parity_source") == "correction":  # the proximal pass, on the current version's rows only
            assert 0 < m["parity_tokens"] <= m["trained_tokens"] and m["parity_mean_abs_diff"] < m["parity_mean_bound"]
    # every step but the first samples some episodes from the weights the update starts from
    assert [m.get("parity_source") for m in metrics].count("correction") >= 1, [m.get("parity_source") for m in metrics]
    # `agentboost check` holds the run to its own bound (K = 1) and to one version per episode
    checked = cli("check", str(tmp_path / "k1"))
    assert checked.returncode == 0 and "problems=0" in checked.stdout, checked.stdout


def test_the_engine_serves_published_versions_side_by_side(smollm2_path):
    from agentboost.models.loading import load_policy
    from agentboost.sampling.hf_engine import HFEngine

    model, tok = load_policy(str(smollm2_path))
    engine = HFEngine(model, tok, max_batch_size=2)
    try:
        prompt = chat_prompt_ids(tok, "Count to five.")
        greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
        engine.publish_version(0, model, keep=2)
        before = engine.generate(prompt, greedy, version=0)
        assert before.weight_version == 0
        with torch.no_grad():  # an "update" of the live model
            model.get_output_embeddings().weight.mul_(0.5).add_(torch.randn_like(model.get_output_embeddings().weight))
        engine.publish_version(1, model, keep=2)
        again = engine.generate(prompt, greedy, version=0)
        assert (again.response_ids, again.logprobs) == (before.response_ids, before.logprobs)  # v0 unchanged
        after = engine.generate(prompt, greedy, version=1)
        assert after.weight_version == 1 and after.logprobs != before.logprobs
        engine.publish_version(2, model, keep=2)
        assert engine.served_versions() == [1, 2]
        with pytest.raises(SamplerError, match="weights version 0 is not served"):
            engine.submit(prompt, greedy, version=0)
    finally:
        engine.close()


@pytest.mark.parametrize("override,expected", [
    ("rollout.max_staleness=-1", "rollout.max_staleness"),
    ("rollout.engine=vllm", "not supported yet on rollout.engine 'vllm'"),
])
def test_unsupported_async_settings_are_refused_in_one_line(tmp_path, override, expected):
    extra = [] if override.startswith("rollout.max_staleness") else ["rollout.max_staleness=1"]
    r = cli("train", SMOKE, override, *extra, "--run-dir", str(tmp_path / "run"), timeout=120)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()


def test_unsupported_agent_kind_and_prompt_trainer_are_refused(tmp_path):
    from agentboost.run.config import ConfigError

    with pytest.raises(ConfigError, match="not supported yet with agent.kind 'http'"):
        load_config(SMOKE, ["rollout.max_staleness=1", "agent.kind=http", "agent.command=python agent.py",
                            "agent.system_prompt="])
    with pytest.raises(ConfigError, match="not supported with algorithm.policy: prompt"):
        load_config(SMOKE, ["rollout.max_staleness=1", "algorithm.policy=prompt", "prompt.instruction_pool=[x]"])
