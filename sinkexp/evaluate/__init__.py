"""Evaluators: pure metric functions (metrics.py) and the rows they become (evaluator.py)."""
