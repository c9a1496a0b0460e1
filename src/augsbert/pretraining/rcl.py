"""Regularized Contrastive Learning (seed 002, Tan et al.: §3, Algorithm 1, App. A), in sentence-transformers' `losses/` style.

Two objectives:

- `EntropyContrastiveLoss` (equation 2) trains the *entropy models*, one per φ
  (stage `rcl_entropy`); each then encodes every training query and document
  once (Algorithm 1 line 4) into a `RegulatorTable`;
- `RegularizedContrastiveLoss` (equation 3) trains the final model with the
  contrastive loss of equation 1 plus two regulators per entropy model, whose
  embeddings are looked up by the batch rows' ids and never receive gradient.

Both use cosine similarity without a temperature (equation 1 has none). Rows
are (anchor = query, positive = index/document[, negative = NLI contradiction]);
the contradiction, where present, only widens equation 1's denominator (and so
equation 2's distribution p_i) as in SBERT's NLI training: the paper does not
say how it enters equations 2-3, and it gets no regulator (equation 3 has
regulators for queries and indices only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

QUERY_FILE, DOCUMENT_FILE, ROWS_FILE = "query.npy", "document.npy", "rows.parquet"

CITATION = """
@misc{tan2022regularized,
    title={Regularized Contrastive Learning of Semantic Search},
    author={Tan, Mingxi and Rolland, Alexis and Tian, Andong},
    year={2022}
}
"""


def cosine_logits(queries: Tensor, docs: Tensor) -> Tensor:
    """cos(q_i, d_j) for every pair: equation 1's logits (no temperature)."""
    return nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(docs, dim=-1).T


def _targets(logits: Tensor) -> Tensor:
    return torch.arange(len(logits), device=logits.device)


def _embeddings(model, sentence_features: Iterable[dict[str, Tensor]]) -> list[Tensor]:
    # a column absent from the batch (no NLI contradiction) arrives as an empty dict
    return [model(features)["sentence_embedding"] for features in sentence_features if features]


class EntropyContrastiveLoss(nn.Module):
    """Equation 2 of RCL: J_i = l_i - φ Σ_j p_ij log p_ij, with p_ij = softmax_j cos(q_i, d_j).

    l_i is equation 1, -log softmax_j cos(q_i, d_j) at j = i, over the batch's
    documents (and NLI contradictions, if the rows have them). The entropy
    term is φ·H(p_i) over the same distribution, every j included: the
    paper's "i ≠ j" beside the definition of score_train is read as a remark,
    because excluding the diagonal would leave p unnormalised. φ > 0 sharpens
    p_i (the query becomes more certain of its document), φ < 0 flattens it;
    φ = 0 is equation 1. Reduction: mean over the batch.

    Inputs: (anchor, positive[, negative]) texts; a `label` column is ignored.
    """

    def __init__(self, model, phi: float) -> None:
        super().__init__()
        self.model = model
        self.phi = phi

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        queries, *docs = _embeddings(self.model, sentence_features)
        logits = cosine_logits(queries, torch.cat(docs))
        log_p = torch.log_softmax(logits, dim=1)
        contrastive = nn.functional.nll_loss(log_p, _targets(logits))
        entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
        return contrastive + self.phi * entropy

    def get_config_dict(self) -> dict[str, Any]:
        return {"phi": self.phi}

    @property
    def citation(self) -> str:
        return CITATION


