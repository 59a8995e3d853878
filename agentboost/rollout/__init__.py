"""Running episodes: one episode of either kind (``episode_runner.py``: a Strands agent in-process,
an http agent through the gateway, a chat model's text-level episode), the worker process
(``worker.py``) and its way to the policy (``sampler_factory.py``), and the pool of persistent
workers that runs many episodes at once and returns one episode per task, whatever fails
(``pool.py``)."""
