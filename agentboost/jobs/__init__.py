"""The local job service (``agentboost jobs serve``): training runs as jobs on disk, an HTTP API with
a bearer token, webhooks and an event stream, and ``TrainingClient`` to drive it from Python."""
