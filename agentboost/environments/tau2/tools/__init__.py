"""A tau2 domain's agent tools by import path (``tools=["agentboost.environments.tau2.tools.airline"]``):
one module per domain, each episode acting on its own tau2 environment."""
