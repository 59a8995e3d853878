"""Every extension point of agentboost, typed, in one place: what you implement, and how a run finds it.

- a reward: ``RewardFunction``, ``reward(task, episode) -> RewardResult | float``; a run names it
  in ``reward.name: module:function``, or ``register_reward(name)`` registers it by name;
- an agent: ``AgentFactory``, ``factory(model=, tools=, system_prompt=) -> strands.Agent``;
  ``agent.factory: module:function`` (else a plain Strands ``Agent``);
- an environment's conversation (a user simulator): ``ConversationFactory`` -> ``Conversation``;
  ``env.conversation: module:function``, its options ``env.conversation_options``;
- a tool-call format: ``ToolCallParser`` (text -> ``ParsedOutput``), ``ToolCallFormatter``,
  ``ToolCallIdMaker``; ``register_tool_parser(name, parser, formatter, ...)``, then
  ``agent.tool_parser: name``;
- a reasoning format: ``ReasoningFormat`` (a family's markers); ``register_reasoning_format(fmt)``,
  then ``agent.reasoning: name``;
- a sampler: ``Sampler``, ``await sample(prompt_ids, SamplingParams) -> SampleResult``; the
  trainable model takes any, and workers build theirs from a ``SamplerSpec``.

Nothing has to subclass these: they are the signatures agentboost calls, so a type checker verifies a
user's function (``fn: RewardFunction = my_reward``) and ``isinstance`` checks the protocols. Each is
defined beside what calls it (rewards/registry.py, agents/strands_agent.py, environments/strands_env.py,
agents/tool_parsers/registry.py, reasoning.py, sampling/protocol.py); this module is where to find them.
"""

from __future__ import annotations

from .agents.strands_agent import AgentFactory
from .agents.tool_parsers.registry import (
    ParsedOutput,
    ParsedToolCall,
    ToolCallFormatter,
    ToolCallIdMaker,
    ToolCallParser,
    register_tool_parser,
)
from .environments.strands_env import Conversation, ConversationFactory
from .reasoning import ReasoningFormat, register_reasoning_format
from .rewards.registry import RewardFunction, RewardResult, register_reward
from .sampling.protocol import Sampler, SampleResult, SamplingParams

__all__ = ["AgentFactory", "Conversation", "ConversationFactory", "ParsedOutput", "ParsedToolCall", "ReasoningFormat",
           "RewardFunction", "RewardResult", "Sampler", "SampleResult", "SamplingParams", "ToolCallFormatter",
           "ToolCallIdMaker", "ToolCallParser", "register_reasoning_format", "register_reward",
           "register_tool_parser"]
