"""The ``rllm`` backend, the original kit's path: rLLM's ``AgentTrainer`` (rLLM at 1fc3c4b and its veRL
fork, installed by the user from git on a GPU node) with agentboost's overrides.

``python apply_patches.py`` (``patcher``) installs the override modules of ``modified_rllm_files/`` and
``modified_verl_files/`` into the installed rLLM/veRL: hash-verified, atomic, idempotent, revertible.
Those modules import their logic from here: ``engine`` (the execution engine's Strands rollouts),
``trainer`` (trajectories -> one training row each), ``fork_server`` (the fork's completions checks),
``episode_rows`` (episode -> row). ``agents`` holds ``StrandsRLLMAgent``/``StrandsRLLMEnv`` to pass to
``AgentTrainer``; ``examples/deepcoder/train_deepcoder_with_strands_rllm.py`` runs it. ``cpu`` runs the
same trainer on a machine without a GPU (``CPU_SMOKE=1``; a test and development aid)."""
