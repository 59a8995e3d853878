"""The prompt trainer (``algorithm.policy: prompt``): training the agent's prompt instead of the
weights (``loop.py``: candidates from the groups, the held-out gate, ``PromptTrainer``). The artifact
it trains is ``run/prompt_policy.py``."""
