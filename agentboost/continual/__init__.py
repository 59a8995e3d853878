"""The continual loop (``agentboost continual``): learn from production. Serve the production
version with sessions recorded, give them rewards (feedback, or a judge), train a candidate from
them, gate it offline, A/B test it live with a sequential test, promote it or roll it back, and
keep every version's lineage and cost within ``loop.max_cost``.

``lineage.py`` (versions, fingerprints, costs, the loop's state on disk), ``sessions.py`` (the served
sessions and their outcomes), ``candidates.py`` (a candidate trained from sessions, or a noised
one for a rollback drill), ``decision.py`` (the live test: the sequential test and the guards),
``loop.py`` (the loop itself, resumable).
"""
