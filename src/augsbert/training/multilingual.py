"""Multilingual knowledge distillation's training data and loss (Reimers & Gurevych, EMNLP 2020; stage
`multilingual`, docs/methods/multilingual.md).

The teacher M embeds each original s once (stage `source_embeddings`); the student M^ learns, for every parallel
pair (s, t) of a batch B, both terms of the paper's loss

    1/|B| sum_j [ (M(s_j) - M^(s_j))^2 + (M(s_j) - M^(t_j))^2 ]

as sentence-transformers' MSELoss computes it: the rows hold `source`, `target` and `label` = M(s), the loss encodes
both text columns and takes the mean of the two columns' mean squared errors (each a mean over the batch and the
embedding dimensions): the paper's sum divided by 2 x dim, the same minimiser.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from datasets import Dataset
from sentence_transformers.sentence_transformer.losses import MSELoss
from sentence_transformers.sentence_transformer.modules import Dense, Normalize

log = logging.getLogger(__name__)

PAIRS, EMBEDDINGS = "pairs.parquet", "embeddings.npy"  # a `source_embeddings` artifact's files


def teacher_targets(pairs: pd.DataFrame, teacher, batch_size: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The teacher's embeddings of the distinct originals of `pairs` (language, source, target), each encoded once
    (as the teacher embeds: its own length, its own normalisation); `pairs` with `source_id`, the row of its
    original's embedding."""
    sources = list(dict.fromkeys(pairs["source"]))
    where = {s: i for i, s in enumerate(sources)}
    embeddings = teacher.encode(sources, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return pairs.assign(source_id=[where[s] for s in pairs["source"]]), np.asarray(embeddings, dtype=np.float32)


def write_targets(folder: Path, pairs: pd.DataFrame, embeddings: np.ndarray) -> None:
    pairs.to_parquet(folder / PAIRS, index=False)
    np.save(folder / EMBEDDINGS, embeddings, allow_pickle=False)


def read_targets(folder: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """The pairs and the teacher's embeddings of a `source_embeddings` artifact."""
    folder = Path(folder)
    return pd.read_parquet(folder / PAIRS), np.load(folder / EMBEDDINGS, allow_pickle=False)


def training_rows(pairs: pd.DataFrame, embeddings: np.ndarray):
    """The student's rows, as MSELoss reads them: the text columns `source` and `target` (both encoded), then the
    `label` M(s) (the teacher's embedding of the row's original), one row per parallel pair."""
    labels = embeddings[pairs["source_id"].to_numpy()]
    return Dataset.from_dict({"source": pairs["source"].tolist(), "target": pairs["target"].tolist(),
                              "label": labels.tolist()})


def distillation_loss(model):
    """sentence-transformers' MSELoss (the paper's two terms: the original and its translation against M(s))."""
    return MSELoss(model)


def match_dimension(model, dimension: int) -> bool:
    """Give the student a trained linear layer to the teacher's embedding size when its own differs (an XLM-R base,
    768, under a MiniLM teacher, 384): sentence-transformers' Dense module (identity activation), before a final
    Normalize; True when added. The layer is part of the saved student."""
    own = model.get_embedding_dimension()
    if own == dimension:
        return False
    dense = Dense(in_features=own, out_features=dimension, activation_function=torch.nn.Identity()).to(model.device)
    modules = list(model._modules.values())
    at = next((i for i, m in enumerate(modules) if isinstance(m, Normalize)), len(modules))
    model._modules.clear()
    for index, module in enumerate([*modules[:at], dense, *modules[at:]]):  # named 0, 1, ... as the library does
        model._modules[str(index)] = module
    log.info("multilingual: the student's %d dimensions are projected to the teacher's %d (a Dense layer)", own,
             dimension)
    return True
