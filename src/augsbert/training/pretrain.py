"""One pre-training run: encoder, data, loss, the sentence-transformers trainer, selection, resume.

The trainer is the library's own; this module adds what the library does not
keep by itself:

- the loss's own weights (the MLM head, TSDAE's cross-attention, CT's first
  encoder) are saved into every checkpoint and restored on resume, so a
  killed job continues with the state it had (the library checkpoints only
  the model);
- the held-out loss is logged at every evaluation; the checkpoint kept is the
  best by target dev Spearman (`selection: target_dev`: Park, RCL), by held-out
  loss (`held_out_loss`: Wang), or the last one (`last`: TSDAE's fixed steps);
- for objectives whose positive is a second dropout pass (SimCSE and its
  combinations) the held-out loss is taken with the encoder in train mode under
  a fixed seed per batch (`dropout_views`): in eval mode both views are the same
  vector and the loss measures only how far apart the sentences are.
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path

import pandas as pd
import torch

from .noise import deletion_collator
from ..objectives import OBJECTIVES, build_loss, ct_stepped
from ..stages.pretrain import PretrainParams
from .weight_perturbation import weight_perturbation
from .batching import length_batch_sampler, token_counts
from .common import claim_workdir, device_flags, precision_flags, train_resuming
from .tokenized import pretokenize_collator
from .tracking import callbacks as tracking_callbacks, trainer_arguments

log = logging.getLogger(__name__)

LOSS_STATE = "loss_state.safetensors"


@contextlib.contextmanager
def dropout_views(model: torch.nn.Module, seed: int):
    """The encoder's modules in train mode (dropout on) with the random state fixed to `seed`, restored afterwards:
    a held-out loss of a dropout-view objective that is the same at every evaluation for the same weights.

    The model's own flag stays False: the losses read `model.training` to tell evaluation from training (a
    memory bank is neither read nor filled, noise draws come from their fixed generators), as before."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    was = model.training
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        model.train(True)
        model.training = False  # the submodules (dropout, attention dropout) only
        try:
            yield
        finally:
            model.train(was)


def build_encoder(base: str, pooling: str, max_length: int, device: str, config_kwargs: dict | None = None):
    """Transformer + pooling (`cls` or `mean`) as a SentenceTransformer, from a plain or a sentence-transformers checkpoint."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(base, max_seq_length=max_length, config_kwargs=config_kwargs)
    pool = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)
    return SentenceTransformer(modules=[transformer, pool], device=device)


def loss_extra_state(loss: torch.nn.Module, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Tensors of the loss that are not the model's (shared tensors are saved with the model)."""
    own = {t.data_ptr() for t in model.state_dict().values()}
    return {k: v.detach().clone().contiguous().cpu() for k, v in loss.state_dict().items() if v.data_ptr() not in own}


