"""Real SmolLM2 generation: samplers, batching, logprobs and the demo rollout."""

import asyncio
import json

import aiohttp
import pytest
import torch
from helpers import chat_prompt_ids, cli

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.episodes.record import check_episode, read_episodes
from agentboost.rollout.episode_runner import run_episode
from agentboost.sampling.completions_server import CompletionsServer
from agentboost.sampling.hf_engine import EngineSampler
from agentboost.sampling.http_sampler import HttpSampler, parse_completion
from agentboost.sampling.protocol import SamplerError, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)


@pytest.fixture(scope="module")
def server(smollm2_engine):
    srv = CompletionsServer(smollm2_engine)
    url = srv.start_in_thread()
    yield url
    srv.stop_thread()


def test_logprobs_are_the_policys_at_the_sampling_temperature(smollm2_engine):
    tok = smollm2_engine.tokenizer
    p = chat_prompt_ids(tok)
    params = SamplingParams(temperature=0.7, max_new_tokens=12, seed=3)
    res = smollm2_engine.generate(p, params)
    assert 0 < len(res.response_ids) <= 12 and len(res.logprobs) == len(res.response_ids)
    with torch.no_grad():
        logits = smollm2_engine.model(torch.tensor([p + res.response_ids])).logits[0].float()
    lp = torch.log_softmax(logits / 0.7, dim=-1)
    expected = [float(lp[len(p) - 1 + i, t]) for i, t in enumerate(res.response_ids)]
    assert res.logprobs == pytest.approx(expected, abs=2e-3)


def test_stop_token_is_included_and_finish_reasons(smollm2_engine):
    tok = smollm2_engine.tokenizer
    done = smollm2_engine.generate(chat_prompt_ids(tok), SamplingParams(temperature=0.0, max_new_tokens=64))
    assert done.finish_reason == "stop" and done.response_ids[-1] == tok.eos_token_id
    cut = smollm2_engine.generate(chat_prompt_ids(tok, "Write a long story about a cat."), SamplingParams(temperature=0.0, max_new_tokens=5))
    assert cut.finish_reason == "length" and len(cut.response_ids) == 5


def test_concurrent_requests_are_batched(smollm2_engine):
    tok = smollm2_engine.tokenizer
    before = smollm2_engine.stats.batches
    prompts = [chat_prompt_ids(tok, f"What is {i} + {i}?") for i in range(6)]
    sampler = EngineSampler(smollm2_engine)

    async def go():
        return await asyncio.gather(*(sampler.sample(p, SamplingParams(temperature=1.0, max_new_tokens=8 + i))
                                      for i, p in enumerate(prompts)))

    results = asyncio.run(go())
    assert smollm2_engine.stats.batches - before < len(prompts)  # fewer batches than requests
    assert smollm2_engine.stats.max_batch_seen > 1
    for i, r in enumerate(results):  # each row keeps its own token limit
        assert len(r.response_ids) <= 8 + i and len(r.logprobs) == len(r.response_ids)


def test_http_sampler_honours_vllm_contract(smollm2_engine, server):
    tok = smollm2_engine.tokenizer
    p = chat_prompt_ids(tok)
    direct = smollm2_engine.generate(p, GREEDY)

    async def go():
        sampler = HttpSampler(server)
        via_http = await sampler.sample(p, GREEDY)
        # older vLLM: no token_ids field, ids recovered from "token_id:<id>" logprob tokens
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{server}/v1/completions", json={
                "model": "agentboost-policy", "prompt": p, "max_tokens": GREEDY.max_new_tokens,
                "temperature": 0.0, "logprobs": 0, "return_tokens_as_token_ids": True}) as r:
                legacy = await r.json()
            async with s.post(f"{server}/v1/completions", json={"prompt": "text prompt"}) as r:
                bad = (r.status, await r.json())
        await sampler.close()
        return via_http, legacy, bad

    via_http, legacy, bad = asyncio.run(go())
    assert via_http.response_ids == direct.response_ids
    assert via_http.logprobs == pytest.approx(direct.logprobs, abs=1e-5)
    assert via_http.finish_reason == direct.finish_reason
    assert "token_ids" not in legacy["choices"][0]
    assert legacy["choices"][0]["logprobs"]["tokens"][0].startswith("token_id:")
    assert parse_completion(legacy).response_ids == direct.response_ids
    assert bad[0] == 400 and "token ids" in bad[1]["message"]


