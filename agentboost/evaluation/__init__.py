"""Evaluation: ``agentboost eval`` (``evaluate.py``: a policy against a baseline on the same tasks and
seeds), an evaluation that resumes and retries what an outage aborted (``progress.py``), and the
statistics eval, validation and A/B reports share (``statistics.py``: the paired test over tasks, the
unpaired one over independent outcomes)."""
