"""Serving a trained policy to any agent, and A/B testing it against a baseline.

``policies.py`` loads what an arm serves (a run's checkpoint, ``RUN_DIR:best``, or any model) on the
hf or vLLM engine; ``router.py`` is the front (``/v1/chat/completions``, ``/v1/responses``,
``/v1/messages``, ``/v1/models``, ``/v1/feedback``) that splits sessions between two arms, built from
the gateway's own protocol modules (``gateway/protocol.py``) and its per-session trainable-model state
(``gateway/session.py``), without recording for training; ``report.py`` turns the router's event log into per-arm
figures and the difference with the unpaired test that lives beside ``eval``'s paired one
(``evaluation/statistics.py``); ``model_export.py`` writes a checkpoint as a merged Hugging Face model.
"""
