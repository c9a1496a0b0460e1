"""Fit a pair model: seed optimisation, best-epoch selection by dev Spearman, resumable checkpoints.

The trainers are the libraries' own (sentence-transformers / Hugging Face);
this module adds what the thesis' protocol needs on top, through trainer
callbacks only:

- best epoch: after every epoch the dev Spearman is computed and logged; the
  best model so far is saved to `<workdir>/best/` (with its history in
  `best.json`), and that model is the result; with `after_warmup` (teachers) only
  a pass that ends once warm-up is over can be the best (a pass inside warm-up
  is logged, never kept);
- no training step (`max_steps: 0`, a teacher): the base model, built and
  seeded as training would start it, is the result;
- seed optimisation (thesis 5.1): N seeds each train for a fraction of one
  epoch (stopped through `control.should_training_stop`), the seed with the
  best dev score is then trained fully;
- resume: the trainer checkpoints to `<workdir>/trainer/` every
  `checkpoint_steps`; a restarted job continues from the last checkpoint
  (RNG states included), so on CPU with a fixed seed it ends with the model an
  uninterrupted run would have produced;
- several processes (`gpus` > 1, `augsbert.training.distributed`): every rank trains,
  rank 0 alone claims the work directory, evaluates dev Spearman and keeps the
  best model; the others wait for it at barriers.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from datasets import Dataset
from transformers import TrainerCallback, set_seed

from . import distributed
from ..store.artifacts import read_json, write_json
from ..evaluation import correlations
from ..models.architectures import ARCHITECTURES, freeze_embeddings
from ..stages.student import StudentParams
from ..stages.teacher import TeacherParams
from .tracking import callbacks as tracking_callbacks, log_metrics, trainer_arguments
from .common import claim_workdir, device_flags, frozen_heap, precision_flags, train_resuming
from .trainers import pair_trainer
from ..data.prompts import ensure_delimiter
from ..data.tables import pairs_of

log = logging.getLogger(__name__)


def dev_spearman(arch, model, dev: pd.DataFrame, params: TeacherParams | StudentParams) -> float:
    return evaluate(arch.name, model, dev, params)[0]["spearman"]


def epoch_end(args, state, train_dataloader=None) -> int | None:
    """The pass over the training pairs (1-based) that ends at this step, or None.

    Epoch-based runs end one every `state.max_steps / epochs` steps. A step budget (`max_steps`, thesis 5.4.3)
    ends one after every full pass over the dataloader, and its last step ends the last, partial pass."""
    if args.max_steps > 0 and train_dataloader is not None:
        accumulation = max(1, args.gradient_accumulation_steps)
        per_epoch = max(1, math.ceil(len(train_dataloader) / accumulation))  # as the Trainer counts it
        if state.global_step % per_epoch == 0 or state.global_step >= state.max_steps:
            return math.ceil(state.global_step / per_epoch)
        return None
    per_epoch = max(1, state.max_steps // max(1, int(args.num_train_epochs)))
    return None if state.global_step % per_epoch else state.global_step // per_epoch


def _callbacks():
    class StopAtStep(TrainerCallback):
        """Ends training after `max_steps` optimizer steps, through the trainer's own control."""

        def __init__(self, max_steps: int):
            self.max_steps = max_steps

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= self.max_steps:
                control.should_training_stop = True
            return control

    class BestEpoch(TrainerCallback):
        """Evaluates dev Spearman at the last step of each epoch; keeps the best model in `best_dir`.

        It runs in `on_step_end`, which the trainer calls *before* it saves that
        step's checkpoint: a job killed during the evaluation resumes from an
        earlier checkpoint and evaluates the epoch again, so no epoch is skipped.
        """

        def __init__(self, arch, dev, params, best_dir: Path, state_path: Path, after_warmup: bool = False):
            self.arch, self.dev, self.params = arch, dev, params
            self.after_warmup = after_warmup  # a pass ending inside warm-up is never the best (teachers)
            self.best_dir, self.state_path = best_dir, state_path
            self.record = read_json(state_path) if state_path.exists() else {"history": [], "best": None}
            self.stop = False  # early_stopping_patience epochs without a better dev score (read by EarlyStopping)

        def on_step_end(self, args, state, control, model=None, train_dataloader=None, **kwargs):
            epoch = epoch_end(args, state, train_dataloader)
            if epoch is None:
                return control
            self.record["history"] = [h for h in self.record["history"] if h["epoch"] < epoch]  # redo after resume
            if self.record.get("stopped_early", {}).get("epoch", 0) >= epoch:
                self.record.pop("stopped_early")
            score = dev_spearman(self.arch, model, self.dev, self.params)
            model.train()
            losses = [h["loss"] for h in state.log_history if "loss" in h]
            entry = {"epoch": epoch, "step": state.global_step, "dev_spearman": score,
                     "train_loss": float(losses[-1]) if losses else None}
            in_warmup = self.after_warmup and not selectable(state.global_step, args.warmup_steps, state.max_steps)
            if in_warmup:
                entry["in_warmup"] = True
            self.record["history"].append(entry)
            log_metrics({"dev/spearman": score, "train/epoch_loss": entry["train_loss"]}, state.global_step)
            previous = [h for h in self.record["history"][:-1]
                        if not math.isnan(h["dev_spearman"]) and not h.get("in_warmup")]
            improved = not in_warmup and (not previous or (
                not math.isnan(score) and score > max(h["dev_spearman"] for h in previous)))
            if improved:
                self._save_best(model)
                self.record["best"] = entry
            patience = self.params.early_stopping_patience
            best_epoch = self.record["best"]["epoch"] if self.record["best"] else 0
            # patience counts from the first pass that can be kept: never a stop inside warm-up
            self.stop = (patience > 0 and self.record["best"] is not None and epoch - best_epoch >= patience
                         and state.global_step < state.max_steps)
            if self.stop:
                self.record["stopped_early"] = {"epoch": epoch, "best_epoch": best_epoch, "patience": patience}
            write_json(self.state_path, self.record)
            log.info("epoch %d (step %d): train loss %s, dev spearman %.2f%s", epoch, state.global_step,
                     f"{entry['train_loss']:.4f}" if losses else "n/a", score,
                     "  (best so far)" if improved else "  (inside warm-up: not kept)" if in_warmup else "")
            if self.stop:
                log.info("early stopping: no better dev spearman for %d epoch(s) since epoch %d", patience, best_epoch)
            return control

        def _save_best(self, model) -> None:
            """Write the new best model beside the old one, then swap: a kill never leaves none.

            (A kill between the two renames leaves only `best.old`; claim_workdir puts it back.)
            """
            new = self.best_dir.with_name(self.best_dir.name + ".partial")
            old = self.best_dir.with_name(self.best_dir.name + ".old")
            shutil.rmtree(new, ignore_errors=True)
            self.arch.save(model, new)
            if self.best_dir.exists():
                shutil.rmtree(old, ignore_errors=True)
                os.replace(self.best_dir, old)
            os.replace(new, self.best_dir)
            shutil.rmtree(old, ignore_errors=True)

    class EarlyStopping(TrainerCallback):
        """Ends training when BestEpoch (rank 0) says so, on every rank of a distributed run at the same step.

        After BestEpoch in the callback list, so it reads that epoch's decision; rank 0's decision is broadcast at
        each epoch end, which every rank reaches together.
        """

        def __init__(self, best: "BestEpoch | None"):
            self.best = best

        def on_step_end(self, args, state, control, train_dataloader=None, **kwargs):
            if epoch_end(args, state, train_dataloader) is not None and \
                    distributed.broadcast(bool(self.best and self.best.stop)):
                control.should_training_stop = True
            return control

    return StopAtStep, BestEpoch, EarlyStopping


