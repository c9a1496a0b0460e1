"""The trainer objects: built here, one function per kind of model, and nowhere else in the package.

- `pair_trainer`: the pair architectures of `augsbert.models.architectures` (built, scored, saved there),
  trained by sentence-transformers' trainers (Cross-Encoder, Bi-Encoder) or the Hugging Face Trainer (the
  custom Cross-Bi-Encoder); with `group_by_length` each gets length-grouped batches
  (`augsbert.training.batching`), in a distributed run its batches cut per process
  (`augsbert.training.distributed`), with `cuda_graphs` fixed widths (`augsbert.training.cuda_graphs`);
- `gpl_student_trainer`: GPL's Bi-Encoder student on the teacher's margins (stage gpl);
- `multilingual_trainer`: the multilingual student on the teacher's embeddings of parallel sentences (stage
  multilingual, augsbert.training.multilingual);
- (the MLM adaptation's trainer is built in `augsbert.training.mlm`, the pre-training objectives' in
  `augsbert.training.pretrain`: each is the only one of its kind.)
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss, MSELoss
from transformers import TrainerCallback, TrainingArguments

from ..models.cross_bi_encoder import SPECIALS_PER_PAIR, CrossBiEncoderCollator, PairTokenizer
from ..models.compact import is_static, matryoshka_loss
from ..models.device import precision
from ..models.student_losses import student_loss, student_rows
from ..stages.student import StudentParams
from ..stages.teacher import TeacherParams
from . import cuda_graphs, distributed
from .batching import LengthGroupedTrainer, hf_grouping, length_batch_sampler, longer_first, pair_lengths, side_lengths
from .common import device_flags, precision_flags
from .multilingual import distillation_loss
from .tokenized import PretokenizedPreprocess, TokenIds, pad_multiple, pretokenize_collator

log = logging.getLogger(__name__)


def shard_batches(args: dict) -> dict:
    """Training arguments of a sentence-transformers trainer, its batches cut per process in a distributed run.

    The batch sampler (length-grouped, or the library's random one) is built
    for the global batch, and each global batch is split over the processes
    (`augsbert.training.distributed.ShardedBatchSampler`): a step trains on the examples
    one process would train on with the whole batch.
    """
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

    class RestorePreprocess(TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            model.__dict__.pop("preprocess", None)

    return RestorePreprocess()


def cross_encoder_loss(model, params: TeacherParams):
    """The Cross-Encoder's loss: BCE-with-logits (reference) or MSE of the sigmoid (`loss: mse`)."""
    return BinaryCrossEntropyLoss(model) if params.loss == "bce" \
        else MSELoss(model, activation_fn=torch.nn.Sigmoid())


def bi_encoder_trainer(model, args: dict, train, callbacks, params: StudentParams):
    """SentenceTransformerTrainer with `student.loss` (CosineSimilarityLoss: MSE of cosine vs label, by default)."""
    if params.loss != "cosine":  # rows of another shape (student.loss): built from the pairs
        rows = student_rows(train.to_pandas(), params)
        log.info("student.loss %s: %d training rows (%s)", params.loss, len(rows), ", ".join(rows.columns))
        train = Dataset.from_pandas(rows, preserve_index=False)
        steps = params.max_steps or math.ceil(len(rows) / params.batch_size) * params.epochs
        args = {**args, "warmup_steps": int(math.ceil(params.warmup_ratio * steps))}  # of these rows
    if params.group_by_length and "sentence1" in train.column_names:
        # the two sentences are padded apart: 2-D grouping, longer one first
        lengths = side_lengths(model.tokenizer, train["sentence1"][:], train["sentence2"][:], model.max_seq_length)
        train, lengths = longer_first(train, lengths)
        args = {**args, "batch_sampler": length_batch_sampler(lengths, params.megabatch)}
    args = shard_batches(args)
    loss = student_loss(model, params)
    if params.matryoshka_dims:  # student.matryoshka_dims (augsbert.models.compact)
        loss = matryoshka_loss(model, loss, params.matryoshka_dims)
    static = cuda_graphs.active(model.device, params.torch_compile)  # cuda_graphs (augsbert.training.cuda_graphs)
    if static:  # fixed widths, one forward for all columns, replayed per bucket
        loss = cuda_graphs.static_sentence_loss(loss)
    trainer = main_process_saves(SentenceTransformerTrainer)(
        model=model, args=SentenceTransformerTrainingArguments(**args), train_dataset=train,
        loss=loss, callbacks=callbacks)
    if not is_static(model):  # a static student's tokenizer is a plain `tokenizers` one: its own preprocess
        pretokenize_collator(trainer.data_collator, model, train,
                             cuda_graphs.buckets(model.device, model.max_seq_length, params.torch_compile))
    return trainer


def cross_encoder_trainer(model, args: dict, train, callbacks, params: TeacherParams):
    """CrossEncoderTrainer with `cross_encoder_loss`, the pairs tokenised once."""
    loss = cross_encoder_loss(model, params)
    if params.group_by_length:
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
        buckets=cuda_graphs.buckets(model.device, model.max_seq_length, params.torch_compile))
    trainer = main_process_saves(CrossEncoderTrainer)
    return trainer(model=model, args=CrossEncoderTrainingArguments(**args), train_dataset=train, loss=loss,
                   callbacks=[*callbacks, restore_preprocess(model)])


