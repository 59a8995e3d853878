"""One agent schema with one set of defaults (issue 43): the same YAML agent section, with no
limits in it, gives equal agent specs on every path that builds an agent: the local trainer, veRL's
agent loop, rLLM's agent arguments, the job service, the Python API and ``rollout``. Before, the
local trainer's config defaulted to 4 model calls and 512 tokens per episode and every other path
to 6 and 1,024."""

import sys

import pytest
import yaml
from helpers import REPO

from agentboost.agents.config import AgentConfig, agent_config
from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec
from agentboost.run.assembly import agent_spec
from agentboost.run.config import load_config
from agentboost.schema import default_of

# what a user writes: tools and a prompt, no limits, formats or type
AGENT = {"tools": ["agentboost.tools.calculator:calculator"],
         "system_prompt": "Use the calculator for arithmetic, then give the answer as a number."}
TASKS = [{"task_id": "t1", "question": "What is 2 + 3?", "answer": "5"},
         {"task_id": "t2", "question": "What is 4 + 4?", "answer": "8"}]


@pytest.fixture
def config_file(tmp_path):
    (tmp_path / "train.jsonl").write_text("".join(f'{{"task_id": "{t["task_id"]}", "question": "{t["question"]}", '
                                                  f'"answer": "{t["answer"]}"}}\n' for t in TASKS))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"data": {"train_file": "train.jsonl"}, "agent": AGENT}))
    return path


def local_spec(config_file):
    return agent_spec(load_config(config_file))


def verl_spec():
    # the agent-loop YAML's entry holds the same agent mapping; veRL hands it to the loop as kwargs
    import json

    from agentboost.integrations.verl.agent_loop import _configured

    spec, _ = _configured(json.dumps(AGENT, sort_keys=True), json.dumps({"reward": "exact_answer"}))
    return spec


def rllm_spec(tmp_path):
    # rLLM's agent_args; its BaseAgent comes from the stand-in module the rLLM tests use
    sys.path.insert(0, str(REPO / "tests" / "integrations" / "rllm"))
    import rllm_fakes

    site = tmp_path / "site"
    rllm_fakes.write_tree(site, {k: v for k, v in rllm_fakes.FAKE_RLLM.items()
                                 if k.startswith(("rllm/__init__", "rllm/agents/", "rllm/environments/"))})
    sys.path.insert(0, str(site))
    try:
        from agentboost.integrations.rllm.agents import StrandsRLLMAgent

        return StrandsRLLMAgent(**AGENT).spec
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m == "rllm" or m.startswith("rllm.")
                     or m == "agentboost.integrations.rllm.agents"]:
            del sys.modules[name]


def job_spec(tmp_path):
    from agentboost.jobs.store import JobStore

    store = JobStore(tmp_path / "jobs", max_running=0)  # queued, never launched: only its configuration is read
    job = store.start("schema", {}, TASKS, agent=dict(AGENT))
    return agent_spec(load_config(tmp_path / "jobs" / job / "config.yaml"))


def api_spec(tmp_path):
    import agentboost
    from agentboost.api import training_config

    # the Python API takes the spec the user writes with the same keys
    cfg = training_config(agentboost.GRPOConfig(), tmp_path / "api-run", TASKS, agent=StrandsAgentSpec(**AGENT))
    return agent_spec(cfg)


def rollout_spec(*argv):
    from agentboost.cli import build_parser
    from agentboost.cli.rollout import rollout_agent

    return rollout_agent(build_parser().parse_args(["rollout", *argv]))[0]


def test_one_yaml_gives_equal_agent_specs_on_every_path(config_file, tmp_path):
    specs = {"local": local_spec(config_file), "verl": verl_spec(), "rllm": rllm_spec(tmp_path),
             "jobs": job_spec(tmp_path), "api": api_spec(tmp_path),
             "rollout --config": rollout_spec("--config", str(config_file)),
             "rollout flags": rollout_spec("--tool", AGENT["tools"][0], "--system-prompt", AGENT["system_prompt"]),
             "Python spec": StrandsAgentSpec(**AGENT)}
    local = specs["local"]
    assert all(type(s) is StrandsAgentSpec for s in specs.values()), {k: type(v) for k, v in specs.items()}
    assert {path: s for path, s in specs.items() if s != local} == {}
    # and the limits left out are the schema's one default, on all of them
    for name in ("max_model_calls", "max_response_tokens", "timeout_s", "tool_parser", "reasoning"):
        assert getattr(local, name) == default_of(AgentConfig, name), name


def test_a_limit_given_is_the_limit_on_every_path(config_file, tmp_path):
    given = {**AGENT, "max_model_calls": 7}
    assert agent_config(given).spec().max_model_calls == 7
    cfg = load_config(config_file, ["agent.max_model_calls=7"])
    assert agent_spec(cfg) == agent_config(given).spec() == StrandsAgentSpec(**given)


def test_the_agent_section_refuses_bad_keys_the_same_way_everywhere():
    with pytest.raises(AgentSpecError, match="unknown configuration key 'agent.max_model_call'; did you mean "
                                             "'agent.max_model_calls'"):
        agent_config({"max_model_call": 3}, "agent loop YAML")
    with pytest.raises(AgentSpecError, match=r"agent loop YAML: agent.max_model_calls must be >= 1, got 0"):
        agent_config({"max_model_calls": 0}, "agent loop YAML")
    with pytest.raises(AgentSpecError, match="agent.timeout_s must be a number"):
        agent_config({"timeout_s": "soon"})
