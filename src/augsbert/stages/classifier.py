"""Stage `train_classifier`: the topic-classifier baseline (thesis 5.6.1, Tables 6.14-6.17).

A mean-pooled encoder with a linear head learns the topic of each sentence of
the target (train split and unlabeled corpus; dev/test sentences left out
unless `sampling.exclude_eval_sentences` is off) by cross-entropy, with the
texts prompted (`topic_prompt: prompted`, the thesis' "Classifier Prompted") or
plain. The encoder is then saved and evaluated as a Bi-Encoder, like every
other model: target test Spearman here, the evaluation suite in its own job.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..artifacts import artifact_dir, write_json
from ..data import DataError
from ..data.prompts import ensure_delimiter, prompt, topic_map
from ..data.tables import normalise_text
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..tracking import callbacks as tracking_callbacks, trainer_arguments
from .common import checkpoint_dir, evaluation_sentences, model_path, precision, read_split

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


def fit(base: str, texts: list[str], topics: list[str], params: dict, workdir: Path, device: str,
        precision_name: str = "auto", callbacks: list | None = None):
    """Train encoder + head; returns (model, loss, classes, metrics). Resumable from `workdir`."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainingArguments
    from transformers import set_seed

    from ..models.topic_classifier import TopicClassificationLoss
    from ..pretraining.train import build_encoder, trainer_class
    from ..training import claim_workdir, precision_flags, train_resuming

    classes = sorted(set(topics))
    if len(classes) < 2:
        raise DataError(f"the topic classifier needs at least two topics, found {classes}")
    claim_workdir(workdir, {"stage": "classifier", "base": base, "params": params, "device": device,
                            "precision": precision_name, "sentences": len(texts)})
    set_seed(params["seed"])
    model = build_encoder(base, "mean", params["max_length"], device)
    delimiter = params.get("topic_prompt")
    if delimiter:
        ensure_delimiter(model.tokenizer, delimiter, model[0].auto_model)
        texts = [prompt(t, topic, delimiter) for t, topic in zip(texts, topics)]
    loss = TopicClassificationLoss(model, len(classes))
    index = {c: i for i, c in enumerate(classes)}
    train = Dataset.from_dict({"text": texts, "label": [index[t] for t in topics]})
    steps = params["epochs"] * math.ceil(len(texts) / params["batch_size"])
    args = SentenceTransformerTrainingArguments(
        output_dir=str(workdir / "trainer"), num_train_epochs=params["epochs"],
        per_device_train_batch_size=params["batch_size"], learning_rate=params["lr"],
        warmup_steps=int(math.ceil(params["warmup_ratio"] * steps)), seed=params["seed"], data_seed=params["seed"],
        save_strategy="steps", save_steps=params["checkpoint_steps"], save_total_limit=1,
        logging_steps=max(1, min(50, steps // 10)), use_cpu=device == "cpu", **trainer_arguments(),
        dataloader_num_workers=0, **precision_flags(device, precision_name))
    trainer = trainer_class()(model=model, args=args, train_dataset=train, loss=loss,
                                callbacks=[*(callbacks or []), *tracking_callbacks()])
    output, resumed_from = train_resuming(trainer, workdir / "trainer")
    embeddings = model.encode(texts, batch_size=params.get("eval_batch_size", 64), convert_to_tensor=True)
    predicted = loss.predict(embeddings).cpu().numpy()
    accuracy = float(100 * np.mean(predicted == np.array([index[t] for t in topics])))
    metrics = {"train_loss": float(output.training_loss), "steps": int(output.global_step),
               "train_accuracy": accuracy, "topics": classes, "train_sentences": len(texts),
               "resumed_from": resumed_from}
    return model, loss, classes, metrics


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    from safetensors.torch import save_file

    params, data = spec["params"], spec["inputs"]["data"]
    test = read_split(data, "test")
    texts, topics = training_sentences(data, params["exclude_eval_sentences"])
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        log.info("topic classifier from %s: %d sentences, %d topics, prompted %s, device %s", params["model"],
                 len(texts), len(set(topics)), bool(params.get("topic_prompt")), device)
        model, loss, classes, metrics = fit(model_path(params, params["model"]), texts, topics, params, work,
                                            device, precision())
        log.info("classifier: training accuracy %.2f after %d steps", metrics["train_accuracy"], metrics["steps"])
        predicted = cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                  params.get("eval_batch_size", 64))
        test_metrics = correlations(predicted, test["score"])
        log.info("classifier: test spearman %.2f  pearson %.2f", test_metrics["spearman"], test_metrics["pearson"])
        model.save(str(tmp / "model"))
        save_file({k: v.detach().cpu().contiguous() for k, v in loss.classifier.state_dict().items()},
                  str(tmp / "head.safetensors"))
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        metrics = {"model": params["model"], "device": device, "test": test_metrics, **metrics}
        write_json(tmp / "metrics.json", metrics)
    return metrics
