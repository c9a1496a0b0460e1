"""The three pair architectures behind one small interface.

Each adapter knows how to build its model from a base checkpoint, which
trainer and loss train it (sentence-transformers trainers for the
Cross-Encoder and Bi-Encoder, the Hugging Face Trainer for the custom
Cross-Bi-Encoder), how it scores pairs, and how it is saved and loaded. With
`group_by_length` each trainer gets length-grouped batches (`augsbert.training.batching`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..params import PairTrainingParams
from ..training import graphs
from .cross_bi_encoder import SPECIALS_PER_PAIR, CrossBiEncoder, CrossBiEncoderCollator, PairTokenizer

log = logging.getLogger(__name__)

ACTIVATIONS = {"sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh, "identity": torch.nn.Identity}


def freeze_embeddings(encoder: torch.nn.Module) -> list[str]:
    """Freeze word, position and token-type embeddings of a Hugging Face encoder; return what was frozen."""
    base = getattr(encoder, "base_model", encoder)
    embeddings = getattr(base, "embeddings", None)
    if embeddings is None:
        raise ValueError(f"{type(encoder).__name__} has no `embeddings` module to freeze")
    frozen = []
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        module = getattr(embeddings, name, None)
        if module is not None:
            module.requires_grad_(False)
            frozen.append(name)
    return frozen


def shard_batches(args: dict) -> dict:
    """Training arguments of a sentence-transformers trainer, its batches cut per process in a distributed run.

    The batch sampler (length-grouped, or the library's random one) is built
    for the global batch, and each global batch is split over the processes
    (`augsbert.training.distributed.ShardedBatchSampler`): a step trains on the examples
    one process would train on with the whole batch.
    """
    from ..training import distributed

    processes = distributed.world_size()
    if processes == 1:
        return args
    inner = args.get("batch_sampler") or distributed.default_batch_sampler
    return {**args, "batch_sampler": distributed.sharded_batch_sampler(inner, processes)}


def main_process_saves(trainer_class):
    """`trainer_class` whose checkpoint model files are written by the main process only.

    transformers 5 moved the "main process only" check of `Trainer.save_model`
    into `Trainer._save`; sentence-transformers overrides `_save` without it,
    so in a distributed run every rank would write the same checkpoint files at
    once. (One process: `should_save` is always true, nothing changes.)
    """
    class MainProcessSaves(trainer_class):
        def _save(self, output_dir=None, state_dict=None):
            if self.args.should_save:
                super()._save(output_dir, state_dict)

    MainProcessSaves.__name__ = MainProcessSaves.__qualname__ = trainer_class.__name__
    return MainProcessSaves


def restore_preprocess(model):
    """A TrainerCallback that gives `model` its own `preprocess` back when training ends (the Cross-Encoder
    trains with a pre-tokenised one, augsbert.training.tokenized)."""
    from transformers import TrainerCallback

    class RestorePreprocess(TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            model.__dict__.pop("preprocess", None)

    return RestorePreprocess()


def _hf_module(st_model) -> torch.nn.Module:
    """The transformers model inside a SentenceTransformer / CrossEncoder."""
    return st_model[0].auto_model if hasattr(st_model[0], "auto_model") else st_model[0].model


class _SentenceTransformersModel:
    """Shared by the two sentence-transformers models: where the encoder is, how to save."""

    def encoder(self, model):
        return _hf_module(model)

    def save(self, model, path: Path) -> None:
        model.save(str(path))


class BiEncoder(_SentenceTransformersModel):
    """SentenceTransformer with mean pooling; CosineSimilarityLoss (MSE of cosine vs label)."""

    name = "be"

    def build(self, base: str, params: PairTrainingParams, device: str):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(base, device=device, config_kwargs=params.config_kwargs)
        model.max_seq_length = params.max_length
        return model

    def trainer(self, model, args: dict, train, callbacks, params: PairTrainingParams):
        from datasets import Dataset
        from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

        from ..training.tokenized import pretokenize_collator
        from .student_losses import student_loss, student_rows

        if (params.loss or "cosine") != "cosine":  # rows of another shape (student.loss): built from the pairs
            rows = student_rows(train.to_pandas(), params)
            log.info("student.loss %s: %d training rows (%s)", params.loss, len(rows), ", ".join(rows.columns))
            train = Dataset.from_pandas(rows, preserve_index=False)
            steps = params.max_steps or math.ceil(len(rows) / params.batch_size) * params.epochs
            args = {**args, "warmup_steps": int(math.ceil(params.warmup_ratio * steps))}  # of these rows
        if params.group_by_length and "sentence1" in train.column_names:
            # the two sentences are padded apart: 2-D grouping, longer one first
            from ..training.batching import length_batch_sampler, longer_first, side_lengths

            lengths = side_lengths(model.tokenizer, train["sentence1"][:], train["sentence2"][:], model.max_seq_length)
            train, lengths = longer_first(train, lengths)
            args = {**args, "batch_sampler": length_batch_sampler(lengths, params.megabatch)}
        args = shard_batches(args)
        loss = student_loss(model, params)
        static = graphs.active(model.device, params.torch_compile)  # cuda_graphs (augsbert.training.graphs)
        if static:  # fixed widths, one forward for all columns, replayed per bucket
            loss = graphs.static_sentence_loss(loss)
        trainer = main_process_saves(SentenceTransformerTrainer)(
            model=model, args=SentenceTransformerTrainingArguments(**args), train_dataset=train,
            loss=loss, callbacks=callbacks)
        pretokenize_collator(trainer.data_collator, model, train,
                             graphs.buckets(model.device, model.max_seq_length, params.torch_compile))
        return trainer

    def predict(self, model, pairs: Sequence[tuple[str, str]], batch_size: int, params: PairTrainingParams) -> np.ndarray:
        from ..evaluation.similarity import cosine_scores

        return cosine_scores(model, pairs, batch_size, show_progress=False)

    def load(self, path: Path, device: str):
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(path), device=device)


class CrossEncoderArch(_SentenceTransformersModel):
    """sentence-transformers CrossEncoder with one output; BCE-with-logits (reference) or MSE loss."""

    name = "ce"

    def build(self, base: str, params: PairTrainingParams, device: str):
        from sentence_transformers import CrossEncoder

        return CrossEncoder(base, num_labels=1, max_length=params.max_length, device=device,
                            activation_fn=ACTIVATIONS[params.activation](),
                            config_kwargs=params.config_kwargs)

    def trainer(self, model, args: dict, train, callbacks, params: PairTrainingParams):
        from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss, MSELoss

        from ..training import distributed
        from ..training.tokenized import PretokenizedPreprocess, pad_multiple

        loss = BinaryCrossEntropyLoss(model) if (params.loss or "bce") == "bce" \
            else MSELoss(model, activation_fn=torch.nn.Sigmoid())
        if params.group_by_length:
            from ..training.batching import length_batch_sampler, pair_lengths

            tok = model.tokenizer
            lengths = pair_lengths(tok, train["sentence1"][:], train["sentence2"][:], model.max_seq_length,
                                   tok.num_special_tokens_to_add(pair=True))
            args = {**args, "batch_sampler": length_batch_sampler(lengths, params.megabatch)}
        args = shard_batches(args)
        if distributed.world_size() > 1:
            # DDP's search for unused parameters breaks the CrossEncoder's backward ("mark a variable ready only
            # once"); a sequence-classification model uses all its parameters, so there is nothing to search for
            args["ddp_find_unused_parameters"] = False
        # the losses tokenise each batch's pairs with the model's preprocess: answered from the pairs tokenised once
        # (on the model's device: the loss's own copy to the device then has nothing left to wait for)
        model.preprocess = PretokenizedPreprocess(
            model.preprocess, model.tokenizer, list(zip(train["sentence1"][:], train["sentence2"][:])),
            pad_to_multiple_of=pad_multiple(model.device), device=model.device,
            # cuda_graphs: fixed widths only (its loss tokenises inside, so its step is not captured)
            buckets=graphs.buckets(model.device, model.max_seq_length, params.torch_compile))
        trainer = main_process_saves(CrossEncoderTrainer)
        return trainer(model=model, args=CrossEncoderTrainingArguments(**args), train_dataset=train, loss=loss,
                       callbacks=[*callbacks, restore_preprocess(model)])

    def predict(self, model, pairs, batch_size, params) -> np.ndarray:
        from . import inference

        activation = ACTIVATIONS[params.activation]()
        with inference.autocast(model):  # on CUDA: fp16 and batches as large as memory holds; elsewhere as given
            pairs = list(pairs)
            scores = model.predict(pairs, batch_size=inference.batch_size(model, batch_size, pairs),
                                   activation_fn=activation, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64)

    def load(self, path: Path, device: str):
        from sentence_transformers import CrossEncoder

        return CrossEncoder(str(path), device=device)


class CrossBiEncoderArch:
    """The thesis' Cross-Bi-Encoder, trained with MSE by the Hugging Face Trainer."""

    name = "cbe"

    def build(self, base: str, params: PairTrainingParams, device: str):
        return CrossBiEncoder.from_base(base, params.max_length, params.config_kwargs).to(device)

    def encoder(self, model):
        return model.encoder

    def trainer(self, model, args: dict, train, callbacks, params: PairTrainingParams):
        from transformers import TrainingArguments

        from ..training.batching import LengthGroupedTrainer, hf_grouping, pair_lengths
        from ..training.tokenized import TokenIds, pad_multiple

        first, second = train["sentence1"][:], train["sentence2"][:]  # lists (a column iterates row by row)
        ids = TokenIds(model.tokenizer, first + second)  # every training text tokenised once
        if params.group_by_length:
            lengths = pair_lengths(model.tokenizer, first, second, model.max_length, SPECIALS_PER_PAIR, ids=ids)
            train, args = hf_grouping(train, lengths, args)
        static = graphs.active(model.device, params.torch_compile)  # cuda_graphs (augsbert.training.graphs)
        pairs = PairTokenizer(model.tokenizer, model.max_length, model.pair_tokenizer.use_token_types, ids=ids,
                              pad_to_multiple_of=pad_multiple(model.device),
                              buckets=graphs.buckets(model.device, model.max_length, params.torch_compile))
        trainer = graphs.graphed_compute_loss(LengthGroupedTrainer)
        return trainer(model=model, args=TrainingArguments(remove_unused_columns=False, **args),
                       train_dataset=train, data_collator=CrossBiEncoderCollator(pairs), callbacks=callbacks,
                       megabatch=params.megabatch, static_step=static)

    def predict(self, model, pairs, batch_size, params) -> np.ndarray:
        from . import inference

        with inference.autocast(model):  # as the Cross-Encoder's
            pairs = list(pairs)
            scores = model.predict(pairs, batch_size=inference.batch_size(model, batch_size, pairs))
        return scores.astype(np.float64)

    def save(self, model, path: Path) -> None:
        model.save(path)

    def load(self, path: Path, device: str):
        return CrossBiEncoder.load(path, device)


ARCHITECTURES = {"be": BiEncoder(), "ce": CrossEncoderArch(), "cbe": CrossBiEncoderArch()}
