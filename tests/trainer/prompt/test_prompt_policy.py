"""The prompt policy (``algorithm.policy: prompt``): the artifact, demonstration turns in the agent's
history, the gate (a scripted optimizer's harmful edit rejected, its helpful one accepted, both with
their paired figures), checkpoint and resume, ``rollout --prompt-policy`` and ``eval --prompt-policy``.

The gate test's policy is scripted (a real Strands agent, the real calculator and reward, the
embedded tokenizer; the "model" answers from each task's solution depending on what its system
prompt says), so that a helpful and a harmful instruction have known effects."""

import json
import os
import random
import shutil

import pytest
import yaml
from helpers import cli

from agentboost.agents.demonstrations import solution_policy
from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec
from agentboost.episodes.record import read_episodes
from agentboost.run.config import ConfigError, load_config
from agentboost.run.prompt_policy import (
    Demonstration,
    PromptPolicy,
    PromptPolicyError,
    load_prompt_policy,
)
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedTurn
from agentboost.sampling.spec import SamplerSpec

HELPFUL = "Use the calculator for every sum."
HARMFUL = "Answer from memory, never use tools."


def _tasks(n, start=0):
    rows = []
    for i in range(start, start + n):
        a, b = 10 + i, 3 + i % 5
        rows.append({"task_id": f"t{i}", "question": f"Question {i}: what is {a} plus {b}?", "answer": str(a + b),
                     "solution": {"calls": [{"name": "calculator", "arguments": {"expression": f"{a} + {b}"}}],
                                  "answer": f"The answer is {a + b}."}})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def prompt_sensitive_script(tokenizer, tasks: str, tool_parser: str = "auto"):
    """Under the helpful instruction every answer is right (the solution's call, then its answer);
    under the harmful one every answer is wrong; otherwise right half the time, at random."""
    solve = solution_policy(tokenizer, tasks, tool_parser=tool_parser)

    def script(prompt_ids, index):
        prompt = tokenizer.decode(prompt_ids)
        if HARMFUL in prompt:
            return ScriptedTurn(text="The answer is 0.")
        if HELPFUL in prompt or index > 0 or random.random() < 0.5:
            return solve(prompt_ids, index)
        return ScriptedTurn(text="The answer is 0.")

    return script


def scripted_optimizer(contrast, edits):
    """Proposes ``edits`` in order, one per call (then nothing); checks what it was given."""
    assert contrast.high and contrast.low and all(h["advantage"] > 0 for h in contrast.high)
    assert all(x["advantage"] < 0 for x in contrast.low) and "calls calculator" in contrast.high[0]["transcript"]
    n = scripted_optimizer.calls = getattr(scripted_optimizer, "calls", 0) + 1
    return edits[n - 1] if n <= len(edits) else None


def _demo(task_id="d0", q="What is 2 + 2?", answer="The answer is 4."):
    return Demonstration(task_id=task_id, source="solution", messages=[
        {"role": "user", "content": [{"text": q}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "c1", "name": "calculator",
                                                       "input": {"expression": "2 + 2"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "4"}]}}]},
        {"role": "assistant", "content": [{"text": answer}]}])


def test_artifact_round_trips_and_refuses_bad_files(tmp_path):
    policy = PromptPolicy(system_prompt="Be exact.", instructions=[HELPFUL], demonstrations=[_demo()], version=2,
                          history=[{"step": 1, "accepted": True}])
    back = load_prompt_policy(policy.save(tmp_path / "p.json"))
    assert back == policy
    spec = back.apply(StrandsAgentSpec())
    assert spec.system_prompt == f"Be exact.\n{HELPFUL}" and len(spec.history) == 4
    spec.validate()
    with pytest.raises(AgentSpecError, match="no configuration keys"):
        spec.as_config()
    bad = policy.to_dict()
    bad["demonstrations"][0]["messages"] = bad["demonstrations"][0]["messages"][1:]  # starts with the assistant
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(PromptPolicyError, match=r"demonstrations\[0\] \(d0\): history\[0\] is a assistant turn"):
        load_prompt_policy(tmp_path / "bad.json")
    with pytest.raises(PromptPolicyError, match="no such file"):
        load_prompt_policy(tmp_path / "missing.json")
    (tmp_path / "old.json").write_text(json.dumps({**policy.to_dict(), "format": 99}))
    with pytest.raises(PromptPolicyError, match="format 99"):
        load_prompt_policy(tmp_path / "old.json")


