# agentboost-override: rllm/engine/agent_execution_engine.py (rLLM 1fc3c4b), installed by apply_patches.py
"""rLLM's agent execution engine with agentboost's Strands rollouts.

rLLM's original module is kept beside this one as ``agent_execution_engine_upstream.py``; every name
it defines is re-exported here, and its two engine classes are extended by
``agentboost.integrations.rllm.engine.StrandsRolloutMixin``, which changes ``trajectory_generator``
for agentboost's Strands agents only (token-exact episodes, wake_up/sleep around every rollout
phase, sampling parameters from the config, failures returned as rows). rLLM's trainer imports
``AsyncAgentExecutionEngine`` from this module by name, so it picks these classes up unchanged.
"""

from rllm.engine import agent_execution_engine_upstream as _upstream
from rllm.engine.agent_execution_engine_upstream import *  # noqa: F401,F403 - the module's public names

from agentboost.integrations.rllm.engine import StrandsRolloutMixin


class AgentExecutionEngine(StrandsRolloutMixin, _upstream.AgentExecutionEngine):
    __doc__ = _upstream.AgentExecutionEngine.__doc__


class AsyncAgentExecutionEngine(StrandsRolloutMixin, _upstream.AsyncAgentExecutionEngine):
    __doc__ = _upstream.AsyncAgentExecutionEngine.__doc__