class RegulatorTable:
    """The frozen embeddings of one entropy model: row id -> (Au_q, Au_d), from arrays or an artifact.

    `query[i]` / `document[i]` are the entropy model's embeddings of training
    row i's query and document. An artifact's .npy files are memory-mapped, so
    a large corpus (MNLI + SNLI: ~0.5M rows per table) is paged in per batch,
    not loaded whole.
    """

    def __init__(self, query, document, name: str = "") -> None:
        if len(query) != len(document):
            raise ValueError(f"regulator table {name}: {len(query)} query and {len(document)} document rows")
        self.query, self.document, self.name = query, document, name

    @classmethod
    def load(cls, path: str | Path) -> RegulatorTable:
        path = Path(path)
        return cls(np.load(path / QUERY_FILE, mmap_mode="r", allow_pickle=False),
                   np.load(path / DOCUMENT_FILE, mmap_mode="r", allow_pickle=False), name=str(path))

    def __len__(self) -> int:
        return len(self.query)

    def lookup(self, ids: Tensor, device) -> tuple[Tensor, Tensor]:
        """Au_q and Au_d of the rows `ids`, as constants: detached, no gradient to whatever made them."""
        index = ids.detach().cpu().long()
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= len(self)):
            raise IndexError(f"regulator table {self.name}: row id out of range 0..{len(self) - 1}")

        def rows(table) -> Tensor:
            if isinstance(table, Tensor):
                return table.detach()[index].to(device)
            return torch.from_numpy(np.ascontiguousarray(table[index.numpy()])).to(device)

        return rows(self.query), rows(self.document)


class RegularizedContrastiveLoss(nn.Module):
    """Equation 3 of RCL: equation 1 plus two regulators per entropy model n.

    J_i = l_i + Σ_n CE_k(cos(q_i, Au^n_{q_k}); i) + Σ_n CE_k(cos(d_i, Au^n_{d_k}); i),
    where l_i is equation 1 (cosine logits, no temperature, the batch's
    documents and contradictions as candidates), k runs over the batch, and
    Au^n_{q_k}, Au^n_{d_k} are entropy model n's precomputed embeddings of row
    k's query and document: constants (no gradient), looked up by the row ids
    the trainer passes as `labels`. The regulators are unweighted, as in the
    paper; equation 3's numerator "ind_j" is read as ind_i (a typo: otherwise
    the first term is not equation 1). Without regulators it is equation 1.
    Reduction: mean over the batch, per term.

    Inputs: (anchor, positive[, negative]) texts and `label` = the row id in
    the regulator tables.
    """

    def __init__(self, model, regulators: Sequence[RegulatorTable] = ()) -> None:
        super().__init__()
        self.model = model
        self.regulators = list(regulators)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        queries, *docs = _embeddings(self.model, sentence_features)
        logits = cosine_logits(queries, torch.cat(docs))
        targets = _targets(logits)
        loss = nn.functional.cross_entropy(logits, targets)
        if self.regulators and labels is None:
            raise ValueError("RegularizedContrastiveLoss needs the rows' ids (the `label` column) to find "
                             "their regulator embeddings")
        for table in self.regulators:
            aug_q, aug_d = table.lookup(labels, queries.device)
            loss = loss + nn.functional.cross_entropy(cosine_logits(queries, aug_q.to(queries.dtype)), targets)
            loss = loss + nn.functional.cross_entropy(cosine_logits(docs[0], aug_d.to(docs[0].dtype)), targets)
        return loss

    def get_config_dict(self) -> dict[str, Any]:
        return {"regulators": len(self.regulators)}

    @property
    def citation(self) -> str:
        return CITATION


def rcl_columns(rows: Sequence[tuple]) -> dict[str, list]:
    """Dataset columns of RCL rows `(id, anchor, positive[, negative])`: the texts, then `label` = the id.

    The trainer's collator hands the `label` column to the loss as `labels`,
    which is how a batch finds its rows' regulator embeddings.
    """
    if not rows:
        raise ValueError("RCL has no training rows")
    width = len(rows[0])
    names = ("anchor", "positive", "negative")[: width - 1]
    columns = {name: [row[i + 1] for row in rows] for i, name in enumerate(names)}
    columns["label"] = [int(row[0]) for row in rows]
    return columns


def load_regulators(paths: Sequence[str | Path]) -> list[RegulatorTable]:
    return [RegulatorTable.load(p) for p in paths]
