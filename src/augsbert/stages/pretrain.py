"""Stage `pretrain`: unsupervised pre-training of a sentence encoder (`pretrain.objective`).

Corpus: the unique sentences of the `data` input (`pretrain.pool`), without
the evaluated dataset's dev/test sentences; a held-out slice measures the
objective's loss. The chosen checkpoint is evaluated on the evaluated
dataset's test split like the zero-shot model, and saved as a
sentence-transformers model under `model/`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..artifacts import artifact_dir, write_json
from ..data import DataError
from ..data.loaders import read_text_table
from ..data.tables import RowReport
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from .common import checkpoint_dir, evaluation_sentences, model_path, precision, read_split, target_pool

log = logging.getLogger(__name__)

HELD_OUT_MAX = 2000
TRIPLE_COLUMNS = ["anchor", "positive", "negative"]


def corpus(spec: dict) -> tuple[list[str], list[str], int]:
    """(train sentences, held-out sentences, dev/test sentences removed), all unique and in a seeded order."""
    params, inputs = spec["params"], spec["inputs"]
    kind = params["pool"]
    if kind == "all":  # whatever sentences the dataset has: a text_file corpus has only an unlabeled part
        parts = [p for p in ("train", "unlabeled") if (Path(inputs["data"]) / f"{p}.parquet").is_file()]
        kind = "+".join(parts) or "train"
    pool, own_eval, _ = target_pool(inputs["data"], kind, exclude_eval=False, option="pretrain.pool")
    removed = 0
    if params["exclude_eval_sentences"]:
        evaluated = own_eval
        if inputs.get("eval") and inputs["eval"] != inputs["data"]:
            evaluated = evaluated | evaluation_sentences(inputs["eval"])
        removed = sum(t in evaluated for t in pool)
        pool = [t for t in pool if t not in evaluated]
    order = np.random.default_rng(params["seed"]).permutation(len(pool))
    n_held = min(HELD_OUT_MAX, max(1, int(round(params["held_out"] * len(pool)))))
    if len(pool) - n_held < params["batch_size"]:
        raise DataError(f"{inputs['data']}: the pretrain corpus has {len(pool)} sentence(s) after removing "
                        f"{removed} dev/test sentence(s); it needs more than pretrain.batch_size "
                        f"({params['batch_size']}) plus the held-out slice")
    held = sorted(pool[i] for i in order[:n_held])
    train = [pool[i] for i in np.sort(order[n_held:])]
    return train, held, removed


def read_triples(path: str | Path | list, fmt: str | None = None) -> list[tuple[str, str, str]]:
    """NLI triples (anchor, entailment, contradiction) from .tsv/.csv (header), .jsonl or .parquet, or built
    from SNLI / MultiNLI jsonl as released (data/nli.py); a list of files gives their triples in order.

    `fmt` (pretrain.triples_format): `triples`, `nli`, or None / `auto` = told from the name or first record.
    """
    from ..data.nli import read_nli_triples, triples_format

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


def base_held_out_loss(base: str, held: list[str], params: dict, device: str, triples=None) -> float:
    """The objective's held-out loss of the untrained encoder (a fresh loss: new heads as training starts)."""
    import torch
    from transformers import set_seed

    from ..pretraining.objectives import build_loss
    from ..pretraining.train import build_encoder, held_out_loss

    set_seed(params["seed"])
    model = build_encoder(base, params["pooling"], params["max_length"], device, params.get("config_kwargs"))
    value = held_out_loss(model, build_loss(params["objective"], model, params, base), params["objective"], held,
                          params, triples)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return value


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    from ..pretraining.train import fit, held_out_loss

    params, inputs = spec["params"], spec["inputs"]
    evaluated = inputs.get("eval", inputs["data"])
    test = read_split(evaluated, "test")
    dev = read_split(evaluated, "dev", required=False)
    triples = held_triples = None
    if params["objective"] == "simcse_sup":
        eval_sentences = evaluation_sentences(evaluated) if params["exclude_eval_sentences"] else set()
        triples, held_triples, removed = split_triples(read_triples(params["triples"], params.get("triples_format")),
                                                       params["held_out"], params["seed"], eval_sentences)
        train, held = [t[0] for t in triples], [t[0] for t in held_triples]
    elif params["objective"] == "rcl":  # rows with ids; the entropy models' embeddings of the same rows
        from .rcl_entropy import checked_regulators, rcl_rows

        triples, held_triples, removed = rcl_rows(spec)
        train, held = [t[1] for t in triples], [t[1] for t in held_triples]
        params = {**params, "regulators": checked_regulators(inputs, triples + held_triples)}
    else:
        train, held, removed = corpus(spec)
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        base = model_path(params, params["model"])
        log.info("pretrain %s (pooling %s) from %s: %d training %s, %d held out, %d dev/test sentences removed, "
                 "device %s", params["objective"], params["pooling"], params["model"], len(train),
                 "triples" if triples else "sentences", len(held), removed, device)
        before = base_held_out_loss(base, held, params, device, held_triples)
        model, loss, metrics = fit(base, train, held, dev, params, work, device, precision(), triples, held_triples)
        after = held_out_loss(model, loss, params["objective"], held, params, held_triples)
        log.info("pretrain: held-out %s loss %.4f (base model) -> %.4f", params["objective"], before, after)
        trained_length = model.max_seq_length
        model.max_seq_length = params.get("eval_max_length", trained_length)  # as the zero-shot model is tested
        predicted = cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                  params.get("eval_batch_size", 64))
        model.max_seq_length = trained_length
        test_metrics = correlations(predicted, test["score"])
        log.info("pretrain: held-out loss of the chosen checkpoint %.4f; test spearman %.2f  pearson %.2f",
                 after, test_metrics["spearman"], test_metrics["pearson"])
        model.save(str(tmp / "model"))
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        dev_scores = [h["eval_dev_spearman_cosine"] for h in metrics["history"]
                      if h["step"] == metrics["best_step"] and "eval_dev_spearman_cosine" in h]
        metrics = {"model": params["model"], "device": device, "test": test_metrics,
                   "eval_sentences_removed": removed, "held_out_loss_base": before, "held_out_loss_final": after,
                   **metrics}
        if dev_scores:
            metrics["dev_spearman"] = 100 * dev_scores[0]
        write_json(tmp / "metrics.json", metrics)
    return metrics
