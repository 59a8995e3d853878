"""The extension points are typed in one findable place (``agentboost.extensions``): each is what
the code that calls it takes, and agentboost's own implementations satisfy the types."""

import typing

import agentboost.extensions as ext
from agentboost.environments.strands_env import StrandsEnv
from agentboost.reasoning import get_reasoning_format
from agentboost.rewards.registry import exact_answer, get_reward
from agentboost.sampling.http_sampler import HttpSampler


def test_every_extension_point_is_listed_and_typed():
    assert sorted(ext.__all__) == sorted(n for n in vars(ext) if not n.startswith("_") and n != "annotations")
    for name in ("AgentFactory", "Conversation", "ConversationFactory", "RewardFunction", "Sampler"):
        assert getattr(getattr(ext, name), "_is_protocol", False), f"{name} is not a Protocol"
    for name in ("ToolCallParser", "ToolCallFormatter", "ToolCallIdMaker"):
        assert typing.get_origin(getattr(ext, name)) is not None, f"{name} is not a typed callable"
    # every row of the module's table names a type it exports
    for name in ("RewardFunction", "AgentFactory", "ConversationFactory", "ToolCallParser", "ReasoningFormat",
                 "Sampler"):
        assert f"``{name}``" in ext.__doc__


def test_agentboosts_own_implementations_satisfy_the_types():
    assert isinstance(exact_answer, ext.RewardFunction) and isinstance(get_reward("math"), ext.RewardFunction)
    assert isinstance(HttpSampler("http://127.0.0.1:9"), ext.Sampler)
    assert isinstance(get_reasoning_format("qwen3"), ext.ReasoningFormat)
    env = StrandsEnv(conversation="agentboost.environments.tau2.conversation:tau2_conversation")
    assert isinstance(env._conversation_factory(), ext.ConversationFactory)

    def factory(*, model, tools, system_prompt):
        return None

    assert isinstance(factory, ext.AgentFactory)
