"""From run to production with the real model: the smoke config trains, validation picks the best
checkpoint, ``RUN:best`` and the base model are served as an A/B test to 200 sessions of a stock
Strands ``OpenAIModel`` agent, the host scores each session with the registered reward, and the
report agrees with an offline ``eval`` of the same two policies; the merged export gives the served
checkpoint's greedy tokens under plain ``transformers``."""

import asyncio
import json
import urllib.request

import pytest
import torch
from helpers import REPO

from agentboost.api import Run
from agentboost.cli import main
from agentboost.jobs.store import guide_status
from agentboost.run.checkpoint import CheckpointError, best_checkpoint, resolve_checkpoint, split_run_spec
from agentboost.run.config import load_config
from agentboost.tasks import load_tasks

SMOKE = str(REPO / "examples/quickstart/smoke.yaml")
TOKEN = "t0ken"
# served and evaluated alike: greedy, 8 tokens a turn, a binary reward a short answer meets on some tasks
SERVED = ["reward.name=helpers:mentions_answer_reward", "validation.temperature=0", "validation.max_new_tokens=8"]
TASKS = 20
SESSIONS = 200
SPLIT = 0.3


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, smollm2_path):
    from agentboost.trainer.loop import Trainer

    run = tmp_path_factory.mktemp("served") / "run"
    cfg = load_config(SMOKE, ["run.steps=2", "data.tasks_per_step=1", "data.group_size=2", "sampling.max_new_tokens=8",
                              "validation.every=1", "validation.max_tasks=2", "validation.k=1",
                              "validation.temperature=0", "validation.max_new_tokens=8", "optim.lr=1e-3",
                              "reward.name=helpers:length_reward", "run.tensorboard=false"])
    result = Trainer(cfg, run, log=lambda m: None).run()
    return run, result


