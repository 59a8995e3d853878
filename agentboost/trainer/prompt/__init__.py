"""The prompt trainer (``algorithm.policy: prompt``): training the agent's prompt instead of the
weights. ``loop.py``: ``PromptTrainer`` (each step's candidates through the held-out gate);
``candidates.py``: where candidates come from (demonstrations, the contrast of a step's episodes, the
reflective optimizer). The artifact it trains is ``run/prompt_policy.py``."""
