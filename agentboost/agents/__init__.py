"""The agent side of an episode: the trainable Strands model (renders once, then extends the token
history; records every call), chat rendering and tool-call parsers, the agent specification
(``StrandsAgentSpec``), the episode runner, and the worker pool that runs many episodes at once."""
