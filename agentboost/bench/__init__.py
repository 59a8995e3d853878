"""Benchmarks behind one command (``agentboost bench``): a benchmark is a versioned recipe
(``recipe``: its tasks' source, configuration, scorer, protocol, sizes, reference figures); the
registry (``registry``) holds the built-in recipes (``recipes/``) and the user's; ``run`` runs one
through ``eval``'s functions and writes one report format; ``rescore`` recomputes a run's scores from
its stored episodes."""
