"""Dataset preparation: public datasets (code, math, HumanEval) into the project's task schema, as
parquet (``agentboost data prepare``). tau2's tasks are prepared in ``environments/tau2/tasks.py``;
veRL's dataset rows in ``integrations/verl/dataset.py``."""
