"""The ``verl`` backend: agentboost's Strands agent as a veRL agent loop, for stock
``python -m verl.trainer.main_ppo`` on a GPU cluster (Ray, FSDP, vLLM replicas).

Needs veRL 0.9.1 (installed with agentboost). Entry points:

- ``agent_loop.StrandsAgentLoop``: the ``_target_`` of an entry in an agent-loop YAML
  (``examples/*/agent_loop.yaml``), which ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
  names; the dataset's ``agent_name`` column selects the entry;
- ``dataset`` (``agentboost data verl``): task files -> veRL dataset rows;
- ``config.compose_ppo_config``: veRL's trainer config composed and validated without GPUs;
- ``server_client.ForwardingServerClient``: veRL's server client answered by an agentboost sampler, to
  run veRL's real ``AgentLoopWorker`` on a CPU machine (tests and development only).

The scripts in ``examples/{math,deepcoder,tau2}/train_*_with_strands.sh`` run it."""
