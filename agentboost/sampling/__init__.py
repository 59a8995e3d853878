"""Token-in/token-out sampling: the ``Sampler`` protocol, the local engines (batched HF ``generate``,
a vLLM server subprocess), the loopback completions server, the HTTP sampler workers use, and the
one way to start a policy server (``policy_server``)."""