def test_a_weights_run_starts_from_a_prompt_policy(tmp_path):
    """agent.prompt_policy: GRPO from the improved prompt (prompt first, then weights)."""
    from agentboost.run.assembly import agent_spec
    from agentboost.run.preflight import preflight

    train = _write(tmp_path / "train.jsonl", _tasks(4))
    path = PromptPolicy(system_prompt="Be exact.", instructions=[HELPFUL], demonstrations=[_demo()]).save(tmp_path / "p.json")
    spec = agent_spec(load_config(None, [f"data.train_file={train}", f"agent.prompt_policy={path}"]))
    assert spec.system_prompt == f"Be exact.\n{HELPFUL}" and len(spec.history) == 4
    cfg = load_config(None, [f"data.train_file={train}", f"agent.prompt_policy={tmp_path / 'none.json'}"])
    with pytest.raises(PromptPolicyError, match="none.json: no such file"):
        preflight(cfg)
    with pytest.raises(ConfigError, match="trains its own prompt policy"):
        load_config(None, [f"data.train_file={train}", f"agent.prompt_policy={path}", "algorithm.policy=prompt"])


def test_config_refuses_a_prompt_run_that_cannot_train(tmp_path):
    train = _write(tmp_path / "train.jsonl", _tasks(4))
    base = [f"data.train_file={train}", "algorithm.policy=prompt"]
    with pytest.raises(ConfigError, match="no candidate tier"):
        load_config(None, base + ["prompt.demonstrations=false"])
    with pytest.raises(ConfigError, match="warm_start trains weights"):
        load_config(None, base + ["warm_start.demonstrations=2"])
    with pytest.raises(ConfigError, match="algorithm.policy must be one of weights, prompt"):
        load_config(None, [f"data.train_file={train}", "algorithm.policy=prompts"])


def test_history_turns_are_prompt_not_episode(tmp_path, smollm2_path):
    """Demonstrations sit in the agent's history: the model's first prompt holds them (loss mask 0),
    the episode's messages, tool calls and answer are its own."""
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.rollout.pool import StrandsProcessPool

    tasks = _tasks(2)
    path = _write(tmp_path / "tasks.jsonl", tasks)
    spec = PromptPolicy(system_prompt="Be exact.", demonstrations=[_demo()]).apply(StrandsAgentSpec(max_model_calls=3))
    sampler = SamplerSpec(tokenizer=str(smollm2_path), kind="scripted",
                          script="agentboost.agents.demonstrations:solution_policy",
                          script_kwargs={"tasks": str(path)}, sampling=SamplingParams(max_new_tokens=64))
    with StrandsProcessPool(spec, sampler, StrandsEnv(reward="exact_answer"), workers=1, slots=2) as pool:
        episodes = pool.run(tasks)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    for ep, task in zip(episodes, tasks):
        assert ep.reward == 1.0 and ep.metadata["history_messages"] == 4
        assert ep.messages[0]["content"][0]["text"] == task["question"]  # the demonstration is not in the record
        assert len(ep.tool_calls) == 1 and ep.final_answer == task["solution"]["answer"]
        first = tok.decode(ep.calls[0].prompt_ids)
        assert "What is 2 + 2?" in first and first.index("What is 2 + 2?") < first.index(task["question"])
        seg = ep.segments[0]
        masked = [t for t, m in zip(seg.input_ids, seg.loss_mask) if m]
        assert masked == [t for c in ep.calls for t in c.response_ids]  # the history trains nothing


