"""The training rows of the `pretrain` and `rcl_entropy` stages, and the check that ties them together; the corpora
an objective trains on (its entry's `corpus`: `sentence_corpus`, `triple_corpus`, `rcl_corpus`).

`pretrain` trains on a corpus of sentences or on NLI triples; an `rcl` run
trains on numbered rows (id, anchor, positive[, negative]) whose embeddings
its `rcl_entropy` inputs computed beforehand. Both stages read their rows
here, so neither stage module imports the other's rows (and `rcl_entropy`
can import `pretrain` without `pretrain` importing it back).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..store.artifacts import read_json
from ..data import DataError
from ..data.readers import read_text_table
from ..data.tables import RowReport
from ..stages.pretrain import PretrainParams
from ..stages.rcl_entropy import RclEntropyParams
from ..data.pool import evaluation_sentences, target_pool
from ..data.nli import read_nli_triples, triples_format

HELD_OUT_MAX = 2000
TRIPLE_COLUMNS = ["anchor", "positive", "negative"]
ENTROPY_INPUT = "entropy_"  # the final `rcl` node's inputs: entropy_0, entropy_1, ... (rcl_phis order)


def corpus(spec: dict, params: PretrainParams | RclEntropyParams) -> tuple[list[str], list[str], int]:
    """(train sentences, held-out sentences, dev/test sentences removed), all unique and in a seeded order."""
    inputs = spec["inputs"]
    kind = params.pool
    if kind == "all":  # whatever sentences the dataset has: a text_file corpus has only an unlabeled part
        parts = [p for p in ("train", "unlabeled") if (Path(inputs["data"]) / f"{p}.parquet").is_file()]
        kind = "+".join(parts) or "train"
    pool, own_eval, _ = target_pool(inputs["data"], kind, exclude_eval=False, option="pretrain.pool")
    removed = 0
    if params.exclude_eval_sentences:
        evaluated = own_eval
        if inputs.get("eval") and inputs["eval"] != inputs["data"]:
            evaluated = evaluated | evaluation_sentences(inputs["eval"])
        removed = sum(t in evaluated for t in pool)
        pool = [t for t in pool if t not in evaluated]
    order = np.random.default_rng(params.seed).permutation(len(pool))
    n_held = min(HELD_OUT_MAX, max(1, int(round(params.held_out * len(pool)))))
    if len(pool) - n_held < params.batch_size:
        raise DataError(f"{inputs['data']}: the pretrain corpus has {len(pool)} sentence(s) after removing "
                        f"{removed} dev/test sentence(s); it needs more than pretrain.batch_size "
                        f"({params.batch_size}) plus the held-out slice")
    held = sorted(pool[i] for i in order[:n_held])
    train = [pool[i] for i in np.sort(order[n_held:])]
    return train, held, removed


def read_triples(path: str | Path | list, fmt: str | None = None) -> list[tuple[str, str, str]]:
    """NLI triples (anchor, entailment, contradiction) from .tsv/.csv (header), .jsonl or .parquet, or built
    from SNLI / MultiNLI jsonl as released (data/nli.py); a list of files gives their triples in order.

    `fmt` (pretrain.triples_format): `triples`, `nli`, or None / `auto` = told from the name or first record.
    """
    if isinstance(path, (list, tuple)):
        return [t for p in path for t in read_triples(p, fmt)]
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (pretrain.triples); put the NLI triples there (columns anchor, "
                        "positive, negative, or SNLI / MultiNLI jsonl as released) or change pretrain.triples")
    if triples_format(path, fmt) == "nli":
        return read_nli_triples(path)
    report = RowReport(f"pretrain.triples ({path.name})")
    table = read_text_table(path, report, {c: c for c in TRIPLE_COLUMNS}, texts=tuple(TRIPLE_COLUMNS),
                            what="pretrain.triples")
    report.settle()
    table = table[(table[TRIPLE_COLUMNS] != "").all(axis=1)]
    return list(table[TRIPLE_COLUMNS].itertuples(index=False, name=None))


def split_triples(triples: list[tuple], held_out: float, seed: int, evaluated: set[str]) -> tuple[list, list, int]:
    """Triples without evaluated sentences, split into train / held-out by a seeded permutation."""
    kept = [t for t in triples if not (set(t) & evaluated)]
    order = np.random.default_rng(seed).permutation(len(kept))
    n_held = min(HELD_OUT_MAX, max(1, int(round(held_out * len(kept)))))
    return [kept[i] for i in np.sort(order[n_held:])], [kept[i] for i in np.sort(order[:n_held])], len(triples) - len(kept)


def rcl_rows(spec: dict, params: PretrainParams | RclEntropyParams) -> tuple[list[tuple], list[tuple], int]:
    """(training rows, held-out rows, dev/test rows removed); a row is (id, anchor, positive[, negative])."""
    inputs = spec["inputs"]
    if params.triples:
        evaluated = inputs.get("eval", inputs.get("data"))
        exclude = evaluation_sentences(evaluated) if params.exclude_eval_sentences else set()
        train, held, removed = split_triples(read_triples(params.triples, params.triples_format),
                                             params.held_out, params.seed, exclude)
    else:  # no NLI file: the corpus sentence as its own positive (dropout views)
        sentences, held_sentences, removed = corpus(spec, params)
        train, held = [(s, s) for s in sentences], [(s, s) for s in held_sentences]
    if len(train) < 2:
        raise DataError("rcl: fewer than two training rows")
    n = len(train)
    return [(i, *row) for i, row in enumerate(train)], [(n + i, *row) for i, row in enumerate(held)], removed


def rows_digest(rows: list[tuple]) -> str:
    """sha256 of the (id, query, document) of every row: which rows a regulator table belongs to."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(list(row[:3]), ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


