"""agentboost: the Agent Training Kit — reinforcement learning for Strands Agents."""

__version__ = "0.1.0"