def test_server_reports_the_weight_version_it_serves(smollm2_engine):
    # the rLLM path's CPU rollout (integrations/rllm/cpu.py) sets it after every weight sync; the
    # sampler records it on each call, so an episode says which weights sampled it
    srv = CompletionsServer(smollm2_engine)
    url = srv.start_in_thread()
    p = chat_prompt_ids(smollm2_engine.tokenizer)
    params = SamplingParams(temperature=0.0, max_new_tokens=4)

    async def go():
        sampler = HttpSampler(url)
        try:
            unknown = await sampler.sample(p, params)
            srv.weight_version = 3
            known = await sampler.sample(p, params)
        finally:
            await sampler.close()
        return unknown, known

    try:
        unknown, known = asyncio.run(go())
    finally:
        srv.stop_thread()
    assert unknown.weight_version is None and known.weight_version == 3
    assert known.response_ids == unknown.response_ids  # the same weights: only the label changed


def test_http_sampler_reports_unreachable_server():
    async def go():
        sampler = HttpSampler("http://127.0.0.1:9", max_retries=1, timeout_s=2)
        try:
            await sampler.sample([1, 2, 3], GREEDY)
        finally:
            await sampler.close()

    with pytest.raises(SamplerError, match="failed after 2 tries"):
        asyncio.run(go())


def test_real_episodes_through_http_satisfy_the_invariant(smollm2_engine, server):
    renderer = ChatRenderer(smollm2_engine.tokenizer)
    assert not renderer.supports_tools  # SmolLM2: tools go into the system prompt

    async def go():
        sampler = HttpSampler(server)
        eps = await asyncio.gather(*(
            run_episode(StrandsAgentSpec(max_model_calls=3), {"task_id": "t", "question": "What is 17 + 25?"},
                        sampler, renderer, SamplingParams(temperature=1.0, max_new_tokens=48, seed=i))
            for i in range(3)))
        await sampler.close()
        return eps

    for ep in asyncio.run(go()):
        assert ep.calls, ep.error
        assert check_episode(ep) == []
        first = smollm2_engine.tokenizer.decode(ep.calls[0].prompt_ids)
        assert '"name": "calculator"' in first and "<tools>" in first


def test_demo_rollout_command(tmp_path, smollm2_path):
    out = tmp_path / "episodes.jsonl"
    proc = cli("rollout", "--prompt", "What is 17 + 25?", "--samples", "2", "--out", str(out), "--max-new-tokens", "64",
               timeout=600)
    assert proc.returncode == 0, proc.stderr
    episodes = list(read_episodes(out))
    assert len(episodes) == 2
    assert {ep.group_id for ep in episodes} == {"prompt-0"}
    for ep in episodes:
        assert ep.status in ("ok", "truncated"), ep.error
        assert check_episode(ep) == []
        assert ep.calls and ep.segments
        json.dumps(ep.to_dict())
    assert "status ok" in proc.stdout and "model calls" in proc.stdout
    check = cli("check", str(out))
    assert check.returncode == 0 and "checked=2 violations=0" in check.stdout


@pytest.mark.slow
def test_real_model_through_the_pool_with_a_reward(tmp_path, smollm2_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": f"t{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
                             + "\n" for i in range(1, 4)))
    out = tmp_path / "episodes.jsonl"
    proc = cli("rollout", "--tasks", str(tasks), "--samples", "2", "--reward", "exact_answer", "--workers", "2",
               "--slots", "2", "--max-new-tokens", "48", "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr
    episodes = list(read_episodes(out))
    assert sorted(ep.task_id for ep in episodes) == ["t1", "t1", "t2", "t2", "t3", "t3"]
    assert len({ep.metadata["worker_pid"] for ep in episodes}) == 2
    for ep in episodes:
        assert check_episode(ep) == []
        if ep.status in ("ok", "truncated"):
            assert ep.reward in (0.0, 1.0) and ep.reward_components["outcome"] == ep.reward
    assert "reward mean" in proc.stdout and "groups (with failures)" in proc.stdout


def test_a_jobs_seed_reaches_its_requests_through_the_pool(server, smollm2_path):
    """``pool.submit(..., seed=S)``: the episode's requests carry seeds derived from S (what a training
    step on vLLM gives its episodes: the server's own RNG is not in a checkpoint, so without them a
    resumed run sampled otherwise than the untouched one). Same seed, same tokens; another, other tokens."""
    from agentboost.rollout.pool import StrandsProcessPool
    from agentboost.sampling.spec import SamplerSpec

    sampler = SamplerSpec(tokenizer=str(smollm2_path), url=server,
                          sampling=SamplingParams(temperature=1.0, max_new_tokens=12))
    task = {"task_id": "t", "question": "Name three colours."}
    with StrandsProcessPool(StrandsAgentSpec(), sampler, workers=1, slots=1) as pool:
        eps = [pool.submit(task, seed=s).result(timeout=120) for s in (11, 11, 12)]
    tokens = [[c.response_ids for c in ep.calls] for ep in eps]
    assert all(ep.status == "ok" or ep.status == "truncated" for ep in eps), [(e.status, e.error) for e in eps]
    assert tokens[0] == tokens[1] and tokens[0] != tokens[2]
