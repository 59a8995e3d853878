"""Environments: ``StrandsEnv`` turns a task into the first user message and scores the finished
episode with a reward from ``agentboost.rewards``; ``tau2/`` is the tau2-bench domain (conversations
with a user simulator, tau2's tools, its evaluator and metrics)."""