def entropy_paths(inputs: dict[str, str]) -> list[str]:
    """The entropy artifacts of a final `rcl` node, in rcl_phis order."""
    names = sorted((k for k in inputs if k.startswith(ENTROPY_INPUT)), key=lambda k: int(k[len(ENTROPY_INPUT):]))
    return [inputs[k] for k in names]


def checked_regulators(inputs: dict[str, str], rows: list[tuple]) -> list[str]:
    """The entropy artifacts, after checking each encoded exactly these rows (same file, split and order)."""
    expected = rows_digest(rows)
    paths = entropy_paths(inputs)
    for path in paths:
        found = read_json(Path(path) / "metrics.json").get("rows_digest")
        if found != expected:
            raise DataError(f"{path}: its embeddings belong to other training rows than this rcl run's "
                            "(different triples file, seed, held_out or corpus); re-run that entropy model")
    return paths


# The corpora an objective trains on (its entry's `corpus`): (params, train, held out, removed, triples,
# held-out triples); the texts the trainer reads are the first of each row (`train`, `held`).
def sentence_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """The unique sentences of the corpus (pretrain.pool), without the evaluated dataset's dev/test sentences."""
    train, held, removed = corpus(spec, params)
    return params, train, held, removed, None, None


def triple_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """NLI triples (anchor, entailment, contradiction) from `pretrain.triples`."""
    eval_sentences = evaluation_sentences(evaluated) if params.exclude_eval_sentences else set()
    triples, held_triples, removed = split_triples(read_triples(params.triples, params.triples_format),
                                                   params.held_out, params.seed, eval_sentences)
    return params, [t[0] for t in triples], [t[0] for t in held_triples], removed, triples, held_triples


def rcl_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """Rows with ids; the entropy models' embeddings of the same rows become the loss's regulators."""
    triples, held_triples, removed = rcl_rows(spec, params)
    params = params.replace(regulators=checked_regulators(spec["inputs"], triples + held_triples))
    return params, [t[1] for t in triples], [t[1] for t in held_triples], removed, triples, held_triples
