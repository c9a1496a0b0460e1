"""Metrics and model scoring for evaluation stages."""

from .similarity import correlations, cosine_scores

__all__ = ["correlations", "cosine_scores"]
