"""Integrations with other training stacks: veRL's agent loop and the rLLM path (the top layer
but for the entry points). ``episode_rows``: episode -> training row, the one conversion both use; ``cpu_backend``: what both run on
without an accelerator."""
