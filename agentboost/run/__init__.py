"""The run: one concept, one home. Its configuration (``config.py``, the schema every entry point
reads, and ``config_reference.py``, the reference generated from it; ``algorithm.py``: the algorithm
section against veRL's registries), the check before it starts (``preflight.py``), its directory
(``directory.py``), checkpoints (``checkpoint.py``), metrics (``metrics.py``, ``prometheus.py``),
the checks that stop a run which cannot learn (``health.py``), the prompt policy a prompt run
trains (``prompt_policy.py``), and the assembly of a config into an agent, an environment and a
policy server (``assembly.py``, ``policy_engine.py``). The trainers (``trainer/``), ``eval``
(``evaluation/``), ``rollout``, ``serve`` and the job service build on it."""
