"""How a candidate learns from a round's sessions, without a model: the method ``auto`` picks (GRPO
where same-task groups' rewards differ and the sessions were sampled, else rejection-sampling
fine-tuning; a prompt run's step where the weights stay), and the prompt step itself: the round's
best sessions, one per task, become the parent prompt's demonstrations, served as MODEL#prompt=PATH.
(The weights steps train the real model in ``test_loop.py``.)"""

import json

import pytest

from agentboost.continual.candidates import NothingToLearn, choose_method, train_candidate
from agentboost.episodes.record import Episode
from agentboost.run.config import load_config
from agentboost.run.prompt_policy import load_prompt_policy
from agentboost.serving.policies import split_prompt_spec, with_prompt


def session(eid, task, reward, answer="5"):
    ep = Episode(episode_id=eid, task_id=task, group_id=task, reward=reward,
                 reward_components={"outcome": reward})
    ep.messages = [{"role": "user", "content": [{"text": f"question {task}"}]},
                   {"role": "assistant", "content": [{"text": answer}]}]
    return ep


def test_the_method_auto_chooses():
    cfg = load_config(None, ["loop.min_groups=2"], for_training=False)
    groups = [session(f"{t}{i}", t, float(i % 2)) for t in "ab" for i in range(2)]
    assert choose_method(cfg, groups) == "grpo"  # two tasks, each with a success and a failure
    assert choose_method(cfg, groups[:2]) == "rft"  # one informative group is below loop.min_groups
    flat = [session(f"{t}{i}", t, 1.0) for t in "ab" for i in range(2)]
    assert choose_method(cfg, flat) == "rft"  # groups whose rewards are all equal teach GRPO nothing
    greedy = load_config(None, ["loop.min_groups=2", "validation.temperature=0"], for_training=False)
    assert choose_method(greedy, groups) == "rft"  # greedy sessions: no log-probs to weight
    assert choose_method(load_config(None, ["loop.method=rft"], for_training=False), groups) == "rft"
    prompt = load_config(None, ["algorithm.policy=prompt"], for_training=False)
    assert choose_method(prompt, groups) == "prompt"


def test_a_prompt_step_adds_the_best_sessions(tmp_path):
    cfg = load_config(None, ["algorithm.policy=prompt", "prompt.demonstrations_per_candidate=2",
                             "prompt.max_demonstrations=3", "agent.system_prompt=Use the calculator."],
                      for_training=False)
    round1 = [session("a-win", "a", 1.0, "a: 5"), session("a-lose", "a", 0.0),
              session("b-win", "b", 1.0, "b: 7"), session("b-lose", "b", 0.0), session("c-win", "c", 1.0, "c: 9")]
    res = train_candidate(cfg, "smollm2-135m-instruct", round1, tmp_path / "v1")
    model, path = split_prompt_spec(res["spec"])
    assert model == "smollm2-135m-instruct" and res["method"] == "prompt"
    p1 = load_prompt_policy(path)
    assert p1.system_prompt == "Use the calculator." and p1.version == 1
    # the group advantages (a and b have a success and a failure each) rank a's and b's winners first
    assert sorted(d.episode_id for d in p1.demonstrations) == ["a-win", "b-win"]
    assert p1.demonstrations[0].messages[-1]["content"][0]["text"] in ("a: 5", "b: 7")
    # the next round builds on it: its demonstrations kept (to prompt.max_demonstrations), a's task not twice
    round2 = [session("a-again", "a", 1.0), session("a-no", "a", 0.0), session("d-win", "d", 1.0, "d: 1"),
              session("d-no", "d", 0.0)]
    res2 = train_candidate(cfg, res["spec"], round2, tmp_path / "v2")
    p2 = load_prompt_policy(split_prompt_spec(res2["spec"])[1])
    assert [d.episode_id for d in p2.demonstrations][-1] == "d-win" and len(p2.demonstrations) == 3
    assert "a-again" not in [d.episode_id for d in p2.demonstrations]
    assert json.loads((tmp_path / "v2" / "prompt_policy.json").read_text())["history"][-1]["parent"] == res["spec"]
    with pytest.raises(NothingToLearn, match="no successful session"):
        train_candidate(cfg, res["spec"], [session("x", "x", 0.0), session("y", "y", 0.0)], tmp_path / "v3")
    assert with_prompt(res["spec"], "/p.json") == "smollm2-135m-instruct#prompt=/p.json"