def _prompt_config(tmp_path, **prompt):
    train = _write(tmp_path / "train.jsonl", _tasks(8))
    gate = _write(tmp_path / "gate.jsonl", _tasks(16, start=100))
    val = _write(tmp_path / "val.jsonl", _tasks(4, start=200))
    cfg = {"data": {"train_file": str(train), "val_file": str(val), "tasks_per_step": 4, "group_size": 4},
           "agent": {"max_model_calls": 3, "max_response_tokens": 256},
           "algorithm": {"policy": "prompt"},
           "prompt": {"gate_file": str(gate), "gate_tasks": 16, "gate_samples": 2, **prompt},
           "validation": {"max_tasks": 4, "k": 2}, "sampling": {"max_new_tokens": 64},
           "run": {"steps": 2, "checkpoint_every": 1, "tensorboard": False, "slots": 8}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, gate


def _scripted(smollm2_path, gate):
    return SamplerSpec(tokenizer=str(smollm2_path), kind="scripted", script="test_prompt_policy:prompt_sensitive_script",
                       script_kwargs={"tasks": str(gate.parent / "all.jsonl")})


def test_gate_rejects_a_harmful_edit_and_accepts_a_helpful_one(tmp_path, smollm2_path):
    from agentboost.trainer.prompt.loop import PromptTrainer

    path, gate = _prompt_config(tmp_path, demonstrations=False,
                                optimizer="test_prompt_policy:scripted_optimizer",
                                optimizer_options={"edits": [HARMFUL, HELPFUL]})
    _write(tmp_path / "all.jsonl", [json.loads(line) for name in ("train", "gate", "val")
                                    for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()])
    scripted_optimizer.calls = 0
    run_dir = tmp_path / "run"
    trainer = PromptTrainer(load_config(path), run_dir, sampler=_scripted(smollm2_path, gate))
    result = trainer.run()
    history = load_prompt_policy(run_dir).history
    assert [(h["tier"], h["change"]["instruction"], h["accepted"]) for h in history] == \
        [("reflection", HARMFUL, False), ("reflection", HELPFUL, True)], history
    harmful, helpful = (h["gate"] for h in history)
    assert harmful["mean_difference"] < -0.3 and harmful["p_value"] < 0.05 and harmful["candidate_success"] == 0.0
    assert helpful["mean_difference"] > 0.3 and helpful["p_value"] < 0.05 and helpful["candidate_success"] == 1.0
    assert history[0]["reason"] == "significantly worse" and history[1]["version"] == 1
    assert all(h["evidence"]["high"] and h["evidence"]["low"] for h in history)
    policy = load_prompt_policy(run_dir)
    assert policy.instructions == [HELPFUL] and policy.version == 1
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    logged = [e for e in events if e["event"] == "prompt_candidate"]
    assert [e["accepted"] for e in logged] == [False, True] and all("p_value" in e["gate"] for e in logged)
    assert [a["change"]["instruction"] for a in result["accepted"]] == [HELPFUL]
    assert result["validation"]["last"]["pass@1"] == 1.0 and result["validation"]["last"]["prompt_version"] == 1
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["accepted"] for m in metrics] == [0, 1] and (run_dir / "plots" / "reward.png").is_file()
    # killed after step 1's checkpoint and resumed: step 2 samples, scores and gates as the untouched run
    # did (its training requests are seeded per step: a prompt checkpoint holds no sampler RNG, so
    # without the seed the resumed step drew other answers from the script's random numbers)
    killed = tmp_path / "killed"
    shutil.copytree(run_dir, killed)
    shutil.rmtree(killed / "checkpoints" / "step_000002")
    (killed / "checkpoints" / "latest").write_text("step_000001")
    scripted_optimizer.calls = 1
    PromptTrainer(None, killed, resume=True, sampler=_scripted(smollm2_path, gate)).run()

    def answers(run):
        return {(ep.task_id, ep.metadata["sample"]): [c.response_ids for c in ep.calls]
                for ep in read_episodes(run / "episodes" / "step_000002.jsonl")}

    assert answers(killed) == answers(run_dir)
    assert load_prompt_policy(killed).history == history


