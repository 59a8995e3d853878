"""Rewards: the registry (name -> ``reward(task, episode)``, defaults per agent type), the built-in
``code`` and ``math`` rewards, capped shaping terms, GRPO group policy (the one place failed episodes
get their reward) and ``agentboost score``. Environments import this package; it imports no environment."""