def trainer_class():
    """The trainer of every pre-training run (also the topic classifier's): the class is built on first use,
    as sentence-transformers and safetensors are imported only by a process that trains."""
    from safetensors.torch import load_file, save_file
    from sentence_transformers import SentenceTransformerTrainer

    class PretrainTrainer(SentenceTransformerTrainer):
        """Checkpoints the loss's own weights too; the loss follows the model's train/eval mode."""

        views_seed = None  # dropout-view objectives: the held-out loss's seed (train-mode views, fixed masks)
        _eval_batch = 0

        def evaluate(self, *args, **kwargs):
            self._eval_batch = 0  # every evaluation draws the same dropout masks batch by batch
            return super().evaluate(*args, **kwargs)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if not model.training and self.views_seed is not None:
                self._eval_batch += 1
                self.loss.train(False)  # the loss's own modules as in held_out_loss; the encoder's dropout on
                with dropout_views(model, self.views_seed + self._eval_batch):
                    return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            self.loss.train(model.training)  # CT's second encoder, decoder dropout: off while evaluating
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        weight_perturbation = None  # SAM / AWP (augsbert.training.weight_perturbation): two passes per optimizer step
        stepped_lr = False  # scheduler ct_stepped (seed 003 App. B), not one of transformers' schedules

        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.stepped_lr and self.lr_scheduler is None:
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, ct_stepped)
                return self.lr_scheduler
            return super().create_scheduler(num_training_steps, optimizer)

        def training_step(self, model, inputs, num_items_in_batch=None):
            if self.weight_perturbation is None:
                return super().training_step(model, inputs, num_items_in_batch)
            parent = super()
            params = {id(p): p for p in (*model.parameters(), *self.loss.parameters())}  # the loss shares the model's
            return self.weight_perturbation.step(
                list(params.values()), lambda: parent.training_step(model, dict(inputs), num_items_in_batch))

        def get_batch_sampler(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None,
                              seed=0):
            if dataset is self.train_dataset:  # length-grouped (args.batch_sampler) for training only
                return super().get_batch_sampler(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
            # held-out batches in a fixed order, so every evaluation sees the same batches and noise
            return torch.utils.data.BatchSampler(range(len(dataset)), batch_size, drop_last=False)

        def _save(self, output_dir=None, state_dict=None):
            super()._save(output_dir, state_dict)
            output_dir = output_dir if output_dir is not None else self.args.output_dir
            extra = loss_extra_state(self.loss, self.model)
            if extra:
                save_file(extra, str(Path(output_dir) / LOSS_STATE))

        def _load_from_checkpoint(self, checkpoint_path, *args, **kwargs):
            super()._load_from_checkpoint(checkpoint_path)
            path = Path(checkpoint_path) / LOSS_STATE
            if path.is_file():
                missing, unexpected = self.loss.load_state_dict(load_file(str(path)), strict=False)
                if unexpected:
                    raise RuntimeError(f"{path}: weights the loss does not have: {unexpected[:5]}")
                log.info("restored the loss's own weights from %s", path)

    return PretrainTrainer


def _at_length(evaluator_cls, length: int | None):
    """`evaluator_cls` that encodes at `length` tokens (the model trains at its own max_seq_length)."""

    class AtLength(evaluator_cls):
        def __call__(self, model, *args, **kwargs):
            trained = model.max_seq_length
            model.max_seq_length = length or trained
            try:
                return super().__call__(model, *args, **kwargs)
            finally:
                model.max_seq_length = trained

    return AtLength


def _dataset(objective: str, sentences: list[str], params: PretrainParams, triples=None):
    from datasets import Dataset

    return Dataset.from_dict(OBJECTIVES[objective].rows(sentences, params.seed, triples, params.options))


def fit(base: str, sentences: list[str], held_out: list[str], dev: pd.DataFrame | None, params: PretrainParams,
        workdir: Path, device: str, precision: str = "auto", triples=None, held_out_triples=None,
        callbacks: list | None = None):
    """Pre-train an encoder from `base` with `params.objective`; resumable from `workdir`.

    Returns (model, loss, metrics). `dev` (sentence1, sentence2, score) is used
    when `selection` is `target_dev`; without it the run falls back to the
    held-out loss. Dev pairs are encoded at `eval_max_length` (the length every
    model of the experiment is evaluated at), training at `max_length`.
    """
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    from transformers import set_seed

    objective = params.objective
    claim_workdir(workdir, {"stage": "pretrain", "base": base, "params": params.spec_json(), "device": device,
                            "precision": precision, "sentences": len(sentences)})
    set_seed(params.seed)
    model = build_encoder(base, params.pooling, params.max_length, device, params.config_kwargs)
    loss = build_loss(objective, model, params, base)
    train = _dataset(objective, sentences, params, triples)
    evaluation = _dataset(objective, held_out, params.replace(seed=params.seed + 1), held_out_triples)
    selection = params.selection
    if selection == "target_dev" and (dev is None or len(dev) < 2):
        log.warning("selection target_dev, but the dataset has no dev split: selecting by held-out loss")
        selection = "held_out_loss"
    evaluator = None
    if selection == "target_dev":
        evaluator = _at_length(EmbeddingSimilarityEvaluator, params.eval_max_length)(
            dev["sentence1"].tolist(), dev["sentence2"].tolist(), dev["score"].astype(float).tolist(), name="dev",
            batch_size=params.eval_batch_size)
    steps = params.max_steps
    eval_steps = min(params.eval_steps, steps)
    args = dict(
        output_dir=str(workdir / "trainer"), max_steps=steps, per_device_train_batch_size=params.batch_size,
        per_device_eval_batch_size=params.batch_size, learning_rate=params.lr,
        warmup_steps=params.warmup_steps if params.warmup_steps is not None else int(math.ceil(params.warmup_ratio * steps)),
        weight_decay=params.weight_decay,
        lr_scheduler_type="constant" if params.scheduler == "ct_stepped" else params.scheduler,
        seed=params.seed, data_seed=params.seed,
        eval_strategy="steps", eval_steps=eval_steps, save_strategy="steps", save_steps=eval_steps,
        save_total_limit=1, logging_steps=max(1, min(50, eval_steps // 2)), **trainer_arguments(),
        use_cpu=device == "cpu", dataloader_num_workers=0, disable_tqdm=False,
        load_best_model_at_end=selection != "last",
        **precision_flags(device, precision), **device_flags(device, params.torch_compile))
    if params.optimizer == "rmsprop":  # else transformers' default AdamW, as before the option
        args["optim"] = "rmsprop"
    if selection == "target_dev":
        args.update(metric_for_best_model="eval_dev_spearman_cosine", greater_is_better=True)
    elif selection == "held_out_loss":
        args.update(metric_for_best_model="eval_loss", greater_is_better=False)
    if params.group_by_length:
        first = OBJECTIVES[objective].columns[0]
        args["batch_sampler"] = length_batch_sampler(
            [min(n, params.max_length) for n in token_counts(model.tokenizer, train[first][:])], params.megabatch)
    trainer = trainer_class()(
        model=model, args=SentenceTransformerTrainingArguments(**args), train_dataset=train,
        eval_dataset=evaluation, loss=loss, evaluator=evaluator, callbacks=[*(callbacks or []), *tracking_callbacks()],
        data_collator=collator(objective, model, params))
    pretokenize_collator(trainer.data_collator, model, train)  # training texts tokenised once
    trainer.weight_perturbation = weight_perturbation(params)
    trainer.stepped_lr = params.scheduler == "ct_stepped"
    trainer.views_seed = params.seed + 1 if OBJECTIVES[objective].dropout_views else None
    output, resumed_from = train_resuming(trainer, workdir / "trainer")
    history = [{k: v for k, v in h.items() if k in ("step", "eval_loss", "eval_dev_spearman_cosine")}
               for h in trainer.state.log_history if "eval_loss" in h]
    for h in history:
        log.info("step %d: held-out loss %.4f%s", h["step"], h["eval_loss"],
                 f", dev spearman {100 * h['eval_dev_spearman_cosine']:.2f}" if "eval_dev_spearman_cosine" in h else "")
    best = trainer.state.best_model_checkpoint
    metrics = {"objective": objective, "selection": selection, "train_sentences": len(sentences),
               "train_rows": len(train),
               "held_out_sentences": len(evaluation), "train_loss": float(output.training_loss),
               "steps": int(output.global_step), "history": history,
               "best_step": int(Path(best).name.split("-")[-1]) if best and selection != "last" else int(output.global_step),
               "resumed_from": resumed_from}
    if history:
        metrics["held_out_loss"] = {"first": history[0]["eval_loss"], "chosen": next(
            (h["eval_loss"] for h in history if h["step"] == metrics["best_step"]), history[-1]["eval_loss"])}
    return model, loss, metrics


def collator(objective: str, model, params: PretrainParams):
    """The trainer's collator for `objective`: the deletion-noise one for noised objectives."""
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator

    if OBJECTIVES[objective].noised:
        return deletion_collator(SentenceTransformerDataCollator)(
            preprocess_fn=model.preprocess, ratio=params.deletion_ratio, unit=params.deletion_unit,
            seed=params.seed, tokenizer=model.tokenizer)
    return SentenceTransformerDataCollator(preprocess_fn=model.preprocess)


def loss_inputs(batch: dict, columns, device) -> tuple[list[dict], torch.Tensor | None]:
    """A collated batch as the loss takes it: one feature dict per text column, and the labels."""
    labels = batch.get("label")
    features = []
    for column in columns:
        if column == "label":
            continue
        prefix = f"{column}_"
        features.append({k[len(prefix):]: v.to(device) for k, v in batch.items()
                         if k.startswith(prefix) and isinstance(v, torch.Tensor)})
    return features, labels.to(device) if labels is not None else None


def records(objective: str, sentences: list[str], params: PretrainParams, triples=None) -> list[dict]:
    rows = OBJECTIVES[objective].rows(sentences, params.seed, triples, params.options)
    return [dict(zip(rows, values)) for values in zip(*rows.values())]


def held_out_loss(model, loss, objective: str, sentences: list[str], params: PretrainParams, triples=None) -> float:
    """Mean loss of `objective` on `sentences` in eval mode (the same batches and noise as the trainer's evaluation;
    a dropout-view objective's views are train-mode passes under the trainer's fixed seeds)."""
    rows = records(objective, sentences, params.replace(seed=params.seed + 1), triples)
    collate = collator(objective, model, params)
    was = model.training
    model.eval()
    loss.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(rows), params.batch_size):
            chunk = rows[start : start + params.batch_size]
            views = (dropout_views(model, params.seed + 1 + start // params.batch_size + 1)
                     if OBJECTIVES[objective].dropout_views else contextlib.nullcontext())
            with views:
                value = loss(*loss_inputs(collate(chunk), OBJECTIVES[objective].columns, model.device))
            if isinstance(value, dict):
                value = torch.stack(list(value.values())).sum()
            total += float(value) * len(chunk)
            count += len(chunk)
    model.train(was)
    return total / max(count, 1)


def base_held_out_loss(base: str, held: list[str], params: PretrainParams, device: str, triples=None) -> float:
    """The objective's held-out loss of the untrained encoder (a fresh loss: new heads as training starts)."""
    from transformers import set_seed

    set_seed(params.seed)
    model = build_encoder(base, params.pooling, params.max_length, device, params.config_kwargs)
    value = held_out_loss(model, build_loss(params.objective, model, params, base), params.objective, held,
                          params, triples)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return value