def selectable(step: int, warmup_steps: int, max_steps: int) -> bool:
    """Whether the model after `step` may be kept by dev selection after warm-up: warm-up is over (the learning
    rate has reached its peak at step `warmup_steps`), or it is the last step (warm-up of every step)."""
    return step >= warmup_steps or step >= max_steps


@dataclass
class FitResult:
    model: object
    metrics: dict


def training_args(params: TeacherParams | StudentParams, output_dir: Path, seed: int, device: str, precision: str,
                  n_train: int, run_part: str | None = None) -> dict:
    # `batch_size` is the global batch: split over the processes of a distributed run (augsbert.training.distributed)
    steps_per_epoch = math.ceil(n_train / params.batch_size)
    if params.max_steps is None and params.epochs is None:
        raise ValueError("a pair model needs `epochs` or `max_steps`")
    total_steps = params.max_steps or steps_per_epoch * params.epochs
    processes = distributed.world_size()
    parallel = {"ddp_backend": distributed.backend(device)} if processes > 1 else {}
    return dict(
        output_dir=str(output_dir),
        num_train_epochs=1 if params.max_steps else params.epochs,  # a step budget: epochs do not count
        max_steps=params.max_steps or -1,  # -1: the Trainer's "epochs decide"
        per_device_train_batch_size=distributed.per_device_batch(params.batch_size, processes),
        learning_rate=params.lr,
        warmup_steps=int(math.ceil(params.warmup_ratio * total_steps)),  # explicit: 1.0 would mean "1 step"
        weight_decay=params.weight_decay,  # a static student's spec: 0 (stages.student.compact_options)
        lr_scheduler_type="linear",
        seed=seed,
        data_seed=seed,
        save_strategy="steps",
        save_steps=params.checkpoint_steps,
        save_total_limit=1,
        eval_strategy="no",
        logging_steps=max(1, min(50, steps_per_epoch // 2)),  # the loss appears in the log at least twice an epoch
        **trainer_arguments(run_part),  # report_to / run_name: `tracking` (a seed trial is a side run)
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
        disable_tqdm=False,
        **precision_flags(device, precision),
        **device_flags(device, params.torch_compile),
        **parallel,
    )


def _dataset(table: pd.DataFrame):
    return Dataset.from_dict({"sentence1": table["sentence1"].tolist(), "sentence2": table["sentence2"].tolist(),
                              "score": table["score"].astype(float).tolist()})


def _build(arch, base: str, params: TeacherParams | StudentParams, device: str, seed: int):
    set_seed(seed)  # the fresh head of a Cross-Encoder is initialised here
    model = arch.build(base, params, device)
    if params.topic_prompt:  # one token for the topic delimiter, added before any freezing
        ensure_delimiter(model.tokenizer, params.topic_prompt, arch.encoder(model))
    if params.freeze_embeddings:
        frozen = freeze_embeddings(arch.encoder(model))
        log.info("frozen embedding layers: %s", ", ".join(frozen))
    return model


def trial_seed(seed: int, k: int) -> int:
    """Seed of trial k for the run seeded `seed`: trials of different run seeds never overlap."""
    return seed if k == 0 else seed * 1000 + k


def _seed_search(arch, base, train, dev, params, workdir, device, precision) -> tuple[int, list[dict]]:
    opt = params.seed_optimization
    path = workdir / "seed_search.json"
    done = distributed.broadcast(read_json(path) if distributed.is_main() and path.exists() else None)
    if done is not None:
        return done["chosen"], done["trials"]
    StopAtStep, _, _ = _callbacks()
    steps_per_epoch = math.ceil(len(train) / params.batch_size)
    stop = max(1, int(opt.fraction * steps_per_epoch))
    trials = []
    for k in range(opt.trials):
        seed = trial_seed(params.seed, k)
        model = _build(arch, base, params, device, seed)
        args = training_args(params, workdir / f"trial-{seed}", seed, device, precision, len(train), f"trial-{seed}")
        args.update(save_strategy="no")  # the full schedule (warm-up, decay), stopped early by StopAtStep
        with frozen_heap():
            pair_trainer(arch.name, model, args, _dataset(train), [StopAtStep(stop)], params).train()
        if not distributed.is_main():  # rank 0 scores the trial (every rank holds the same weights)
            continue
        score = dev_spearman(arch, model, dev, params)
        trials.append({"seed": seed, "steps": stop, "dev_spearman": score})
        log.info("seed trial %d/%d: seed %d, %d steps, dev spearman %.2f", k + 1, opt.trials, seed, stop, score)
        shutil.rmtree(workdir / f"trial-{seed}", ignore_errors=True)
    if not distributed.is_main():
        return distributed.broadcast(None)
    chosen = max(trials, key=lambda t: -math.inf if math.isnan(t["dev_spearman"]) else t["dev_spearman"])["seed"]
    write_json(path, {"chosen": chosen, "trials": trials})
    log.info("seed optimisation chose seed %d", chosen)
    return distributed.broadcast((chosen, trials))


def fit(arch_name: str, base: str, train: pd.DataFrame, dev: pd.DataFrame | None, params: TeacherParams | StudentParams,
        workdir: Path, device: str, precision: str = "auto", callbacks: list | None = None,
        after_warmup: bool = False) -> FitResult:
    """Train `arch_name` from `base` on `train`; select the best epoch on `dev` (with `after_warmup`, among the
    passes that end after warm-up); resume from `workdir`. `max_steps` 0: no training, the built model.

    `callbacks` are extra transformers TrainerCallbacks for the full training run.
    In a distributed run every rank calls this; only rank 0's result carries
    the best model and the dev history (the other ranks return their replica).
    """

    arch = ARCHITECTURES[arch_name]
    if params.max_steps == 0:  # the untrained model: built (a Cross-Encoder's head seeded) as training would start
        log.info("no training step (max_steps 0): the base model as it is")
        return FitResult(_build(arch, base, params, device, params.seed),
                         {"seed": params.seed, "seed_trials": [], "train_pairs": len(train), "train_loss": None,
                          "steps": 0, "resumed_from": None, "loss_log": []})
    processes = distributed.world_size()
    if distributed.is_main():  # the writer lock's holder tidies and claims the resume state; the others wait
        # `processes` (only when > 1): the per-rank RNG states of another process count do not fit
        claim_workdir(workdir, {"arch": arch_name, "base": base, "params": params.spec_json(),
                                "device": device.split(":")[0], "precision": precision, "train_pairs": len(train),
                                **({"processes": processes} if processes > 1 else {})})
    distributed.barrier()
    has_dev = dev is not None and len(dev) > 1
    seed, trials = params.seed, []
    if params.seed_optimization.trials > 0:
        if not has_dev:
            raise ValueError("seed optimisation needs a dev split")
        seed, trials = _seed_search(arch, base, train, dev, params, workdir, device, precision)
    model = _build(arch, base, params, device, seed)
    _, BestEpoch, EarlyStopping = _callbacks()
    callbacks = [*(callbacks or []), *tracking_callbacks()]
    best = None
    if has_dev and distributed.is_main():
        best = BestEpoch(arch, dev, params, workdir / "best", workdir / "best.json", after_warmup)
        callbacks.append(best)
    if params.early_stopping_patience > 0:
        if not has_dev:
            raise ValueError("early_stopping_patience needs a dev split to compare epochs on")
        callbacks.append(EarlyStopping(best))
    trainer_dir = workdir / "trainer"
    trainer = pair_trainer(arch_name, model, training_args(params, trainer_dir, seed, device, precision, len(train)),
                           _dataset(train), callbacks, params)
    output, resumed_from = train_resuming(trainer, trainer_dir)
    metrics = {"seed": seed, "seed_trials": trials, "train_pairs": len(train),
               "train_loss": float(output.training_loss), "steps": int(output.global_step),
               "resumed_from": resumed_from,
               # the logged training loss by step (averaged over all processes' batches)
               "loss_log": [{"step": h["step"], "loss": h["loss"]} for h in trainer.state.log_history if "loss" in h]}
    if processes > 1:
        metrics.update(processes=processes, per_device_batch_size=params.batch_size // processes)
    if has_dev and distributed.is_main():
        record = read_json(workdir / "best.json")
        metrics.update(dev_history=record["history"], best_epoch=record["best"]["epoch"],
                       dev_spearman=record["best"]["dev_spearman"])
        if "stopped_early" in record:
            metrics["stopped_early"] = record["stopped_early"]
        model = arch.load(workdir / "best", device)
    return FitResult(model, metrics)


def symmetrise(table: pd.DataFrame) -> pd.DataFrame:
    """Both (a, b) and (b, a) of every pair (the teacher's gold training set)."""
    swapped = table.rename(columns={"sentence1": "sentence2", "sentence2": "sentence1"})
    return pd.concat([table, swapped[table.columns]], ignore_index=True)


def evaluate(arch_name: str, model, table: pd.DataFrame,
             params: TeacherParams | StudentParams) -> tuple[dict, np.ndarray]:
    pred = ARCHITECTURES[arch_name].predict(model, pairs_of(table), params.eval_batch_size, params)
    return correlations(pred, table["score"].to_numpy()), pred


def save_model(arch_name: str, model, path: Path) -> None:
    ARCHITECTURES[arch_name].save(model, path)
    log.info("saved %s model to %s", arch_name, path)
