"""Token-in/token-out sampling: the ``Sampler`` protocol, the two engines a policy server runs (``hf``:
batched HF ``generate`` in this process, ``hf_engine.py``; ``vllm``: a vLLM server subprocess,
``vllm_server.py``), the loopback completions server, the HTTP sampler workers use, and the one way to
start a policy server (``policy_server``: ``HFPolicyServer`` or ``VLLMPolicyServer``)."""
