"""Regularized Contrastive Learning (seed 002, Tan et al.: §3, Algorithm 1, App. A): `RegularizedContrastiveLoss`,
its regulator tables and dataset columns.

Two objectives:

- `EntropyContrastiveLoss` (equation 2, losses/entropy_contrastive.py) trains the *entropy models*, one per φ
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

from .common import cosine_logits, diagonal_targets, sentence_embeddings


QUERY_FILE, DOCUMENT_FILE, ROWS_FILE = "query.npy", "document.npy", "rows.parquet"


RCL_CITATION = """
@misc{tan2022regularized,
    title={Regularized Contrastive Learning of Semantic Search},
    author={Tan, Mingxi and Rolland, Alexis and Tian, Andong},
    year={2022}
}
"""


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
        queries, *docs = sentence_embeddings(self.model, sentence_features)
        logits = cosine_logits(queries, torch.cat(docs))
        targets = diagonal_targets(logits)
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
        return RCL_CITATION


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
