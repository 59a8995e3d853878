"""Modules that moved in 0.2 still import under their old names, warn once, and are the same module
objects (one registry, one class), so users' scripts and configs keep working until 0.3."""

import importlib
import importlib.util
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO as ROOT

from agentboost.moved import MOVED


def test_every_new_place_exists_and_no_old_name_is_a_file():
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), f"{old} is a file again: drop it from MOVED"


def test_an_old_module_path_warns_and_gives_the_same_module():
    # a fresh interpreter: the old names must not already be in sys.modules
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        import agentboost.rewards.registry as new
        try:
            import agentboost.environments.rewards
        except DeprecationWarning as e:
            assert "agentboost.rewards.registry" in str(e), e
        else:
            raise SystemExit("no warning")
        warnings.simplefilter("ignore", DeprecationWarning)
        import agentboost.environments.rewards as old
        assert old is new
        assert old.__spec__.name == "agentboost.rewards.registry"
        from agentboost.environments import tau2_domain
        from agentboost.environments.tau2 import domain
        assert tau2_domain is domain
        from agentboost.imports import import_object
        from agentboost.rewards.code import code_reward
        assert import_object("agentboost.environments.code_reward:code_reward") is code_reward
        from agentboost.integrations.verl_agent_loop import StrandsAgentLoop
        from agentboost.integrations.verl.agent_loop import StrandsAgentLoop as new_loop
        assert StrandsAgentLoop is new_loop
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_the_run_evaluation_and_rollout_moves_warn_and_give_the_same_modules():
    # the run, evaluation and rollout folders (issue 43): old paths the other branches and users' scripts import
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        import agentboost.run.config as new
        try:
            import agentboost.trainer.config
        except DeprecationWarning as e:
            assert "agentboost.run.config" in str(e) and "0.3" in str(e), e
        else:
            raise SystemExit("no warning")
        warnings.simplefilter("ignore", DeprecationWarning)
        import agentboost.trainer.config as old
        assert old is new and old.TrainConfig is new.TrainConfig
        from agentboost.trainer.evaluation import evaluate
        from agentboost.evaluation.evaluate import evaluate as moved_evaluate
        assert evaluate is moved_evaluate
        from agentboost.agents.strands_process_pool import StrandsProcessPool
        from agentboost.rollout.pool import StrandsProcessPool as pool
        assert StrandsProcessPool is pool
        from agentboost.sampling.local_engine import LocalEngine
        from agentboost.sampling.hf_engine import HFEngine
        assert LocalEngine is HFEngine
        from agentboost.sampling.policy_server import PolicyServer, HFPolicyServer
        assert PolicyServer is HFPolicyServer
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_a_renamed_name_warns_once_and_an_unknown_one_is_an_attribute_error():
    from agentboost.sampling import hf_engine

    with pytest.warns(DeprecationWarning, match="LocalEngine is now HFEngine; the old name goes in agentboost 0.3"):
        assert hf_engine.LocalEngine is hf_engine.HFEngine
    with pytest.raises(AttributeError, match="no attribute 'NoSuchEngine'"):
        hf_engine.NoSuchEngine


def test_an_unknown_module_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentboost.environments.no_such_module")


def test_strands_agent_alias_warns_and_is_the_spec():
    import agentboost.agents.strands_agent as sa

    sa._warned_alias = False
    with pytest.warns(DeprecationWarning, match="StrandsAgentSpec"):
        alias = sa.StrandsAgent
    assert alias is sa.StrandsAgentSpec


def test_the_public_surface_imports():
    import agentboost

    for name in agentboost.__all__:
        assert getattr(agentboost, name) is not None, name
    from agentboost import RewardFunction, StrandsAgentSpec

    def my_reward(task, episode):
        return 1.0

    assert isinstance(my_reward, RewardFunction)
    assert StrandsAgentSpec().tools
