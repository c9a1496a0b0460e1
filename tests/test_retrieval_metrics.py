"""Retrieval metrics and embedding diagnostics against values computed by hand."""

import math

import numpy as np
import pytest

from augsbert.evaluation.retrieval import (
    accuracy_at_k, alignment, average_precision, capped_recall_at_k, precision_at_k, recall_at_k,
    retrieval_metrics, uniformity,
)

RANKING = ["a", "x", "b", "y", "c"]
RELEVANT = {"a", "b", "c", "d"}  # d is never retrieved


def test_average_precision_by_hand():
    # hits at ranks 1, 3, 5: precisions 1, 2/3, 3/5; four relevant items
    assert average_precision(RANKING, RELEVANT) == pytest.approx((1 + 2 / 3 + 3 / 5) / 4)


def test_map_at_k_cut_offs():
    # top 3: hits at 1 and 3 -> (1 + 2/3) / min(3, 4)
    assert average_precision(RANKING, RELEVANT, k=3) == pytest.approx((1 + 2 / 3) / 3)
    # top 1: a hit -> 1 / min(1, 4) = 1
    assert average_precision(RANKING, RELEVANT, k=1) == pytest.approx(1.0)
    # a single relevant item at rank 2, cut at 1 -> 0
    assert average_precision(["x", "a"], {"a"}, k=1) == 0.0
    assert average_precision(["x", "a"], {"a"}, k=2) == pytest.approx(0.5)


def test_precision_recall_capped_accuracy():
    assert precision_at_k(RANKING, RELEVANT, 2) == pytest.approx(0.5)
    assert recall_at_k(RANKING, RELEVANT, 3) == pytest.approx(2 / 4)
    assert capped_recall_at_k(RANKING, RELEVANT, 2) == pytest.approx(1 / 2)
    assert capped_recall_at_k(["a", "b"], {"a", "b", "c"}, 2) == pytest.approx(1.0)  # capped at k
    assert accuracy_at_k(RANKING, RELEVANT, 1) == 1.0 and accuracy_at_k(["x", "y"], {"a"}, 2) == 0.0


def test_retrieval_metrics_averages_and_skips_empty_queries():
    out = retrieval_metrics([RANKING, ["x", "a"], ["q"]], [RELEVANT, {"a"}, set()], ks=(1,))
    assert out["queries"] == 2 and out["skipped_queries"] == 1
    assert out["map"] == pytest.approx(100 * ((1 + 2 / 3 + 3 / 5) / 4 + 0.5) / 2)
    assert out["acc@1"] == pytest.approx(50.0) and out["map@1"] == pytest.approx(50.0)


def test_alignment_and_uniformity_by_hand():
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [0.0, 1.0]])
    # distances: sqrt(2) and 0 -> mean of squares = (2 + 0) / 2
    assert alignment(x, y) == pytest.approx(1.0)
    pts = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    # squared distances 2, 4, 2 -> log mean exp(-2 d^2)
    assert uniformity(pts) == pytest.approx(math.log((2 * math.exp(-4) + math.exp(-8)) / 3))
