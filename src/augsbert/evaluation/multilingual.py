"""A Bi-Encoder's figures per language of a parallel dataset (stage `language_suite`; docs/methods/multilingual.md):

- `sts_l_l`: Spearman x 100 of the cosine of both sentences' translations against the gold score (monolingual STS
  in the language l);
- `sts_en_l`, `sts_l_en`: cross-lingual STS: sentence1 in the source language (English: `en`) and sentence2 in l,
  and the other way round, against the original's gold score;
- `translation_acc`: translation retrieval, as the paper's bitext figures (and sentence-transformers'
  TranslationEvaluator, one direction): for each held-out source sentence, whether its own translation is the
  nearest (cosine) of all the held-out target-language sentences; accuracy x 100;
- `unk_share`: the share of [UNK] tokens among the tokens of the language's test sentences x 100 (special tokens
  not counted): what an English-only vocabulary cannot read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data.parallel import held_out_translations, translated_pairs
from ..data.tables import pairs_of
from .similarity import Encoder, correlations

# figure -> the translated pairs it scores (augsbert.data.parallel.translated_pairs)
STS_FIGURES = {"sts_l_l": "l-l", "sts_en_l": "en-l", "sts_l_en": "l-en"}
FIGURES = (*STS_FIGURES, "translation_acc", "unk_share")
SIMILARITY_CHUNK = 4096  # source sentences compared with every target at a time (bounded memory)


def translation_accuracy(sources: np.ndarray, targets: np.ndarray, gold: Sequence[int]) -> float:
    """Accuracy x 100 of finding each source's translation: row i of `sources` is right when the row of `targets`
    most similar to it (cosine; the first of equals) is `gold[i]`."""
    sources = _normalised(sources)
    targets = _normalised(targets)
    gold = np.asarray(gold)
    if len(sources) != len(gold) or not len(sources):
        raise ValueError(f"need one gold target per source, got {len(sources)} sources and {len(gold)} targets")
    hits = 0
    for start in range(0, len(sources), SIMILARITY_CHUNK):
        nearest = np.argmax(sources[start:start + SIMILARITY_CHUNK] @ targets.T, axis=1)
        hits += int((nearest == gold[start:start + SIMILARITY_CHUNK]).sum())
    return 100.0 * hits / len(sources)


def _normalised(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def unk_share(tokenizer, texts: Sequence[str]) -> float | None:
    """Share x 100 of the tokenizer's unknown token among the tokens of `texts` (no special tokens, no
    truncation); None for a tokenizer without an unknown token (a byte-level one reads every text)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not texts:
        return None
    ids = tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]
    total = sum(len(row) for row in ids)
    return 100.0 * sum(row.count(unk) for row in ids) / total if total else None


def retrieval_task(parallel: str | Path, language: str) -> tuple[list[str], list[str], list[int]]:
    """The held-out sources of `language`, the distinct targets they are searched among, and each source's own
    translation's index among them."""
    pairs = held_out_translations(parallel, language)
    targets = list(dict.fromkeys(pairs["target"]))
    where = {t: i for i, t in enumerate(targets)}
    return pairs["source"].tolist(), targets, [where[t] for t in pairs["target"]]


def language_figures(encode: Encoder, tokenizer, parallel: str | Path, language: str) -> tuple[dict, dict, dict]:
    """A model's figures for `language` of the parallel dataset `parallel` (a data artifact): the figures (FIGURES,
    those its data allow), their details (pair and sentence counts, Pearson) and the figures skipped, with why."""
    figures, details, skipped = {}, {}, {}
    sets = translated_pairs(parallel, language)
    for figure, kind in STS_FIGURES.items():
        if kind not in sets:
            skipped[figure] = "the dataset has no translated STS pairs (a parallel file)"
            continue
        table = sets[kind]
        scores = correlations(encode.cosine(pairs_of(table)), table["score"])
        figures[figure] = scores["spearman"]
        details[figure] = scores
    sources, targets, gold = retrieval_task(parallel, language)
    if sources:
        figures["translation_acc"] = translation_accuracy(encode(sources), encode(targets), gold)
        details["translation_acc"] = {"sources": len(sources), "targets": len(targets)}
    else:
        skipped["translation_acc"] = f"no held-out {language} translations (a parallel file without test)"
    share = unk_share(tokenizer, targets)  # the held-out sentences in the language (its test split's)
    if share is None:
        skipped["unk_share"] = "no test sentences, or the tokenizer has no unknown token"
    else:
        figures["unk_share"] = share
        details["unk_share"] = {"sentences": len(targets)}
    return figures, details, skipped
