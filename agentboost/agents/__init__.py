"""The agent side of an episode: the agent specifications (``StrandsAgentSpec``, ``HttpAgentSpec``),
the trainable Strands model (renders once, then extends the token history; records every call),
chat rendering, the tool-call parsers, the episode record from the calls (``recording.py``) and the
scripted policy behind demonstrations. Episodes are run by ``rollout/``; the gateway (``gateway/``)
puts the trainable model behind HTTP. Neither is imported from here."""
