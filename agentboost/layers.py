"""The package's layers, bottom to top. A module imports only from its own layer or lower ones,
and no import circle exists at all (``tests/test_layers.py`` reads every import and enforces
both). Each entry is a module or a package prefix; the first layer whose prefix matches wins."""

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("record and shared types", ("agentboost.errors", "agentboost.files", "agentboost.imports", "agentboost.moved", "agentboost.tasks",
                                 "agentboost.episodes", "agentboost.layers", "agentboost.reasoning", "agentboost.schema",
                                 "agentboost.progress")),
    ("sandbox, models, sampling protocol", ("agentboost.sandbox", "agentboost.models", "agentboost.sampling.protocol")),
    ("samplers and engines", ("agentboost.sampling",)),
    ("rewards: registry, code and math, shaping, groups", ("agentboost.rewards",)),
    ("environments and tools", ("agentboost.environments", "agentboost.tools")),
    ("agents: the agent specifications, the trainable model, chat rendering, tool-call parsers, recording",
     ("agentboost.agents",)),
    # the trainable model behind HTTP; it imports the agents, never the other way
    ("the gateway", ("agentboost.gateway",)),
    # episodes of either kind (an http agent's through the gateway), the worker and the pool
    ("rollout: episode runner, worker, pool", ("agentboost.rollout",)),
    ("the run: config, preflight, run directory, checkpoints, metrics, health, the assembly", ("agentboost.run",)),
    ("evaluation: eval, its progress, paired and unpaired statistics", ("agentboost.evaluation",)),
    ("trainer, data preparation, integrations, testing aids, serving, the continual loop", ("agentboost.trainer", "agentboost.data",
                                                                       "agentboost.bench", "agentboost.integrations", "agentboost.testing",
                                                                       "agentboost.scaffold", "agentboost.serving",
                                                                       "agentboost.continual")),
    # extensions: the extension points' types, gathered from their homes below
    ("entry points: command line, Python API, job service, extension points",
     ("agentboost.cli", "agentboost.api", "agentboost.jobs", "agentboost.extensions", "agentboost")),
]


def layer_of(module: str) -> int | None:
    """Index of the layer holding ``module`` (longest matching prefix), None if none does."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best