def test_demonstrations_checkpoint_resume_and_rollout(tmp_path, smollm2_path):
    """Tier (a) from solutions; the policy in each checkpoint; a resumed run goes on from it; the
    artifact drives ``rollout --prompt-policy``."""
    from agentboost.trainer.dispatch import trainer_for
    from agentboost.trainer.prompt.loop import PromptTrainer

    path, gate = _prompt_config(tmp_path, demonstration_source="solutions", demonstrations_per_candidate=1,
                                max_demonstrations=2, instruction_pool=[HELPFUL])
    _write(tmp_path / "all.jsonl", [json.loads(line) for name in ("train", "gate", "val")
                                    for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()])
    run_dir = tmp_path / "run"
    cfg = load_config(path, ["run.steps=1"])
    PromptTrainer(cfg, run_dir, sampler=_scripted(smollm2_path, gate)).run()
    first = load_prompt_policy(run_dir / "checkpoints" / "step_000001")
    tiers = [h["tier"] for h in first.history]
    assert tiers == ["demonstrations", "instructions"], first.history
    assert first.history[0]["evidence"]["sources"] == ["solution"]
    assert first.history[1]["accepted"] and first.instructions == [HELPFUL]
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    saved["run"]["steps"] = 2
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    trainer = trainer_for(None, run_dir, resume=True)
    assert isinstance(trainer, PromptTrainer) and trainer.step == 1 and trainer.policy == first
    trainer.close()  # the same, on the scripted policy
    trainer = PromptTrainer(None, run_dir, resume=True, sampler=_scripted(smollm2_path, gate))
    result = trainer.run()
    assert result["steps"] == 2
    final = load_prompt_policy(run_dir)
    assert final.history[: len(first.history)] == first.history and len(final.history) == 3
    # rollout with the run's prompt: the demonstrations' questions lead each prompt
    out = tmp_path / "episodes.jsonl"
    r = cli("rollout", "--demonstrations", "--tasks", str(tmp_path / "val.jsonl"), "--prompt-policy", str(run_dir),
            "--out", str(out), "--max-model-calls", "3", "--reward", "exact_answer")
    assert r.returncode == 0, r.stderr
    assert f"agent prompt: {final.summary()}" in r.stdout
    eps = list(read_episodes(out))
    assert eps and all(ep.reward == 1.0 for ep in eps)
    assert all(ep.metadata.get("history_messages", 0) == 4 * len(final.demonstrations) for ep in eps)
    assert all(ep.calls[0].prompt_ids and len(ep.tool_calls) == 1 for ep in eps)
    from transformers import AutoTokenizer

    first_prompt = AutoTokenizer.from_pretrained(str(smollm2_path)).decode(eps[0].calls[0].prompt_ids)
    assert HELPFUL in first_prompt  # the accepted instruction reached the agent's system prompt
    r = cli("rollout", "--demonstrations", "--tasks", str(tmp_path / "val.jsonl"), "--prompt-policy",
            str(tmp_path / "nothing"), "--out", str(out))
    assert r.returncode == 2 and "prompt policy" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_eval_prompt_policy_runs_the_model_side_with_it(tmp_path):
    """``eval --prompt-policy`` on the embedded model: the model's side has the demonstrations in
    its prompt, the baseline's has not; both are compared with the paired test."""
    from agentboost.evaluation.evaluate import evaluate

    policy = PromptPolicy(system_prompt="You are a helpful assistant with a calculator tool.",
                          demonstrations=[_demo()]).save(tmp_path / "p.json")
    cfg = load_config(None, ["validation.max_new_tokens=16", "agent.max_model_calls=2"], for_training=False)
    res = evaluate("smollm2-135m-instruct", "smollm2-135m-instruct", _tasks(2), cfg, samples=1,
                   out_dir=tmp_path / "eval", prompt_policy=policy)
    assert res["prompt_policy"].startswith("prompt policy v0: 0 instructions, 1 demonstrations")
    assert res["difference"]["tasks"] == 2
    model = list(read_episodes(tmp_path / "eval" / "model_episodes.jsonl"))
    base = list(read_episodes(tmp_path / "eval" / "baseline_episodes.jsonl"))
    assert all(ep.metadata.get("history_messages") == 4 for ep in model)
    assert not any("history_messages" in ep.metadata for ep in base)


