"""Deletion noise T(x): keep each word (or token) with probability 1 - ratio, in order, at least one.

TSDAE (seed 003, section 3) deletes 60 % of the input's words; Noise Matching
(thesis 4.2.3) uses the same T(x) as its positive. The noise is drawn per batch
from a generator seeded by the run seed and the batch's texts, not from a global
RNG: a resumed job collates a batch before the trainer restores its RNG state,
and this way it still draws exactly the noise of the uninterrupted run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch


def batch_rng(seed: int, texts: Sequence[str]) -> np.random.Generator:
    """A generator fixed by (seed, the batch's texts in order)."""
    digest = hashlib.sha256("\x1f".join(texts).encode("utf-8")).digest()
    return np.random.default_rng([seed, *np.frombuffer(digest[:16], dtype=np.uint32).tolist()])


def keep_mask(n: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Which of n units survive deletion at `ratio`; never none (one random unit is kept then)."""
    keep = rng.random(n) >= ratio
    if n and not keep.any():
        keep[rng.integers(n)] = True
    return keep


def delete_words(text: str, ratio: float, rng: np.random.Generator) -> str:
    """T(x) on words: whitespace-separated words, punctuation stays attached to its word.

    TSDAE splits with nltk's word tokenizer (punctuation separate); we split on
    white space so no tokenizer data has to be downloaded. Order is kept.
    """
    words = text.split()
    if not words:
        return text
    return " ".join(w for w, k in zip(words, keep_mask(len(words), ratio, rng)) if k)


def delete_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_ids: Sequence[int], ratio: float,
                  rng: np.random.Generator, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """T(x) on the model's tokens: special tokens stay, each other token is kept with 1 - ratio.

    Returns new (input_ids, attention_mask), re-padded to the longest kept row.
    """
    special = torch.isin(input_ids, torch.tensor(list(special_ids), dtype=input_ids.dtype))
    rows = []
    for ids, mask, spec in zip(input_ids, attention_mask.bool(), special):
        real = ids[mask]
        content = ~spec[mask]
        keep = torch.ones(len(real), dtype=torch.bool)
        positions = content.nonzero().flatten()
        keep[positions] = torch.from_numpy(keep_mask(len(positions), ratio, rng))
        rows.append(real[keep])
    width = max(len(r) for r in rows)
    ids_out = torch.full((len(rows), width), pad_id, dtype=input_ids.dtype)
    mask_out = torch.zeros((len(rows), width), dtype=attention_mask.dtype)
    for i, r in enumerate(rows):
        ids_out[i, : len(r)] = r
        mask_out[i, : len(r)] = 1
    return ids_out, mask_out


def deletion_collator(base_cls):
    """A subclass of the sentence-transformers collator `base_cls` that noises one column.

    The column named `noised` holds the clean text in the dataset; the collator
    replaces it with T(text) (word level before tokenising, token level after).
    """

    class DeletionCollator(base_cls):
        def __init__(self, *args, ratio: float, unit: str, seed: int, tokenizer, column: str = "noised", **kwargs):
            super().__init__(*args, **kwargs)
            self.ratio, self.unit, self.seed, self.tokenizer, self.column = ratio, unit, seed, tokenizer, column

        def __call__(self, features):
            texts = [row[self.column] for row in features]
            rng = batch_rng(self.seed, texts)
            if self.unit == "word":
                features = [{**row, self.column: delete_words(row[self.column], self.ratio, rng)} for row in features]
            batch = super().__call__(features)
            if self.unit == "token":
                ids, mask = f"{self.column}_input_ids", f"{self.column}_attention_mask"
                batch[ids], batch[mask] = delete_tokens(batch[ids], batch[mask], self.tokenizer.all_special_ids,
                                                        self.ratio, rng, self.tokenizer.pad_token_id)
                batch.pop(f"{self.column}_token_type_ids", None)  # all zeros for one segment: recomputed by the model
            return batch

    return DeletionCollator
