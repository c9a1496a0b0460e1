"""Stage `classifier`: the topic-classifier baseline (thesis 5.6.1, Tables 6.14-6.17).

A mean-pooled encoder with a linear head learns the topic of each sentence of
the target (train split and unlabeled corpus; dev/test sentences left out
unless `candidates.exclude_eval_sentences` is off) by cross-entropy, with the
texts prompted (`topic_prompt: prompted`, the thesis' "Classifier Prompted") or
plain. The encoder is then saved and evaluated as a Bi-Encoder, like every
other model: target test Spearman here, the evaluation suite in its own job.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..store.artifacts import artifact_dir, write_json
from ..data.prompts import topic_map
from ..data.tables import normalise_text
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..training.classifier import fit
from ..params import read_params
from ..stages.classifier import ClassifierParams
from .common import checkpoint_dir, model_path, precision
from ..data.pool import evaluation_sentences, read_split

log = logging.getLogger(__name__)


def training_sentences(data: str | Path, exclude_eval: bool) -> tuple[list[str], list[str]]:
    """(texts, topics) the classifier learns: every topic-labelled sentence, sorted, minus dev/test ones
    (of the pair splits and of a topic corpus' own split)."""
    topics = topic_map(data)
    held = evaluation_sentences(data) if exclude_eval else set()
    corpus = Path(data) / "unlabeled.parquet"
    if exclude_eval and corpus.is_file():  # a topic corpus' own dev / test texts (UKP, 20 Newsgroups) too
        table = pd.read_parquet(corpus)
        if "split" in table.columns:
            held |= {normalise_text(t) for t in table.loc[table["split"].isin(["dev", "test"]), "text"]}
    texts = sorted(t for t in topics if t not in held)
    return texts, [topics[t] for t in texts]


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    from safetensors.torch import save_file

    params, data = read_params(ClassifierParams, spec), spec["inputs"]["data"]
    test = read_split(data, "test")
    texts, topics = training_sentences(data, params.exclude_eval_sentences)
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        log.info("topic classifier from %s: %d sentences, %d topics, prompted %s, device %s", params.model,
                 len(texts), len(set(topics)), bool(params.topic_prompt), device)
        model, loss, classes, metrics = fit(model_path(params, params.model), texts, topics, params, work,
                                            device, precision())
        log.info("classifier: training accuracy %.2f after %d steps", metrics["train_accuracy"], metrics["steps"])
        predicted = cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                  params.eval_batch_size)
        test_metrics = correlations(predicted, test["score"])
        log.info("classifier: test spearman %.2f  pearson %.2f", test_metrics["spearman"], test_metrics["pearson"])
        model.save(str(tmp / "model"))
        save_file({k: v.detach().cpu().contiguous() for k, v in loss.classifier.state_dict().items()},
                  str(tmp / "head.safetensors"))
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        metrics = {"model": params.model, "device": device, "test": test_metrics, **metrics}
        write_json(tmp / "metrics.json", metrics)
    return metrics
