"""MLM domain adaptation: pairs from the target sentences, masked-LM training, held-out evaluation.

Pairs (`adapt.pairs`): `bm25_random`, for every target sentence its BM25
top-1 partner and one random partner, built with the sampling module (one
implementation for silver and MLM pairs; our construction, no source names it),
or `candidates`, the candidate pairs the teacher labels (thesis 4.3.1; read by
the stage). Training uses the Hugging Face Trainer with resumable checkpoints,
like the teacher and student stages.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from datasets import Dataset
from transformers import AutoTokenizer, TrainingArguments, set_seed

from ..models.cross_bi_encoder import PairTokenizer, SPECIALS_PER_PAIR
from ..models.mlm import MLMPairCollator, masked_lm_from
from ..stages.adapt import AdaptParams
from ..sampling import bm25_neighbors
from ..sampling.pool import PairCollector, pair_key, random_partners
from .tracking import callbacks as tracking_callbacks, trainer_arguments
from .common import claim_workdir, device_flags, precision_flags, train_resuming
from .batching import LengthGroupedTrainer, hf_grouping, pair_lengths
from .tokenized import TokenIds, pad_multiple
from ..data.prompts import ensure_delimiter

log = logging.getLogger(__name__)


def mlm_pairs(pool: list[str], seed: int) -> pd.DataFrame:
    """BM25 top-1 plus one random partner for every sentence of the (sorted, unique) pool."""
    collector = PairCollector(pool, gold_pairs=[], eval_sentences=set(), exclude_eval=False)
    collector.add_neighbours("bm25", bm25_neighbors(pool, 1)[0])
    collector.add_neighbours("random", random_partners(len(pool), 1, seed))
    return collector.frame()


def candidate_pairs(path: str | Path) -> pd.DataFrame:
    """The candidate pairs of a candidates artifact as the teacher labels them: a pair a second strategy emits
    again (either order) counts once, the first strategy's (augsbert.sampling.labelled_pairs.write_pairs)."""
    pairs = pd.read_parquet(path, columns=["sentence1", "sentence2", "strategy"])
    keys = pd.Series([pair_key(a, b) for a, b in zip(pairs["sentence1"], pairs["sentence2"])], index=pairs.index)
    return pairs[~keys.duplicated()].reset_index(drop=True)


def epoch_steps(pairs: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of `epochs` passes over `pairs` training pairs in batches of `batch_size` (the last
    batch of a pass may be short, as the Trainer's)."""
    return epochs * max(1, math.ceil(pairs / batch_size))


def split_held_out(pairs: pd.DataFrame, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    n_eval = max(1, int(round(fraction * len(pairs))))
    order = np.random.default_rng(seed).permutation(len(pairs))
    return pairs.iloc[np.sort(order[n_eval:])], pairs.iloc[np.sort(order[:n_eval])]


@torch.inference_mode()
def evaluate_mlm(model, pair_tokenizer: PairTokenizer, pairs: pd.DataFrame, probability: float,
                 batch_size: int = 32, seed: int = 0, delimiter_id: int | None = None) -> dict:
    """Masked-LM loss and masked-token accuracy on `pairs`, with a fixed (seeded) masking."""
    collator = MLMPairCollator(pair_tokenizer, probability, seed=seed, delimiter_id=delimiter_id)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    rows = pairs[["sentence1", "sentence2"]].to_dict("records")
    for start in range(0, len(rows), batch_size):
        batch = {k: v.to(device) for k, v in collator(rows[start : start + batch_size]).items()}
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        chosen = batch["labels"] != -100
        n = int(chosen.sum())
        if n:
            total_loss += float(torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen],
                                                                  reduction="sum"))
            correct += int((logits[chosen].argmax(-1) == batch["labels"][chosen]).sum())
            count += n
    model.train(was_training)
    return {"loss": total_loss / max(count, 1), "accuracy": correct / max(count, 1), "masked_tokens": count}


def adapt(base: str, train: pd.DataFrame, params: AdaptParams, workdir: Path, device: str, precision: str = "auto",
          callbacks: list | None = None):
    """Continue masked-LM training of `base` on `train` pairs; resumable from `workdir`.

    `callbacks` are extra transformers TrainerCallbacks (the training benchmark times steps with one).
    """
    claim_workdir(workdir, {"stage": "adapt_mlm", "base": base, "params": params.spec_json(), "device": device,
                             "precision": precision, "train_pairs": len(train)})
    set_seed(params.seed)
    model = masked_lm_from(base, params.config_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(base)
    delimiter_id = None
    if params.topic_prompt:  # prompted pairs: the prompt (through its delimiter) is never masked
        delimiter_id = ensure_delimiter(tokenizer, params.topic_prompt, model)
    use_types = getattr(model.config, "type_vocab_size", 0) >= 2
    pair_tokenizer = PairTokenizer(tokenizer, params.max_length, use_types)  # returned: held-out evaluation
    first, second = train["sentence1"].tolist(), train["sentence2"].tolist()
    ids = TokenIds(tokenizer, first + second)  # every training text tokenised once
    collator = MLMPairCollator(PairTokenizer(tokenizer, params.max_length, use_types, ids=ids,
                                             pad_to_multiple_of=pad_multiple(device)),
                               params.mask_probability, params.masking, seed=params.seed, delimiter_id=delimiter_id)
    args = dict(
        output_dir=str(workdir / "trainer"), max_steps=params.max_steps,
        per_device_train_batch_size=params.batch_size, learning_rate=params.lr,
        warmup_steps=int(math.ceil(params.warmup_ratio * params.max_steps)),
        weight_decay=params.weight_decay, lr_scheduler_type="linear", seed=params.seed,
        data_seed=params.seed, save_strategy="steps", save_steps=params.checkpoint_steps, save_total_limit=1,
        logging_steps=max(1, min(50, params.max_steps // 10)), use_cpu=device == "cpu", **trainer_arguments(),
        remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=False,
        **precision_flags(device, precision), **device_flags(device, params.torch_compile))
    dataset = Dataset.from_dict({"sentence1": first, "sentence2": second})
    if params.group_by_length:
        dataset, args = hf_grouping(dataset, pair_lengths(tokenizer, first, second, pair_tokenizer.max_length,
                                                          SPECIALS_PER_PAIR, ids=ids), args)
    trainer = LengthGroupedTrainer(model=model, args=TrainingArguments(**args), train_dataset=dataset,
                                   data_collator=collator, callbacks=[*(callbacks or []), *tracking_callbacks()],
                                   megabatch=params.megabatch)
    output, resumed_from = train_resuming(trainer, workdir / "trainer")
    return model, tokenizer, pair_tokenizer, {"train_loss": float(output.training_loss),
                                              "steps": int(output.global_step), "topic_delimiter_id": delimiter_id,
                                              "resumed_from": resumed_from}
