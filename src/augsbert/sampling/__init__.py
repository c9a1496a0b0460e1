"""Pair sampling: BM25 and semantic-search neighbours, KDE-based selection (stable public API)."""

from .bm25 import bm25_neighbors, default_tokenize
from .kde import iterative_kde, kde_sample
from .semantic import semantic_neighbors

__all__ = ["bm25_neighbors", "default_tokenize", "iterative_kde", "kde_sample", "semantic_neighbors"]
