import math

import numpy as np
import pandas as pd
import pytest

from augsbert.evaluation import correlations, cosine_scores


def test_correlations_hand_computed():
    # d = [0, -1, 1, 0]: Spearman = 1 - 6*2 / (4*15) = 0.8; Pearson of the same values = 4 / 5 = 0.8
    out = correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert out == {"spearman": pytest.approx(80.0), "pearson": pytest.approx(80.0), "n_pairs": 4}


def test_spearman_with_ties_uses_average_ranks():
    # ranks [1.5, 1.5, 3, 4] vs [1, 2, 3, 4]: cov 4.5, var 4.5 and 5 -> 4.5 / sqrt(22.5)
    out = correlations([1, 1, 2, 3], [1, 2, 3, 4])
    assert out["spearman"] == pytest.approx(100 * 4.5 / math.sqrt(22.5))
    # Pearson on raw values: x = [1,1,2,3] (mean 1.75), y = [1,2,3,4] (mean 2.5)
    x, y = np.array([1, 1, 2, 3.0]), np.array([1, 2, 3, 4.0])
    expected = ((x - x.mean()) * (y - y.mean())).sum() / math.sqrt(((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum())
    assert out["pearson"] == pytest.approx(100 * expected)


def test_constant_input_is_undefined():
    out = correlations([1, 1, 1], [1, 2, 3])
    assert math.isnan(out["spearman"]) and math.isnan(out["pearson"])
    with pytest.raises(ValueError):
        correlations([1, 2], [1, 2, 3])


class FakeModel:
    vectors = {"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [1.0, 1.0]}

    def __init__(self):
        self.calls = []

    def encode(self, texts, batch_size, convert_to_numpy, normalize_embeddings, show_progress_bar):
        self.calls.append(list(texts))
        v = np.array([self.vectors[t] for t in texts])
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_cosine_scores_encode_each_text_once():
    model = FakeModel()
    scores = cosine_scores(model, [("a", "b"), ("a", "c"), ("c", "c")], show_progress=False)
    assert scores == pytest.approx([0.0, 1 / math.sqrt(2), 1.0])
    assert model.calls == [["a", "b", "c"]]  # each distinct text once, in first-seen order
