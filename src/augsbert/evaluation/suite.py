"""One Bi-Encoder on the evaluation suite (stage `suite`): the STS suite, topic classification (and on prompted
input), USEB, MTEB, BEIR retrieval and the alignment / uniformity diagnostics.

Which tasks run was decided while planning (a task whose data is absent is in `params.skipped` with the
reason); `evaluate_suite` evaluates the rest: its metrics hold a flat `summary` of headline numbers plus the
details.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.beir import load_prepared
from ..data.pool import read_split
from ..data.prompts import prompt, prompt_pairs, topic_map
from ..data.tables import normalise_text
from .beir_retrieval import evaluate_retrieval
from .mteb_suite import mteb_suite
from .retrieval import alignment, uniformity
from .similarity import Encoder, correlations
from .sts_suite import sts_suite
from .topic import linear_probe
from .useb import useb_suite

if TYPE_CHECKING:  # annotations only: the stage's options class sits above evaluation
    from ..stages.suite import SuiteParams

log = logging.getLogger(__name__)


UNIFORMITY_SAMPLE = 5000  # uniformity is O(n^2) in memory: a fixed random subset of larger test sets


def topic_sentences(data_dir: str | Path) -> tuple[list[str], list[str]]:
    """The sentences the topic probe classifies, with their labels.

    A topic corpus (`topic_corpus`: UKP, 20 Newsgroups; or an unlabeled table
    with topics) is the classification data, scored on its finest labels
    (`fine_topic`: the 20 newsgroups even when prompts use the 6 parent
    groups, as thesis Table 6.14); otherwise the unique sentences of every
    split with the topic of the pairs they occur in (BWS).
    """
    unlabeled = Path(data_dir) / "unlabeled.parquet"
    if unlabeled.is_file():
        corpus = pd.read_parquet(unlabeled)
        label = next((c for c in ("fine_topic", "topic") if c in corpus.columns), None)
        if label:
            corpus = corpus[corpus[label].astype(str) != ""].drop_duplicates("text", keep="first")
            return corpus["text"].tolist(), corpus[label].astype(str).tolist()
    frames = [t for t in (read_split(data_dir, s, required=False) for s in ("train", "dev", "test")) if t is not None]
    table = pd.concat(frames, ignore_index=True)
    if "topic" not in table.columns:
        raise DataError(f"{data_dir}: the prepared dataset has no topic column")
    long = pd.concat([table[["sentence1", "topic"]].set_axis(["text", "topic"], axis=1),
                      table[["sentence2", "topic"]].set_axis(["text", "topic"], axis=1)], ignore_index=True)
    long = long.drop_duplicates("text", keep="first")
    return long["text"].tolist(), long["topic"].tolist()


def diagnostics(encode: Encoder, test: pd.DataFrame, threshold: float) -> dict:
    positives = test[test["score"] >= threshold]
    texts = sorted(set(test["sentence1"]) | set(test["sentence2"]))
    if len(texts) > UNIFORMITY_SAMPLE:
        rng = np.random.default_rng(0)
        texts = [texts[i] for i in sorted(rng.choice(len(texts), UNIFORMITY_SAMPLE, replace=False))]
    out = {"alignment": None, "uniformity": uniformity(encode(texts)), "n_positive_pairs": int(len(positives)),
           "n_uniformity_texts": len(texts)}
    if len(positives):
        out["alignment"] = alignment(encode(positives["sentence1"]), encode(positives["sentence2"]))
    return out


def evaluate_suite(encode: Encoder, params: SuiteParams, data: str | Path, work_dir: Path) -> dict:
    """The suite's metrics of the model `encode` wraps on the tasks `params` names (`data`: the prepared
    dataset; `work_dir`: MTEB's result files); a `summary` of headline numbers and each task's details."""
    summary: dict[str, float | None] = {}
    metrics: dict = {"skipped": dict(params.skipped)}
    if params.sts:
        sts = sts_suite(encode.cosine, params.sts, params.sts_format)
        metrics["sts"] = sts
        metrics["skipped"].update(sts["skipped"])
        summary.update({task: r["spearman"] for task, r in sts["tasks"].items()})
        summary["sts_avg"] = sts["sts_avg"]
    if params.topic_task:
        probe = {k: v for k, v in params.topic_task.to_json().items() if k != "prompted"}
        delimiter = params.topic_task.prompted
        texts, topics = topic_sentences(data)
        try:
            topic = linear_probe(encode(texts), topics, **probe)
            if delimiter:  # thesis Tables 6.14/6.16 "Prompted (F1)": each sentence with its true topic
                # prompted with the label prompts use (20 Newsgroups: the parent group), scored on the finest
                known = topic_map(data)
                shown = [prompt(t, known.get(normalise_text(t), c), delimiter) for t, c in zip(texts, topics)]
                prompted = linear_probe(encode(shown), topics, **probe)
        except ValueError as err:
            raise DataError(f"{data}: {err}") from None
        log.info("suite: topic macro-F1 %.2f over %d topics (%d test sentences)", topic["topic_macro_f1"],
                 len(topic["topics"]), topic["n_test"])
        metrics["topic"] = topic
        summary["topic_macro_f1"] = topic["topic_macro_f1"]
        if delimiter:
            test = read_split(data, "test", required=False)
            metrics["prompted"] = {"topic": prompted, "delimiter": delimiter}
            summary["prompted_topic_macro_f1"] = prompted["topic_macro_f1"]
            if test is not None:  # target similarity on prompted input (thesis Table 6.16 "Prompted BWS")
                shown = prompt_pairs(test, delimiter, known)
                similarity = correlations(encode.cosine(list(zip(shown["sentence1"], shown["sentence2"]))),
                                          test["score"])
                metrics["prompted"]["test"] = similarity
                summary["prompted_spearman"] = similarity["spearman"]
            log.info("suite: prompted input: topic macro-F1 %.2f, test spearman %s",
                     prompted["topic_macro_f1"], summary.get("prompted_spearman"))
    if params.useb:
        useb = useb_suite(encode, params.useb)
        metrics["useb"] = useb
        metrics["skipped"].update(useb["skipped"])
        summary.update(useb["summary"])
    if params.mteb_tasks:
        result = mteb_suite(encode.model, params.mteb_tasks, params.batch_size, work_dir / "mteb")
        metrics["mteb"] = result
        metrics["skipped"].update({f"mteb:{t}": reason for t, reason in result["skipped"].items()})
        summary.update({f"mteb_{t}": r["main_score"] for t, r in result["tasks"].items()})
        summary["mteb_avg"] = result["mteb_avg"]
    if params.retrieval_task:
        task = params.retrieval_task
        corpus, queries, qrels = load_prepared(data, task["split"])
        result = evaluate_retrieval(encode.model, corpus, queries, qrels, task["score_function"], params.batch_size,
                                    without_relevant=task["without_relevant"])
        metrics["retrieval"] = {**result, "split": task["split"]}
        summary.update({m: result[m] for m in ("ndcg@10", "mrr@10", "recall@100")})
    if params.diagnostics_threshold is not None:
        diag = diagnostics(encode, read_split(data, "test"), params.diagnostics_threshold)
        log.info("suite: alignment %s, uniformity %.4f", diag["alignment"], diag["uniformity"])
        metrics["diagnostics"] = diag
        summary.update({"alignment": diag["alignment"], "uniformity": diag["uniformity"]})
    for task, reason in metrics["skipped"].items():
        log.info("suite: %s skipped: %s", task, reason)
    metrics["summary"] = summary
    return metrics
