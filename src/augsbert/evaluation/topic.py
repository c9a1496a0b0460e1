"""Topic classification on frozen embeddings: a linear classifier, macro-F1.

The encoder is not trained: sentences are embedded once, a single linear
layer is trained with Adam on a stratified part of them and scored on the
rest, so the figure measures how linearly the embedding space separates the
topics.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split


def linear_probe(embeddings: np.ndarray, labels: list[str], *, epochs: int = 10, lr: float = 1e-3,
                 batch_size: int = 32, test_fraction: float = 0.2, seed: int = 0) -> dict:
    """Macro-F1 x 100 (and accuracy) of a linear classifier on a stratified held-out part."""
    classes = sorted(set(labels))
    if len(classes) < 2:
        raise ValueError(f"topic classification needs at least two topics, found {classes}")
    y = np.array([classes.index(label) for label in labels])
    counts = np.bincount(y)
    if counts.min() < 2 or round(len(y) * test_fraction) < len(classes):
        raise ValueError(f"topic classification needs at least 2 sentences per topic and a held-out part with one per "
                         f"topic; got {dict(zip(classes, counts.tolist()))} sentences at test_fraction {test_fraction}")
    idx_train, idx_test = train_test_split(np.arange(len(y)), test_size=test_fraction, random_state=seed, stratify=y)
    x = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    target = torch.as_tensor(y)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    head = torch.nn.Linear(x.shape[1], len(classes))
    optimiser = torch.optim.Adam(head.parameters(), lr=lr)
    train = torch.as_tensor(idx_train)
    losses = []
    for _ in range(epochs):
        order = train[torch.randperm(len(train), generator=generator)]
        total = 0.0
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            loss = torch.nn.functional.cross_entropy(head(x[batch]), target[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        losses.append(total / len(order))
    with torch.no_grad():
        predicted = head(x[torch.as_tensor(idx_test)]).argmax(dim=1).numpy()
    truth = y[idx_test]
    return {"topic_macro_f1": float(100 * f1_score(truth, predicted, average="macro")),
            "topic_accuracy": float(100 * np.mean(truth == predicted)),
            "n_train": int(len(idx_train)), "n_test": int(len(idx_test)), "topics": classes,
            "train_loss_per_epoch": [round(v, 5) for v in losses]}
