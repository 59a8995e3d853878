"""The run: one concept, one home. Its configuration (``config.py``: the schema every entry point
reads, each field carrying its help, bounds and choices; ``config_reference.py``: the reference
generated from it; ``algorithm.py``: the algorithm section against veRL's registries), the check
before it starts (``preflight.py``), its directory (``directory.py``), checkpoints
(``checkpoint.py``), metrics (``metrics.py``, ``prometheus.py``), the checks that stop a run which
cannot learn (``health.py``), the prompt policy a prompt run trains (``prompt_policy.py``), the one
assembly of a configuration into an agent, an environment, a policy server, samplers and a pool
(``assembly.py``), and the one lifecycle both trainers inherit (``lifecycle.py``: start, resume,
budget, health, SIGTERM grace, failure, summary). The trainers (``trainer/``), ``eval``
(``evaluation/``), ``rollout``, ``serve`` and the job service build on it."""
