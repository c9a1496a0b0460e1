"""The optimiser and schedule options the trained stages' config sections share, declared once, and what every
trained stage's spec adds to its section (`Trained`).

`TrainingOptions` is a mixin of options classes (augsbert.params.option): the `teacher` and `student` sections
take it whole (`class TeacherOptions(TrainingOptions, TeacherModelOptions)`); `adapt`, `classifier` and the `gpl`
stage take slices of it (`augsbert.params.slice_of`). A dataclass lists its fields in the order of the reversed
MRO's first appearance, so the bases after the mixin come first: the section's own head (model, length,
architecture), then these options, then what the section's class declares itself. The texts and defaults here are
the pair model's (the teacher's); a section with its own default or words for one of them restates it
(`augsbert.params.restate`: the student's `group_by_length` true and `megabatch` 400, adapt's batch of 64), which
keeps the option's type, bounds and place; the words makers below give the sections the text they share.

Options that sit elsewhere in a section (`torch_compile`, after the section's own options) are makers: a function
per option, called where the field is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..params import TORCH_COMPILE, ModelParams, Params, option

_GROUP_BY_LENGTH = """
    Length-grouped batches: the shuffled {what} are cut into mega-batches of `megabatch` batches, each sorted by
    token length and cut into batches, and the batch order is shuffled (the longest batch first). Each example is
    seen once per epoch, the order is fixed by the seed and survives a resume. Removes most padding (README
    "Training")."""


def group_by_length_words(closing: str, what: str = "training pairs") -> str:
    """`group_by_length`'s description: what length grouping does (of `what`), then the section's word on its
    default."""
    return f"{_GROUP_BY_LENGTH.format(what=what)} {closing}"


def megabatch_words(closing: str = "") -> str:
    """`megabatch`'s description: batches per mega-batch, then the section's reason for its default (if any)."""
    return f"""
        Batches per mega-batch for `group_by_length` (more = less padding, less random batch composition).
        {closing}"""


def torch_compile_option() -> Any:
    """`torch_compile` (keyed only when set)."""
    return option(False, TORCH_COMPILE, keyed_default=False)


@dataclass(frozen=True, kw_only=True)
class SeedOptimization(Params):
    """Thesis 5.1: `trials` seeds each train `fraction` of an epoch; the best on dev trains fully (0: off). The
    options of the `seed_optimization` object of a training section."""

    trials: int = option(0, "Number of seeds tried (thesis 10).", minimum=0)
    fraction: float = option(0.3, "Fraction of the first epoch each trial trains.", exclusiveMinimum=0, maximum=1)


@dataclass(frozen=True, kw_only=True)
class TrainingOptions(Params):
    """The optimiser schedule of a pair-trained section (teacher, student), in the order the sections list it."""

    epochs: int = option(3, "Training epochs (thesis 3; 5 for the BWS distillation runs).", minimum=1)
    max_steps: int | None = option(None, """
        Train for this many optimizer steps instead of `epochs` (a cap for real-size data on a CPU: steps = pairs /
        batch_size per epoch, twice that with `symmetric`). Warm-up is `warmup_ratio` of these steps; dev Spearman
        is taken after each full pass and at the last step, the best kept. null = `epochs` decides. Set, it enters
        the artifact key and `epochs` leaves it (as `student.max_steps`).""", minimum=1)
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
    group_by_length: bool = option(False, group_by_length_words("""
        Default false for the teacher: on the Lee demo (3 seeds) the grouped CBE teacher scored 40.94 ± 0.65 test /
        47.34 dev Spearman against 43.91 ± 0.66 / 51.83 with random batches, beyond seed noise; students and the
        lower bound showed no difference."""))
    megabatch: int = option(50, megabatch_words(), minimum=1)
    early_stopping_patience: int = option(0, """
        Stop training after this many epochs without a better dev Spearman (the best epoch is kept either way);
        0 = off, every epoch trains, as the thesis' protocol does (5.1). Needs a dev split. Enters the artifact key
        only when set.""", minimum=0, keyed_default=False)


@dataclass(frozen=True, kw_only=True)
class Trained(ModelParams):
    """What the planning hook of every trained stage adds to its section's options in a spec: the model it starts
    from (`ModelParams`) and the run's seed. A stage whose params derive from it trains a model (its job's GPU
    memory holds weights, gradients and optimizer state: augsbert.scheduling.resources)."""

    seed: int


@dataclass(frozen=True, kw_only=True)
class Prompted(Params):
    """A trained stage that learns prompted texts: the topic delimiter when the experiment prompts (thesis 4.4),
    resolved from `topic_prompt` and `topic_delimiter` by the planning hook."""

    topic_prompt: str | None = None
