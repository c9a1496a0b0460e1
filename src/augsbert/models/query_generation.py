"""Generated (query, passage) pairs for a corpus without labels (GPL's query generation; stage `queries`).

A seq2seq generator (any hub or local encoder-decoder model, e.g. GPL's
BeIR/query-gen-msmarco-t5-base-v1) samples `queries_per_passage` queries per
passage (top-k / top-p, seeded per batch: a rerun writes the same queries);
`paraphrase` mode prefixes the input (`queries.prefix`) so that a paraphrase
model writes similar sentences for symmetric data. The offline generator
`inverse_cloze` needs no weights: a query is one sentence of the passage
(inverse cloze, Lee et al., 2019), drawn with the seed; a passage of one sentence
gives a contiguous span of at least half its words. The artifact has the
BEIR layout the `negatives` stage reads (beir/corpus, queries, qrels_train: each
query's passage is its positive); its key (generator identity, options, seed) is
the cache: a rerun with the same settings generates nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.pool import target_pool
from ..stages.queries import INVERSE_CLOZE, QueriesParams, sizing
from ..stages.sizes import SENTENCE_END
from ..store.model_refs import model_path

log = logging.getLogger(__name__)

GPL_TOTAL = 250_000  # GPL's automatic sizing: about 250K generated queries in all (gpl/train.py)


def target_corpus(data_dir: str | Path, source: str = "corpus") -> pd.DataFrame:
    """Passages (`id`, `title`, `text`, `passage`): a BEIR dataset's corpus, else the unlabeled corpus;
    `sentences`: the distinct sentences of the train split (their scores unused), dev and test sentences left out."""
    data_dir = Path(data_dir)
    if source == "sentences":
        texts = target_pool(data_dir, "train", exclude_eval=True, option="queries.source")[0]
    elif (data_dir / "beir" / "corpus.parquet").is_file():
        return pd.read_parquet(data_dir / "beir" / "corpus.parquet")
    elif not (data_dir / "unlabeled.parquet").is_file():
        raise DataError(f"{data_dir}: the dataset has no corpus to generate queries for (a BEIR corpus or an "
                        "unlabeled corpus: `unlabeled`, a text_file dataset)")
    else:
        texts = pd.read_parquet(data_dir / "unlabeled.parquet")["text"].drop_duplicates().tolist()
    return pd.DataFrame({"id": [f"p{i}" for i in range(len(texts))], "title": "", "text": texts, "passage": texts})


def inverse_cloze(passage: str, rng: np.random.Generator) -> str:
    sentences = [s for s in SENTENCE_END.split(passage) if s.strip()]
    if len(sentences) > 1:
        return sentences[int(rng.integers(len(sentences)))]
    words = passage.split()
    length = max(1, (len(words) + 1) // 2 + int(rng.integers(len(words) // 2 + 1)))
    start = int(rng.integers(len(words) - min(length, len(words)) + 1))
    return " ".join(words[start:start + length])


def seq2seq_generator(params: QueriesParams, device: str):
    """The generator's tokenizer and model; a model that is not an encoder-decoder stops with one message."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    path = model_path(params, params.generator)
    config = AutoConfig.from_pretrained(path)
    if not getattr(config, "is_encoder_decoder", False):
        kinds = ", ".join(getattr(config, "architectures", None) or [config.model_type])
        raise DataError(f"queries.generator {params.generator!r} is not a seq2seq (encoder-decoder) model ({kinds}): "
                        "query generation needs one, e.g. a T5 query generator such as GPL's "
                        "BeIR/query-gen-msmarco-t5-base-v1, or `inverse_cloze` (offline, no weights)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    return tokenizer, AutoModelForSeq2SeqLM.from_pretrained(path).to(device).eval()


def generate(params: QueriesParams, passages: list[str], per_passage: int, device: str,
             offset: int = 0) -> list[list[str]]:
    """`per_passage` generated texts for each passage (seeded per batch by `seed` and the batch's first row;
    `offset`: the first passage's row among all, so that a shard draws what the whole run draws)."""
    if params.generator == INVERSE_CLOZE:
        out = []
        for i, passage in enumerate(passages, start=offset):
            rng = np.random.default_rng([params.seed, i])
            out.append([inverse_cloze(passage, rng) for _ in range(per_passage)])
        return out
    import torch

    tokenizer, model = seq2seq_generator(params, device)
    out = []
    for start in range(0, len(passages), params.batch_size):
        batch = [params.prefix + p for p in passages[start:start + params.batch_size]]
        encoded = tokenizer(batch, max_length=params.input_max_length, truncation=True, padding=True,
                            return_tensors="pt", return_token_type_ids=False).to(device)
        torch.manual_seed(params.seed * 1_000_003 + offset + start)
        with torch.inference_mode():
            generated = model.generate(**encoded, do_sample=True, top_k=params.top_k, top_p=params.top_p,
                                       max_length=params.max_length, num_return_sequences=per_passage)
        texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
        out += [texts[i * per_passage:(i + 1) * per_passage] for i in range(len(batch))]
    return out


def passage_queries(passage_ids, texts: list[list[str]]) -> tuple[list[tuple[str, str, str]], int, int]:
    """(query id, text, passage id) of each passage's distinct non-empty texts (whitespace collapsed), as
    BEIR's QueryGenerator keeps them (a set per passage, beir/generation/generate.py), first occurrence
    first; and the counts of empty and of repeated texts dropped."""
    rows, empty, duplicates = [], 0, 0
    for pid, generated in zip(passage_ids, texts):
        seen = set()
        for k, text in enumerate(generated):
            text = " ".join(text.split())
            if not text:
                empty += 1
            elif text in seen:
                duplicates += 1
            else:
                seen.add(text)
                rows.append((f"{pid}-q{k}", text, pid))
    return rows, empty, duplicates


def passages_to_generate(params: QueriesParams, data: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The corpus, the passages generated for (GPL's sizing: a seeded subset when resized) and how many
    queries each gets."""
    corpus = target_corpus(data, params.source)
    if corpus.empty:
        raise DataError(f"{data}: the corpus is empty")
    per_passage, used = sizing(len(corpus), params.queries_per_passage, params.total)
    if used < len(corpus):  # GPL's sizing: a seeded subset of the passages
        keep = np.sort(np.random.default_rng(params.seed).choice(len(corpus), used, replace=False))
        return corpus, corpus.iloc[keep].reset_index(drop=True), per_passage
    return corpus, corpus, per_passage
