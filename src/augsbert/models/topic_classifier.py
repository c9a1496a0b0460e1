"""The topic-classifier baseline's objective (thesis 5.6.1), in sentence-transformers' `losses/` style."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

# The thesis (seed 004): the topic-classifier baseline here, Noise Matching in losses/noise_matching.py, which
# imports this (models sit below losses, so the citation lives here and nothing imports upwards)
REIML_2023 = """
@mastersthesis{reiml2023sentence,
    title={Sentence Embeddings in Various Supervision Settings},
    author={Reiml, Johanna},
    school={Ludwig-Maximilians-Universit{\"a}t M{\"u}nchen},
    year={2023}
}
"""


class TopicClassificationLoss(nn.Module):
    """Cross-entropy of a linear head on the sentence embedding: softmax(W u + b) over the topics.

    The baseline of thesis 5.6.1 ("a classifier head is used to classify the
    topic label"): the encoder and the head are trained together, so the
    encoder learns whatever separates the topics; it is then evaluated as a
    Bi-Encoder like every other model.

    Inputs: one text column and an integer `label` (the topic's index).
    """

    def __init__(self, model, num_labels: int) -> None:
        super().__init__()
        self.model = model
        self.num_labels = num_labels
        self.classifier = nn.Linear(model.get_embedding_dimension(), num_labels, device=model.device)
        self.cross_entropy = nn.CrossEntropyLoss()

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        features = list(sentence_features)[0]
        logits = self.classifier(self.model(features)["sentence_embedding"])
        return self.cross_entropy(logits, labels.long())

    @torch.no_grad()
    def predict(self, embeddings: Tensor) -> Tensor:
        return self.classifier(embeddings.to(self.classifier.weight.device)).argmax(dim=-1)

    def get_config_dict(self) -> dict[str, Any]:
        return {"num_labels": self.num_labels}

    @property
    def citation(self) -> str:
        return REIML_2023
