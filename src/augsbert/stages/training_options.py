"""The optimiser and schedule options the trained stages' config sections share, declared once.

`TrainingOptions` is a mixin of options classes (augsbert.params.option): the `teacher` and `student` sections
take it whole (`class TeacherOptions(TrainingOptions, TeacherModelOptions)`). A dataclass lists its fields in the
order of the reversed MRO's first appearance, so the bases after the mixin come first: the section's own head
(model, length, architecture), then these options, then what the section's class declares itself. A section
that redeclares one of these fields (the student's `group_by_length` default true, its `megabatch` 400) changes
its default and description and keeps its place. The texts and defaults here are the pair model's (the
teacher's); the student redeclares `max_steps`, `group_by_length` and `megabatch` through the makers below, which
also give other sections (adapt) the words they share.

Options that sit elsewhere in a section (`torch_compile`, after the section's own options) are makers: a function
per option, called where the field is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..params import TORCH_COMPILE, Params, SeedOptimization, option

_GROUP_BY_LENGTH = """
    Length-grouped batches: the shuffled {what} are cut into mega-batches of `megabatch` batches, each sorted by
    token length and cut into batches, and the batch order is shuffled (the longest batch first). Each example is
    seen once per epoch, the order is fixed by the seed and survives a resume. Removes most padding (README
    "Training")."""


def max_steps_option(description: str) -> Any:
    """`max_steps`: optimizer steps instead of `epochs` (null: `epochs` decides); the section says the rest."""
    return option(None, description, minimum=1)


def group_by_length_option(default: bool, closing: str, what: str = "training pairs") -> Any:
    """`group_by_length`: what length grouping does (of `what`), then the section's word on its default."""
    return option(default, f"{_GROUP_BY_LENGTH.format(what=what)} {closing}")


def megabatch_option(default: int, closing: str = "") -> Any:
    """`megabatch`: batches per mega-batch, then the section's reason for its default (if it has one)."""
    return option(default, f"""
        Batches per mega-batch for `group_by_length` (more = less padding, less random batch composition).
        {closing}""", minimum=1)


def torch_compile_option() -> Any:
    """`torch_compile` (keyed only when set)."""
    return option(False, TORCH_COMPILE, keyed_default=False)


@dataclass(frozen=True, kw_only=True)
class TrainingOptions(Params):
    """The optimiser schedule of a pair-trained section (teacher, student), in the order the sections list it."""

    epochs: int = option(3, "Training epochs (thesis 3; 5 for the BWS distillation runs).", minimum=1)
    max_steps: int | None = max_steps_option("""
        Train for this many optimizer steps instead of `epochs` (a cap for real-size data on a CPU: steps = pairs /
        batch_size per epoch, twice that with `symmetric`). Warm-up is `warmup_ratio` of these steps; dev Spearman
        is taken after each full pass and at the last step, the best kept. null = `epochs` decides. Set, it enters
        the artifact key and `epochs` leaves it (as `student.max_steps`).""")
    batch_size: int = option(16, """
        Training batch size; with `gpus` > 1 the global batch, split over the processes (a multiple of
        `gpus`).""", minimum=1)
    lr: float = option(2.0e-5, "AdamW learning rate (linear decay after warm-up).", exclusiveMinimum=0)
    warmup_ratio: float = option(0.1, "Fraction of all training steps used for linear warm-up.", minimum=0,
                                 maximum=1)
    weight_decay: float = option(0.01, "AdamW weight decay.", minimum=0)
    freeze_embeddings: bool | None = option(None, """
        Freeze the word, position and token-type embeddings while training. null = true when starting from an
        MLM-adapted checkpoint (thesis 5.4.3), else false.""")
    seed_optimization: SeedOptimization = option(SeedOptimization, """
        Seed optimisation (thesis 5.1): train `trials` seeds for `fraction` of one epoch, keep the best on dev,
        then train it fully. 0 trials = off.""")
    checkpoint_steps: int = option(500, """
        Save a resumable checkpoint every this many optimizer steps (in artifacts/.checkpoints/, removed when the
        stage finishes).""", minimum=1)
    eval_batch_size: int = option(64, "Batch size for dev/test scoring.", minimum=1)
    group_by_length: bool = group_by_length_option(False, """
        Default false for the teacher: on the Lee demo (3 seeds) the grouped CBE teacher scored 40.94 ± 0.65 test /
        47.34 dev Spearman against 43.91 ± 0.66 / 51.83 with random batches, beyond seed noise; students and the
        lower bound showed no difference.""")
    megabatch: int = megabatch_option(50)
    early_stopping_patience: int = option(0, """
        Stop training after this many epochs without a better dev Spearman (the best epoch is kept either way);
        0 = off, every epoch trains, as the thesis' protocol does (5.1). Needs a dev split. Enters the artifact key
        only when set.""", minimum=0, keyed_default=False)
