"""Starter projects: ``agentboost init DIR`` writes a small agent project of one's own (``project.py``)."""
