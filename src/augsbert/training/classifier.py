"""The topic-classifier baseline's trainer (thesis 5.6.1): a mean-pooled encoder with a linear head learns
each sentence's topic by cross-entropy (stage `classifier`, job augsbert.jobs.classifier)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.pool import evaluation_sentences
from ..data.prompts import ensure_delimiter, prompt, topic_map
from ..data.tables import normalise_text
from ..stages.classifier import ClassifierParams
from .tokenized import pretokenize_collator
from .tracking import callbacks as tracking_callbacks, trainer_arguments
from .common import claim_workdir, device_flags, precision_flags, train_resuming
from .pretrain import build_encoder, trainer_class
from ..models.topic_classifier import TopicClassificationLoss


def fit(base: str, texts: list[str], topics: list[str], params: ClassifierParams, workdir: Path, device: str,
        precision_name: str = "auto", callbacks: list | None = None):
    """Train encoder + head; returns (model, loss, classes, metrics). Resumable from `workdir`."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainingArguments
    from transformers import set_seed

    classes = sorted(set(topics))
    if len(classes) < 2:
        raise DataError(f"the topic classifier needs at least two topics, found {classes}")
    claim_workdir(workdir, {"stage": "classifier", "base": base, "params": params.spec_json(), "device": device,
                            "precision": precision_name, "sentences": len(texts)})
    set_seed(params.seed)
    model = build_encoder(base, "mean", params.max_length, device)
    delimiter = params.topic_prompt
    if delimiter:
        ensure_delimiter(model.tokenizer, delimiter, model[0].auto_model)
        texts = [prompt(t, topic, delimiter) for t, topic in zip(texts, topics)]
    loss = TopicClassificationLoss(model, len(classes))
    index = {c: i for i, c in enumerate(classes)}
    train = Dataset.from_dict({"text": texts, "label": [index[t] for t in topics]})
    steps = params.epochs * math.ceil(len(texts) / params.batch_size)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(workdir / "trainer"), num_train_epochs=params.epochs,
        per_device_train_batch_size=params.batch_size, learning_rate=params.lr,
        warmup_steps=int(math.ceil(params.warmup_ratio * steps)), seed=params.seed, data_seed=params.seed,
        save_strategy="steps", save_steps=params.checkpoint_steps, save_total_limit=1,
        logging_steps=max(1, min(50, steps // 10)), use_cpu=device == "cpu", **trainer_arguments(),
        dataloader_num_workers=0, **precision_flags(device, precision_name), **device_flags(device))
    trainer = trainer_class()(model=model, args=args, train_dataset=train, loss=loss,
                                callbacks=[*(callbacks or []), *tracking_callbacks()])
    pretokenize_collator(trainer.data_collator, model, train)  # training texts tokenised once
    output, resumed_from = train_resuming(trainer, workdir / "trainer")
    embeddings = model.encode(texts, batch_size=params.eval_batch_size, convert_to_tensor=True)
    predicted = loss.predict(embeddings).cpu().numpy()
    accuracy = float(100 * np.mean(predicted == np.array([index[t] for t in topics])))
    metrics = {"train_loss": float(output.training_loss), "steps": int(output.global_step),
               "train_accuracy": accuracy, "topics": classes, "train_sentences": len(texts),
               "resumed_from": resumed_from}
    return model, loss, classes, metrics


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
