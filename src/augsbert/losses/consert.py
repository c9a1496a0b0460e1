"""ConSERT (Yan et al. 2021; seed 000): `ConSERTLoss` and its embedding-level augmentations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn


CONSERT_AUGMENTATIONS = ("none", "shuffle", "token_cutoff", "feature_cutoff", "embedding_dropout")


def nt_xent(z1: Tensor, z2: Tensor, scale: float) -> Tensor:
    """Symmetric NT-Xent (seed 000, equations 2.7-2.9): (1/2N) Σ_i [l(i, i+) + l(i+, i)].

    Each of the 2N views is scored against the other 2N - 1 (itself excluded):
    its positive is the other view of its sentence, the negatives are both
    views of every other sentence.
    """
    n = len(z1)
    z = nn.functional.normalize(torch.cat([z1, z2]), dim=-1)
    logits = scale * z @ z.T
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return nn.functional.cross_entropy(logits, targets)


def shuffled_positions(position_embeddings: Tensor, attention_mask: Tensor, generator=None) -> Tensor:
    """Token shuffling: each sentence's content tokens get a random permutation of their positions.

    [CLS] keeps position 0 and the last real token ([SEP]) its position; padding is untouched.
    """
    batch, length = attention_mask.shape
    out = position_embeddings.expand(batch, length, -1).clone()
    for b, real in enumerate(attention_mask.sum(dim=1).tolist()):
        if real > 3:
            inner = torch.arange(1, real - 1)
            perm = inner[torch.randperm(len(inner), generator=generator)]
            out[b, inner] = position_embeddings[0 if position_embeddings.shape[0] == 1 else b, perm]
    return out


def token_cutoff(embeddings: Tensor, attention_mask: Tensor, rate: float, generator=None) -> Tensor:
    """Zero whole rows: round(rate x real tokens) random real tokens of each sentence (at least one)."""
    out = embeddings.clone()
    for b, real in enumerate(attention_mask.sum(dim=1).tolist()):
        k = max(1, round(rate * real))
        rows = torch.randperm(real, generator=generator)[:k]
        out[b, rows.to(out.device)] = 0.0
    return out


def feature_cutoff(embeddings: Tensor, rate: float, generator=None) -> Tensor:
    """Zero whole columns: round(rate x d) random hidden dimensions of each sentence, at every position."""
    batch, _, dim = embeddings.shape
    k = max(1, round(rate * dim))
    keep = torch.ones(batch, 1, dim, dtype=embeddings.dtype)
    for b in range(batch):
        keep[b, 0, torch.randperm(dim, generator=generator)[:k]] = 0.0
    return embeddings * keep.to(embeddings.device)


def embedding_dropout(embeddings: Tensor, rate: float, generator=None) -> Tensor:
    """Zero single elements with probability `rate` (no rescaling: the values that stay are unchanged)."""
    keep = (torch.rand(embeddings.shape, generator=generator) >= rate).to(embeddings.device, embeddings.dtype)
    return embeddings * keep


class ConSERTLoss(nn.Module):
    """ConSERT (Yan et al. 2021; seed 000, section 3.1.2): augmented embedding matrices, symmetric NT-Xent.

    Both views read the same sentence; each view's L x d embedding matrix (the
    output of the encoder's embedding layer) is augmented before the
    transformer layers: `shuffle` (permuted position ids, applied to the
    position embeddings), `token_cutoff` (zero rows), `feature_cutoff` (zero
    columns, `cutoff_rate`), `embedding_dropout` (zero elements,
    `dropout_rate`) or `none`. The encoder's own dropout is switched off (as
    ConSERT does), so without augmentation the two views are identical. The
    loss is `nt_xent` at `scale` = 1/τ. ConSERT-1 = (feature_cutoff, shuffle),
    ConSERT-2 = (embedding_dropout, shuffle); the augmentation of a view is
    drawn from the global torch RNG in training and from a generator fixed by
    the batch in eval mode.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, views: tuple[str, str] = ("feature_cutoff", "shuffle"), cutoff_rate: float = 0.2,
                 dropout_rate: float = 0.2, scale: float = 20.0) -> None:
        super().__init__()
        unknown = [v for v in views if v not in CONSERT_AUGMENTATIONS]
        if unknown or len(views) != 2:
            raise ValueError(f"ConSERT needs two views from {CONSERT_AUGMENTATIONS}, got {views}")
        self.model, self.views = model, tuple(views)
        self.cutoff_rate, self.dropout_rate, self.scale = cutoff_rate, dropout_rate, scale
        encoder = model[0].auto_model
        for module in encoder.modules():  # ConSERT removes the encoder's dropout
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        embeddings = getattr(encoder, "embeddings", None) or getattr(encoder.base_model, "embeddings")
        self._active: str | None = None
        self._mask: Tensor | None = None
        self._generator = None
        embeddings.position_embeddings.register_forward_hook(self._position_hook)
        embeddings.register_forward_hook(self._embedding_hook)

    def _position_hook(self, module, args, output):
        if self._active == "shuffle":
            return shuffled_positions(output, self._mask.cpu(), self._generator).to(output.device)
        return output

    def _embedding_hook(self, module, args, output):
        if self._active == "token_cutoff":
            return token_cutoff(output, self._mask.cpu(), self.cutoff_rate, self._generator)
        if self._active == "feature_cutoff":
            return feature_cutoff(output, self.cutoff_rate, self._generator)
        if self._active == "embedding_dropout":
            return embedding_dropout(output, self.dropout_rate, self._generator)
        return output

    def encode(self, features: dict[str, Tensor], augmentation: str) -> Tensor:
        """The sentence embeddings of one view under `augmentation`."""
        ids = features["input_ids"]
        self._generator = None if self.model.training else torch.Generator().manual_seed(
            int(ids.sum()) + ids.numel() + CONSERT_AUGMENTATIONS.index(augmentation))
        self._active, self._mask = augmentation, features["attention_mask"]
        try:
            return self.model(features)["sentence_embedding"]
        finally:
            self._active, self._mask, self._generator = None, None, None

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        return nt_xent(self.encode(first, self.views[0]), self.encode(second, self.views[1]), self.scale)

    def get_config_dict(self) -> dict[str, Any]:
        return {"views": list(self.views), "cutoff_rate": self.cutoff_rate, "dropout_rate": self.dropout_rate,
                "scale": self.scale}

    @property
    def citation(self) -> str:
        return """
@inproceedings{yan2021consert,
    title={ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation Transfer},
    author={Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran},
    booktitle={ACL-IJCNLP},
    pages={5065--5075},
    year={2021}
}
"""