@pytest.mark.slow
def test_a_chat_model_policy_and_its_token_costs(tmp_path):
    """``prompt.policy_model``: the policy is a chat model we do not train, reached through Strands'
    OpenAI provider as a hosted model would be; here the embedded model behind a real
    OpenAI-compatible chat server (``agentboost serve``'s router, which demands a key): text-level
    episodes, their token usage as the server reported it, priced and counted against
    ``run.max_cost``, which stops the run after the first step."""
    from helpers import CHAT_KEY, CHAT_KEY_ENV

    from agentboost.models.chat import chat_model_spec
    from agentboost.serving.router import build_router
    from agentboost.trainer.prompt.loop import PromptTrainer

    assert chat_model_spec({"provider": "openai", "model_id": "m"}).cost_usd(2_000, 500) == 0.0
    path, gate = _prompt_config(tmp_path, demonstrations=False, instruction_pool=[HELPFUL], gate_tasks=2,
                                gate_samples=1)
    price = {"usd_per_million_input_tokens": 100.0, "usd_per_million_output_tokens": 400.0}
    router = build_router({"policy": "smollm2-135m-instruct"}, overrides=["validation.max_new_tokens=16"],
                          token=CHAT_KEY, log=lambda m: None)
    with router:
        spec = {"provider": "openai", "model_id": "agentboost", "base_url": router.url + "/v1",
                "api_key_env": CHAT_KEY_ENV, "max_retries": 0, "timeout_s": 60, **price}
        cfg = load_config(path, ["data.tasks_per_step=2", "data.group_size=2", "data.val_file=", "run.steps=3",
                                 "run.max_cost=0.0001", "agent.max_response_tokens=16"])
        cfg.prompt.policy_model = spec
        run_dir = tmp_path / "run"
        os.environ[CHAT_KEY_ENV] = CHAT_KEY
        try:
            result = PromptTrainer(cfg, run_dir, log=lambda m: None).run()
        finally:
            os.environ.pop(CHAT_KEY_ENV, None)
        served = router.metrics.registry.get_sample_value("agentboost_serve_tokens_total",
                                                          {"arm": "policy", "kind": "prompt"})
    assert result["steps"] == 1 and result["stopped"].startswith("reached the cost budget of 0.0001")
    episodes = [ep for f in sorted((run_dir / "episodes").glob("*.jsonl")) for ep in read_episodes(f)]
    assert len(episodes) == 4 + 2 + 2  # the step's groups, the gate's current prompt and candidate
    assert all(ep.text_level and not ep.calls and ep.metadata["text_level"]["model_id"] == "agentboost"
               for ep in episodes)
    usage = [ep.metadata["text_level"]["usage"] for ep in episodes]
    assert all(u["input_tokens"] > 100 and u["output_tokens"] > 0 for u in usage)
    assert sum(u["input_tokens"] for u in usage) == served  # the provider's count is the server's
    cost = sum(u["input_tokens"] * 100.0 + u["output_tokens"] * 400.0 for u in usage) / 1e6
    assert result["cost_usd"] == pytest.approx(cost) and cost >= 0.0001
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["cost_usd"] == pytest.approx(cost)
    history = load_prompt_policy(run_dir).history
    assert [h["tier"] for h in history] == ["instructions"] and history[0]["gate"]["tasks"] == 2
    assert CHAT_KEY not in "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    with pytest.raises(ConfigError, match="prompt.policy_model: provider 'nope'"):
        load_config(path, ["prompt.policy_model={provider: nope, model_id: x}"])
