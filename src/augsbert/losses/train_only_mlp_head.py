"""SimCSE's train-only MLP head (Gao et al. 2021): `TrainOnlyMLPHeadLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor, nn


SIMCSE_CITATION = """
@inproceedings{gao2021simcse,
    title={{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
    author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
    booktitle={EMNLP},
    year={2021}
}
"""


class TrainOnlyMLPHeadLoss(nn.Module):
    """SimCSE's train-only MLP head (Gao et al. 2021, section 3 and appendix B: `mlp_only_train`; seed 001, 5.1:
    "during training, we employed an additional MLP head on top of the CLS output, but during testing, this head
    was removed"): `pretrain.mlp_head: train_only`.

    Wraps a SimCSE loss (MultipleNegativesRankingLoss or a seed 001 variant) so that every sentence embedding it
    takes from the encoder while it runs is h = tanh(W p + b) of the pooled output p: one dense layer of the
    embedding's width and tanh, as SimCSE's MLPLayer; W ~ N(0, initializer_range²) and b = 0, as the transformers
    model initialises it. The head is a forward hook on the SentenceTransformer that is active only inside this
    loss's forward, and its weights are the loss's own (trained by the trainer, checkpointed in the loss state):
    the encoder's `encode`, the dev evaluator and the saved model see encoder + pooling only.

    Inputs: those of the wrapped loss.
    """

    def __init__(self, model, loss: nn.Module, initializer_range: float | None = None) -> None:
        super().__init__()
        self.model, self.loss = model, loss
        dim = model.get_embedding_dimension()
        if initializer_range is None:
            config = getattr(getattr(model[0], "auto_model", None), "config", None)
            initializer_range = getattr(config, "initializer_range", 0.02)
        self.initializer_range = float(initializer_range)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.Tanh()).to(model.device)
        nn.init.normal_(self.mlp[0].weight, std=self.initializer_range)
        nn.init.zeros_(self.mlp[0].bias)
        self._active = False
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        if not self._active:
            return output
        return {**output, "sentence_embedding": self.mlp(output["sentence_embedding"])}

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None):
        self._active = True
        try:
            return self.loss(sentence_features, labels)
        finally:
            self._active = False

    def get_config_dict(self) -> dict[str, Any]:
        inner = self.loss.get_config_dict() if hasattr(self.loss, "get_config_dict") else {}
        return {**inner, "mlp_head": "train_only", "loss": type(self.loss).__name__}

    @property
    def citation(self) -> str:
        return SIMCSE_CITATION + getattr(self.loss, "citation", "")
