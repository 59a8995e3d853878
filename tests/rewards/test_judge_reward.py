"""Judge rewards (``reward.name: judge``, ``agentboost.rewards.judge``): a chat model we do not train
scores episodes against a rubric through Strands' OpenAI provider, here the embedded model on the
real vLLM CPU server's chat route (``chat_server``). Its verdicts are checked for form, not taste:
scores in [0, 1] with their reason, calls and tokens counted, agreement with the verifier
reported by ``agentboost score``, and two GRPO steps of the quickstart on the judge's reward."""

from __future__ import annotations

import json
import math

import pytest
from helpers import CHAT_KEY, CHAT_KEY_ENV, REPO, cli

from agentboost.episodes.record import Episode
from agentboost.rewards.judge import JudgeError, _json_object, _valid_score, judge_config

pytestmark = pytest.mark.vllm

TASKS = REPO / "examples/quickstart/data/test.jsonl"


def _judge(server, mode: str = "episode", group: int = 0) -> dict:
    """A 135M judge keeps to the JSON asked for only when the server enforces it: a structured-output
    schema, passed through the provider as any OpenAI parameter (the spec's ``params``)."""
    one = {"type": "object", "required": ["score", "reason"],
           "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                          "reason": {"type": "string", "maxLength": 60}}}
    schema = one if mode == "episode" else {"type": "object", "required": [str(i + 1) for i in range(group)],
                                            "properties": {str(i + 1): one for i in range(group)},
                                            "additionalProperties": False}
    return {"model": {"provider": "openai", "model_id": "base", "base_url": server.url + "/v1",
                      "api_key_env": CHAT_KEY_ENV, "max_retries": 1, "usd_per_million_input_tokens": 1.0,
                      "params": {"response_format": {"type": "json_schema",
                                                     "json_schema": {"name": "grade", "schema": schema}}}},
            "rubric": "Score 1 when the final answer is the correct number for the problem, else 0.",
            "mode": mode, "max_tokens": 160}


def test_judge_replies_are_validated_never_clamped():
    with pytest.raises(JudgeError, match="not a number in \\[0, 1\\]"):
        _valid_score(1.5, "{}")
    with pytest.raises(JudgeError, match="not a number"):
        _valid_score(True, "{}")
    with pytest.raises(JudgeError, match="JSON object"):
        _json_object("I think it is good")
    assert _valid_score(0, "") == 0.0 and _json_object('noise {"score": 1} noise') == {"score": 1}
    with pytest.raises(Exception, match="needs reward.judge.model"):
        judge_config({"rubric": "x"})
    with pytest.raises(Exception, match="mode must be one of episode, group"):
        judge_config({"model": {"provider": "openai", "model_id": "m"}, "rubric": "x", "mode": "pairs"})


@pytest.mark.slow
def test_score_with_a_judge_reports_agreement_and_a_judge_reward_trains(tmp_path, chat_server):
    from agentboost.environments.strands_env import StrandsEnv

    tasks = [json.loads(line) for line in TASKS.read_text().splitlines()[:4]]
    answers = tmp_path / "answers.jsonl"  # two right, two wrong
    answers.write_text("".join(json.dumps({"task_id": t["task_id"], "answer": str(t["answer"]) if i % 2 == 0 else "7"})
                               + "\n" for i, t in enumerate(tasks)))
    judge_file = tmp_path / "judge.json"
    judge_file.write_text(json.dumps(_judge(chat_server)))
    r = cli("score", "--reward", "judge", "--judge", judge_file, "--tasks", TASKS, "--answers", answers,
            "--results", tmp_path / "results.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("judge openai:base"))
    assert "against verifier exact_answer on 4 answers" in line and "0 not scored by the judge; 4 judge calls" in line
    cells = [int(line.split(f"{k} ")[1].split(",")[0].split(")")[0]) for k in
             ("both pass", "both fail", "judge only", "verifier only")]
    assert sum(cells) == 4 and f"agreement {(cells[0] + cells[1]) / 4:.1%}" in line
    for row in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines()):
        j = row["metadata"]["judge"]
        assert 0 <= row["score"] <= 1 and j["score"] == row["score"] and isinstance(j["reason"], str)
        assert j["calls"] == 1 and j["input_tokens"] > 0 and j["cost_usd"] == pytest.approx(j["input_tokens"] / 1e6)

    # a whole group in one call, each member scored relative to the others
    env = StrandsEnv(reward="judge", judge=_judge(chat_server, "group", 3)).validate()
    group = [Episode(episode_id=f"e{i}", task_id=tasks[0]["task_id"], group_id="g", final_answer=a,
                     messages=[{"role": "user", "content": [{"text": tasks[0]["question"]}]},
                               {"role": "assistant", "content": [{"text": a}]}])
             for i, a in enumerate((str(tasks[0]["answer"]), "7", "I do not know"))]
    for ep in group:
        env.score(tasks[0], ep)
        assert ep.reward is None  # left for the group
    env.score_groups({tasks[0]["task_id"]: tasks[0]}, group)
    assert all(ep.status == "ok" and 0 <= ep.reward <= 1 for ep in group), [ep.error for ep in group]
    assert [ep.reward_metadata["judge"]["calls"] for ep in group] == [1, 0, 0]

    # two GRPO steps of the quickstart on the judge's reward: a finite loss, the judge in the metrics
    run = tmp_path / "run"
    r = cli("train", REPO / "examples/quickstart/smoke.yaml", "reward.name=judge",
            f"reward.judge={json.dumps(_judge(chat_server))}", "run.steps=2", "data.tasks_per_step=1",
            "data.group_size=2", "sampling.max_new_tokens=24", "agent.max_response_tokens=48",
            "agent.max_model_calls=2", "validation.max_tasks=1", "validation.k=1", "validation.max_new_tokens=16",
            "--run-dir", run, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in steps if "loss" in m and m.get("step")]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(math.isfinite(m["loss"]) and m["judge_calls"] >= 1 and m["judge_input_tokens"] > 0 for m in steps)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert CHAT_KEY.encode() not in f.read_bytes(), f"the API key leaked into {f}"