def cross_bi_encoder_trainer(model, args: dict, train, callbacks, params: TeacherParams):
    """The Hugging Face Trainer (length-grouped, CUDA graphs where active) with the model's own MSE loss."""
    first, second = train["sentence1"][:], train["sentence2"][:]  # lists (a column iterates row by row)
    ids = TokenIds(model.tokenizer, first + second)  # every training text tokenised once
    if params.group_by_length:
        lengths = pair_lengths(model.tokenizer, first, second, model.max_length, SPECIALS_PER_PAIR, ids=ids)
        train, args = hf_grouping(train, lengths, args)
    static = cuda_graphs.active(model.device, params.torch_compile)  # cuda_graphs (augsbert.training.cuda_graphs)
    pairs = PairTokenizer(model.tokenizer, model.max_length, model.pair_tokenizer.use_token_types, ids=ids,
                          pad_to_multiple_of=pad_multiple(model.device),
                          buckets=cuda_graphs.buckets(model.device, model.max_length, params.torch_compile))
    trainer = cuda_graphs.graphed_compute_loss(LengthGroupedTrainer)
    return trainer(model=model, args=TrainingArguments(remove_unused_columns=False, **args),
                   train_dataset=train, data_collator=CrossBiEncoderCollator(pairs), callbacks=callbacks,
                   megabatch=params.megabatch, static_step=static)


PAIR_TRAINERS = {"be": bi_encoder_trainer, "ce": cross_encoder_trainer, "cbe": cross_bi_encoder_trainer}


def pair_trainer(arch: str, model, args: dict, train, callbacks, params: TeacherParams | StudentParams):
    """The trainer of pair architecture `arch` ("be", "ce", "cbe") for `model` on the dataset `train`
    (sentence1, sentence2, score), with the Trainer's arguments `args` and the TrainerCallbacks `callbacks`."""
    return PAIR_TRAINERS[arch](model, args, train, callbacks, params)


def gpl_student_trainer(model, rows, params, workdir: Path, device: str):
    """GPL's student: SentenceTransformerTrainer with `student_loss` (MarginMSE or KL-divergence, as
    `params.loss`) on `rows` (query, positive, negative_1..n, label), no checkpoints, scratch in `workdir`."""
    total = params.max_steps or (params.epochs or 1) * math.ceil(len(rows) / params.batch_size)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(workdir), seed=params.seed, per_device_train_batch_size=params.batch_size,
        learning_rate=params.lr, weight_decay=params.weight_decay,
        warmup_steps=int(math.ceil(params.warmup_ratio * total)),  # as training/pairs.py: steps, not a ratio
        max_steps=params.max_steps or -1, num_train_epochs=params.epochs or 1, save_strategy="no",
        report_to="none", logging_steps=max(1, min(100, (params.max_steps or len(rows)) // 10)),
        use_cpu=device == "cpu", disable_tqdm=True)
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=rows, loss=student_loss(model, params))


def multilingual_trainer(model, rows, params, workdir: Path, device: str):
    """The multilingual student: SentenceTransformerTrainer with MSELoss (augsbert.training.multilingual) on `rows`
    (source, target, label), randomly ordered batches seeded by the run's seed, linear decay after a warm-up of
    `warmup_ratio` of the steps, the last step's model kept (as make_multilingual.py), no checkpoints."""
    total = params.max_steps or (params.epochs or 1) * math.ceil(len(rows) / params.batch_size)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(workdir), seed=params.seed, per_device_train_batch_size=params.batch_size,
        learning_rate=params.lr, weight_decay=params.weight_decay,
        warmup_steps=int(math.ceil(params.warmup_ratio * total)),  # as training/pairs.py: steps, not a ratio
        max_steps=params.max_steps or -1, num_train_epochs=params.epochs or 1, save_strategy="no",
        report_to="none", logging_steps=max(1, min(100, total // 10)), use_cpu=device == "cpu", disable_tqdm=True,
        **precision_flags(device, precision()), **device_flags(device))  # bf16 / fp16 on CUDA (the example: fp16)
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=rows, loss=distillation_loss(model))
