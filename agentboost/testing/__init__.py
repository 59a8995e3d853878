"""Helpers for testing agents and the rollout engine without a model (fault injection)."""
