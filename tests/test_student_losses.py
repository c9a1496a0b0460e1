"""`student.loss`: the rows each objective learns from, and each loss's value against a manual computation."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from augsbert.models.student_losses import student_loss, student_rows
from conftest import train_params

PAIRS = pd.DataFrame({"sentence1": ["a", "a", "b", "c"], "sentence2": ["b", "c", "d", "d"],
                      "score": [0.9, 0.1, 0.85, 0.5]})


def test_rows_per_loss():
    for loss in ("cosine", "cosent", "angle"):
        assert student_rows(PAIRS, train_params(**{"loss": loss})).equals(PAIRS[["sentence1", "sentence2", "score"]])
    mnrl = student_rows(PAIRS, train_params(**{"loss": "mnrl", "positive_threshold": 0.8}))
    assert mnrl.values.tolist() == [["a", "b"], ["b", "d"]]
    hard = student_rows(PAIRS, train_params(**{"loss": "mnrl", "positive_threshold": 0.8, "hard_negatives": True,
                                "negative_threshold": 0.2}))
    assert hard.values.tolist() == [["a", "b", "c"]]  # b has no partner scored below 0.2: dropped
    margin = student_rows(PAIRS, train_params(**{"loss": "margin_mse"}))
    # per sentence: its best partner against each lower-scored one (pairs count from both sides)
    assert margin[["anchor", "positive", "negative"]].values.tolist() == [
        ["a", "b", "c"], ["b", "a", "d"], ["c", "d", "a"], ["d", "b", "c"]]
    assert margin["label"].tolist() == pytest.approx([0.8, 0.05, 0.4, 0.35])
    with pytest.raises(ValueError, match="positive_threshold"):
        student_rows(PAIRS, train_params(**{"loss": "mnrl", "positive_threshold": 0.95}))


@pytest.fixture(scope="module")
def model(tiny_model):
    from sentence_transformers import SentenceTransformer

    m = SentenceTransformer(tiny_model, device="cpu")
    m.eval()  # no dropout: the loss and the manual value see the same embeddings
    return m


def value(model, name: str, columns: list[list[str]], labels, **params) -> tuple[torch.Tensor, list[torch.Tensor]]:
    loss = student_loss(model, train_params(**{"loss": name, "scale": 20.0, **params}))
    features = [model.tokenize(texts) for texts in columns]
    with torch.no_grad():
        out = loss(features, torch.tensor(labels, dtype=torch.float32) if labels is not None else None)
        embeddings = [model(model.tokenize(texts))["sentence_embedding"] for texts in columns]
    return out, embeddings


A = ["the cat sits", "a dog runs", "rain falls today", "stocks went up"]
B = ["a cat is sitting", "the dog is running", "it is raining", "markets rose"]
SCORES = [0.9, 0.6, 0.3, 0.1]


def test_cosine_loss_is_mse_of_cosines(model):
    out, (u, v) = value(model, "cosine", [A, B], SCORES)
    assert out.item() == pytest.approx(F.mse_loss(F.cosine_similarity(u, v), torch.tensor(SCORES)).item(), rel=1e-5)


def test_cosent_loss_manual(model):
    out, (u, v) = value(model, "cosent", [A, B], SCORES)
    cos = F.cosine_similarity(u, v) * 20.0
    terms = [cos[j] - cos[i] for i in range(4) for j in range(4) if SCORES[i] > SCORES[j]]
    manual = torch.logsumexp(torch.stack([torch.tensor(0.0), *terms]), dim=0)
    assert out.item() == pytest.approx(manual.item(), rel=1e-5)


def test_angle_loss_manual(model):
    out, (u, v) = value(model, "angle", [A, B], SCORES)
    # AnglE (sentence-transformers' form): |cos(u, v) + sin(u, v)| of the L2-normalised vectors, dimension i
    # paired with i + D/2 for the sine term
    x, y = F.normalize(u, dim=1), F.normalize(v, dim=1)
    (x1, x2), (y1, y2) = torch.chunk(x, 2, dim=1), torch.chunk(y, 2, dim=1)
    sim = torch.abs((x * y).sum(1) + (x2 * y1 - x1 * y2).sum(1)) * 20.0
    terms = [sim[j] - sim[i] for i in range(4) for j in range(4) if SCORES[i] > SCORES[j]]
    manual = torch.logsumexp(torch.stack([torch.tensor(0.0), *terms]), dim=0)
    assert out.item() == pytest.approx(manual.item(), rel=1e-4)


@pytest.mark.parametrize("negatives", [False, True])
def test_mnrl_loss_manual(model, negatives):
    columns = [A, B] + ([list(reversed(B))] if negatives else [])
    out, embeddings = value(model, "mnrl", columns, None)
    docs = torch.cat(embeddings[1:], dim=0)
    logits = 20.0 * F.normalize(embeddings[0], dim=-1) @ F.normalize(docs, dim=-1).T  # N x (N or 2N)
    assert out.item() == pytest.approx(F.cross_entropy(logits, torch.arange(4)).item(), rel=1e-5)


def test_margin_mse_loss_manual(model):
    negatives = list(reversed(B))
    margins = [0.5, 0.2, -0.1, 0.3]
    out, (q, p, n) = value(model, "margin_mse", [A, B, negatives], margins)
    manual = F.mse_loss(F.cosine_similarity(q, p) - F.cosine_similarity(q, n), torch.tensor(margins))
    assert out.item() == pytest.approx(manual.item(), rel=1e-5)


def test_plan_keys_keep_cosine_students_and_prune_inert_options():
    from augsbert.stages.student import student_loss_options

    base = {"loss": "cosine", "scale": 20.0, "positive_threshold": 0.8, "hard_negatives": False,
            "negative_threshold": 0.2, "group_by_length": True, "megabatch": 400, "epochs": 3}
    assert student_loss_options(base) == {"group_by_length": True, "megabatch": 400, "epochs": 3}
    assert student_loss_options({**base, "loss": "cosent"}) == {"loss": "cosent", "scale": 20.0,
                                                                 "group_by_length": True, "megabatch": 400,
                                                                 "epochs": 3}
    mnrl = student_loss_options({**base, "loss": "mnrl", "hard_negatives": True})
    assert mnrl == {"loss": "mnrl", "scale": 20.0, "positive_threshold": 0.8, "hard_negatives": True,
                    "negative_threshold": 0.2, "group_by_length": False, "epochs": 3}


@pytest.mark.parametrize("loss", ["mnrl", "margin_mse"])
def test_student_trains_on_the_rows_of_its_loss(tmp_path, tiny_model, loss):
    from conftest import theme_pairs, train_params

    from augsbert.training.pairs import fit

    train, dev = theme_pairs(36, 1), theme_pairs(12, 2)
    train["sentence1"] = train["sentence1"].iloc[::3].repeat(3).to_numpy()  # 3 partners per anchor, as silver
    params = train_params(epochs=1, batch_size=8, loss=loss, scale=20.0, positive_threshold=0.7,
                          hard_negatives=False, group_by_length=False)
    rows = student_rows(train, params)
    result = fit("be", tiny_model, train, dev, params, tmp_path / "work", "cpu", "fp32")
    assert result.metrics["steps"] == -(-len(rows) // 8)  # one epoch over the loss's rows, not the pairs
    assert result.metrics["train_loss"] > 0