@pytest.mark.slow
def test_best_checkpoint_is_picked_kept_and_named(trained_run, capsys):
    run, result = trained_run
    best = best_checkpoint(run)
    # length_reward never succeeds: both validations tie at pass@1 0, and a tie goes to the later step
    assert best == {"checkpoint": "step_000002", "step": 2, "metric": "val_pass@1", "value": 0.0, "ci95": 0.0}
    assert result["best_checkpoint"] == best
    assert json.loads((run / "result.json").read_text())["best_checkpoint"] == best
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["checkpoint"] for e in events if e["event"] == "best_checkpoint"] == ["step_000001", "step_000002"]
    st = Run(run).status()
    assert st["best_checkpoint"] == "step_000002" and st["best_validation_accuracy"] == 0.0
    job = guide_status({"state": "completed", "name": "a", "job_id": "j", "best_checkpoint": "step_000002"}, run)
    assert job["best_checkpoint_id"] == f"{run}:step_000002" and split_run_spec(job["best_checkpoint_id"]) == (
        str(run), "step_000002")
    assert resolve_checkpoint(run, "best") == resolve_checkpoint(run, "2") == run / "checkpoints" / "step_000002"
    with pytest.raises(CheckpointError, match=r"has no checkpoint 'step_000009' \(it has: step_000001, step_000002"):
        resolve_checkpoint(run, "9")
    assert main(["export-model", f"{run}:step_000009", "--out", str(run.parent / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "agentboost export-model: error:" in err and "no checkpoint 'step_000009'" in err


@pytest.mark.slow
def test_ab_test_of_the_best_checkpoint_agrees_with_offline_eval(trained_run, tmp_path, capsys):
    from strands.models.openai import OpenAIModel

    from agentboost.evaluation.evaluate import evaluate
    from agentboost.run.assembly import agent_spec, config_for, environment
    from agentboost.serving.report import ab_report
    from agentboost.serving.router import build_router

    run, _ = trained_run
    experiment = f"{run}:best"
    cfg = config_for(experiment, None, SERVED)
    tasks = load_tasks(REPO / "examples/quickstart/data/test.jsonl")[:TASKS]
    offline = evaluate(experiment, "smollm2-135m-instruct", tasks, cfg, samples=1, slots=TASKS, log=lambda m: None)

    spec, env = agent_spec(cfg), environment(cfg)
    router = build_router({"baseline": "smollm2-135m-instruct", "experiment": experiment}, overrides=SERVED,
                          max_batch_size=32, split=SPLIT, out_dir=tmp_path, token=TOKEN, min_effect=0.05,
                          salt="done-when", log=lambda m: None)
    with router:
        url = router.url

        def feedback(sid, task):  # the host scores the session's final answer with the registered reward
            req = urllib.request.Request(url + "/v1/feedback", data=json.dumps({"session_id": sid, "task": task}).encode(),
                                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())

        async def session(i, gate):
            task = tasks[i % TASKS]
            sid = f"session-{i}"
            model = OpenAIModel(client_args={"base_url": url + "/v1", "api_key": TOKEN, "max_retries": 0,
                                             "default_headers": {"X-Agentboost-Session": sid}},
                                model_id="agentboost", stream=i % 2 == 0)
            async with gate:
                agent = spec.build(model)
                try:
                    await agent.invoke_async(env.first_message(task))
                except Exception as e:  # 8 tokens: Strands stops a cut turn with MaxTokensReachedException
                    assert "MaxTokensReached" in type(e).__name__, e
                return await asyncio.to_thread(feedback, sid, task)

        async def drive():
            gate = asyncio.Semaphore(64)
            return await asyncio.gather(*(session(i, gate) for i in range(SESSIONS)))

        outcomes = asyncio.run(drive())
        served_calls = {sid: s.lineages[0].model.calls[0] for sid, s in router._sessions.items()
                        if router._session_arm[sid] == "experiment"}
    assert all(o["source"] == "reward:helpers:mentions_answer_reward" for o in outcomes)
    report = ab_report(tmp_path / "ab.jsonl")
    assert report["sessions"] == SESSIONS and abs(report["split"]["observed"] - SPLIT) <= 0.05
    for arm, policy in (("experiment", "model"), ("baseline", "baseline")):
        a, off = report["arms"][arm], offline[policy]
        assert a["outcomes"] == a["sessions"] and a["errors"] == 0 and a["calls"] >= a["sessions"]
        # the same policy on the same tasks: live and offline success agree within their intervals
        gap = abs(a["success_rate"] - off["success_rate"])
        assert gap <= a["success_ci95"] + off["success_ci95"] + 1e-9, (arm, a, off)
    d = report["success_difference"]
    assert d["method"] == "permutation test of the arm labels" and 0 < d["p_value"] <= 1
    from agentboost.evaluation.statistics import unpaired_comparison

    by_arm = {arm: [float(o["success"]) for o in outcomes if o["arm"] == arm] for arm in ("experiment", "baseline")}
    assert d == unpaired_comparison(by_arm["experiment"], by_arm["baseline"]).__dict__  # the one statistics module
    assert main(["ab", "report", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert f"{SESSIONS} sessions" in printed and "success difference (experiment - baseline)" in printed

    # the merged export: plain transformers, no peft, gives the served checkpoint's greedy tokens
    from transformers import AutoModelForCausalLM

    out = tmp_path / "exported"
    assert main(["export-model", experiment, "--out", str(out)]) == 0
    assert "(LoRA merged)" in capsys.readouterr().out
    assert not (out / "adapter_config.json").exists() and (out / "tokenizer_config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    prompts = {}
    for call in served_calls.values():  # ten distinct served prompts
        prompts.setdefault(tuple(call.prompt_ids), call.response_ids)
    assert len(prompts) >= 10
    for prompt, served in list(prompts.items())[:10]:
        with torch.no_grad():
            ids = model.generate(torch.tensor([prompt]), max_new_tokens=len(served), do_sample=False)
        assert ids[0, len(prompt):].tolist() == served
