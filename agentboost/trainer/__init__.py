"""The training loops: the weights trainer (``loop.py``: GRPO/PPO on one machine), its batches
(``batch.py``), advantages and losses through veRL's registries (``loss.py``) and token log-probs
(``logprobs.py``), the supervised loop ``sft`` and the warm start share (``sft.py``,
``warm_start.py``), the export ``sft`` reads (``export.py``), the prompt trainer (``prompt/``), and
which of the two a run uses (``dispatch.py``). The run they share (config, checkpoints, metrics,
health, the assembly) is ``run/``; evaluation is ``evaluation/``."""
