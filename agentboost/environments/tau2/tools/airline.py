"""tau2 airline's agent tools for an agent spec (``tools=["agentboost.environments.tau2.tools.airline"]``, which pool
workers import by name): the toolkit's methods with their real signatures and docstrings; each
episode acts on its own environment, made from its task row (``domain.episode_tools``)."""

from ..domain import episode_tools

globals().update({t.tool_name: t for t in episode_tools("airline")})
