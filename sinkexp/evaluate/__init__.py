"""Evaluators: pure metric functions (metrics/) and the rows they become (evaluator.py)."""
