"""The `pretrain` stage: unsupervised pre-training of a sentence encoder (job: augsbert.jobs.pretrain)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal
from pathlib import Path

from ..errors import ConfigError
from ..store.fingerprints import path_digest
from ..planning.graph import Graph, Node, SeedPlan
from ..params import TORCH_COMPILE, Params, option, slice_of
from ..objectives import OBJECTIVES, PRESETS, entry, pretrain_schema, resolved
from .base import Row, Stage
from .data import data_node, triples_inputs
from .sizes import pool_items
from .training_options import Trained, TrainingOptions


@dataclass(frozen=True, kw_only=True)
class PretrainOptions(Params):
    """The `pretrain` section's own options (its schema section is written from here: augsbert.reference.schema). The
    objectives' own options (temperature, deletion_ratio, ...) and `objective`'s choices join it from the
    objectives' registry (`schema_properties`), so the written section holds every key a user can set."""

    SECTION = "pretrain"
    SECTION_DESCRIPTION = """
        Unsupervised pre-training of a sentence encoder (seed 003 TSDAE; thesis 4.2, 5.4.2, Table 6.10) on the
        sentences of a dataset. With an objective set, the experiment reports the pre-trained encoder as the model
        `pretrained` (target test split and evaluation suite), and `student.base`, `teacher.base` and
        `candidates.semantic_model: pretrained_stage` can start later stages from it. Schedule keys left null come
        from `preset`."""

    # its choices: none and the registry's objectives (augsbert.objectives.OBJECTIVES), added by schema_properties
    objective: str = option("none", """
        `simcse` (two dropout views, in-batch negatives, cosine / temperature), `simcse_sup` (NLI anchor /
        entailment / contradiction triples from `triples`), `ct` (Contrastive Tension: two encoders, dot product,
        BCE, `ct_negatives` random negatives per positive), `ct_in_batch` (CT with in-batch negatives), `tsdae`
        (delete `deletion_ratio` of the words, one pooled vector, tied decoder that cross-attends to it only), `nm`
        (Noise Matching: SimCSE with the noised sentence as positive and a stop-gradient on the clean one), and the
        thesis' multi-task `mlm+simcse`, `mlm+nm`, `tsdae+nm` (main loss + aux_weight x contrastive loss),
        `consert` (seed 000: ConSERT, augmented embedding matrices of two views, encoder dropout off, symmetric
        NT-Xent of its equation 2.9; `consert_views`), `clm_ae` / `mlm_ae` (seed 000's autoencoders: a
        `decoder_layers`-layer decoder reconstructs x from f(x) left to right, or predicts an 80 %-masked copy with
        f(x) in slot 0) and `simcse+clm_ae` / `simcse+mlm_ae` (SimCSE + aux_weight x autoencoder on the shared
        f(x), seed 000 equation 3.6; its weights 0.1 ... 0.0001, best 0.001), `rcl` (seed 002 Regularized
        Contrastive Learning: one entropy model per `rcl_phis` value, stage `rcl_entropy`, then the final model
        with equation 3; `rcl_phis`). none = no pre-training.""")
    base_model: str | None = option(None, "Model pre-training starts from; null = the experiment's `base_model`.")
    dataset: str | None = option(None, """
        Dataset whose sentences are the training corpus (a key of `datasets`, e.g. a `text_file` corpus); null =
        the experiment's dataset. The evaluated dataset's dev/test sentences are removed from it
        (`exclude_eval_sentences`).""")
    pool: Literal["all", "train", "unlabeled", "train+unlabeled"] = option("all", """
        Which sentences of that dataset (unique by normalised text): `all` = its train split and its unlabeled
        corpus, whichever it has (a `text_file` corpus has only the latter); or just one of them.""")
    exclude_eval_sentences: bool = option(True, "Remove the evaluated dataset's dev and test sentences from the "
                                                "corpus.")
    triples: str | list[str] | None = option(None, """
        `simcse_sup` and `rcl`: a .tsv, .csv (header row), .jsonl or .parquet file with columns `anchor`,
        `positive` (entailment) and `negative` (contradiction), or SNLI / MultiNLI as released
        (`snli_1.0_train.jsonl`, `multinli_1.0_train.jsonl`: per premise with both, its first entailment and first
        contradiction hypothesis form a triple, as SimCSE's supervised data; gold label "-" skipped), or a list of
        such files (e.g. SNLI + MultiNLI, SimCSE's setup); relative paths are under `data_dir`. Keyed by content.
        `rcl` without a file trains on the corpus sentences instead (each sentence as its own positive, two
        dropout views, no hard negative; not seed 002's setup).""", items={"type": "string", "minLength": 1},
        minItems=1)
    triples_format: Literal["auto", "triples", "nli"] = option("auto", """
        How `triples` files are read: `auto` = SNLI / MultiNLI (`nli`) if the file has a released name
        (snli_1.0_*.jsonl, multinli_1.0_*.jsonl) or its first JSON record has sentence1, sentence2 and gold_label,
        else anchor / positive / negative columns (`triples`). Set it when a file is neither named nor shaped that
        way.""")
    preset: str = option("thesis", """
        Schedule for the keys below left null. `thesis` (5.4.2): batch 64, AdamW lr 3e-5, 12,500 steps, 10 %
        warm-up then linear decay, weight decay 0.01. `tsdae` (seed 003 App. B, thesis 5.4.1): batch 8, constant
        lr 3e-5, no warm-up, weight decay 0, 100,000 steps. `ct` (seed 003 App. B, CT as TSDAE trained it): batch
        8, RMSProp, lr 1e-5 stepped down (`ct_stepped`), no warm-up, weight decay 0, 100,000 steps.""",
        enum=list(PRESETS))  # the choices are the presets (augsbert.objectives.PRESETS)
    max_steps: int | None = option(None, "Optimizer steps (null = preset).", minimum=1)
    batch_size: int | None = option(None, "Sentences per batch (null = preset); in-batch negatives = batch size - "
                                          "1.", minimum=2)
    lr: float | None = option(None, "Learning rate (null = preset).", exclusiveMinimum=0)
    warmup_ratio: float | None = option(None, "Fraction of steps for linear warm-up (null = preset).", minimum=0,
                                        maximum=1)
    warmup_steps: int | None = option(None, """
        Warm-up in optimizer steps, in place of warmup_ratio (seed 000 Table 5.3: 910 steps whatever the run's
        length); null = warmup_ratio.""", minimum=0)
    weight_decay: float | None = option(None, "AdamW weight decay (null = preset).", minimum=0)
    scheduler: Literal["linear", "constant", "constant_with_warmup", "cosine", "ct_stepped"] | None = option(None, """
        Learning-rate schedule after warm-up (null = preset). `ct_stepped`: seed 003 App. B's segmented-constant
        CT schedule, the lr for steps 1-500, 0.8 of it for 501-1000, 0.6 for 1001-1500, 0.4 for 1501-2000, 0.2
        after (1e-5, 8e-6, 6e-6, 4e-6, 2e-6 at lr 1e-5).""")
    optimizer: Literal["adamw", "rmsprop"] | None = option(None, """
        `adamw` (torch AdamW, the thesis and TSDAE) or `rmsprop` (torch RMSprop with its defaults, CT in seed 003
        App. B; weight_decay applies to it too); null = preset.""")
    pooling: Literal["cls", "mean"] | None = option(None, """
        Sentence vector of the trained encoder (Table 6.10 reports both); null = the objective's source: `cls` for
        SimCSE, TSDAE, NM and the combinations, `mean` for CT.""")
    max_length: int = option(128, """
        Maximum tokens per sentence (the seeds do not state it for TSDAE / the thesis; SimCSE used 32). 128 keeps
        all but the longest sentences whole.""", minimum=8)
    held_out: float = option(0.05, """
        Share of the corpus (at most 2,000 sentences) kept out of training to measure the objective's loss.""",
        exclusiveMinimum=0, exclusiveMaximum=1)
    eval_steps: int = option(500, """
        Steps between evaluations (held-out loss, dev Spearman) and resumable checkpoints.""", minimum=1)
    selection: Literal["target_dev", "held_out_loss", "last"] = option("target_dev", """
        Which evaluated checkpoint is the result: best target dev Spearman (Park and RCL on STS-B dev; falls back
        to held_out_loss when the dataset has no dev split), lowest held-out loss (seed 000's validation loss;
        SimCSE's dropout views are then drawn in train mode under a fixed seed), or the last step (TSDAE's fixed
        steps: its App. B uses no early stopping). Each paper grid sets it explicitly.""")
    group_by_length: bool | None = option(None, """
        Length-grouped batches (README "Training"). null = on for objectives without in-batch negatives (tsdae,
        ct) and off for the others, whose negatives would otherwise all share the anchor's length.""")
    megabatch: int = option(50, "Batches per mega-batch for group_by_length.", minimum=1)
    torch_compile: bool = option(False, TORCH_COMPILE)  # keyed only when set: objectives.resolved

    @classmethod
    def schema_properties(cls) -> dict[str, dict]:
        """Its options, then `objective`'s choices and every objective's own options, from the objectives'
        registry (each declared once, in its options class: augsbert.objectives)."""
        properties = super().schema_properties()
        pretrain_schema(properties)
        return properties


ENTROPY_ROLE = "rcl_entropy_"  # RCL's entropy models: roles rcl_entropy_<k>, the pretrain node's inputs entropy_<k>

# the `pretrain` options that plan nodes (where it starts, its corpus' dataset) and never reach a spec
PLANNED = ("base_model", "dataset")


@dataclass(frozen=True, kw_only=True)
class PretrainParams(slice_of(PretrainOptions, but=PLANNED), slice_of(TrainingOptions, "eval_batch_size"),
                     Trained):
    """The `pretrain` stage's params: the `pretrain` section as `objectives.resolved` leaves it (but its `PLANNED`
    options, which the plan turns into `model` and the corpus input): the schedule filled from the preset, and only
    the options the objective (and SimCSE variant) reads. The spec is flat; the objective's options are its
    entry's options class (`options`), read as attributes here too.

    `eval_batch_size` / `eval_max_length` (`evaluation.batch_size` / `max_length`) encode the target's dev split
    (checkpoint selection and the results row), as the zero-shot row does; `regulators` is set by the job (RCL: its
    entropy inputs).
    """

    # resolved: the schedule the preset fills (the options' null), the objective's pooling and grouping; `optimizer`
    # and `triples_format` left out at adamw / auto (keys planned before them) read as null / auto
    max_steps: int = field()
    batch_size: int = field()
    lr: float = field()
    warmup_ratio: float = field()
    weight_decay: float = field()
    scheduler: Literal["linear", "constant", "constant_with_warmup", "cosine", "ct_stepped"] = field()
    pooling: Literal["cls", "mean"] = field()
    group_by_length: bool = field()
    eval_max_length: int | None = None  # evaluation.max_length; None: the trained max_length
    triples_digest: str | list[str] | None = None
    options: Params | None = None  # the objective's own options (its entry's options class), read from the same level
    regulators: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict, where: str = "params") -> PretrainParams:
        """The flat spec: the objective's options are read (and checked) by its entry's options class."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        options = entry(data.get("objective")).options
        own = {f.name for f in dataclasses.fields(options)}
        unknown = sorted(set(data) - own - {f.name for f in dataclasses.fields(cls)})
        if unknown:  # an option of another objective, or of no version of the stage
            raise ConfigError(f"{where}: unknown parameter {unknown[0]!r} for objective {data['objective']!r} "
                              "(written by another version of the stage? plan it again)")
        common = super().from_json({k: v for k, v in data.items() if k not in own}, where)
        return common.replace(options=options.from_json({k: v for k, v in data.items() if k in own}, where))

    def to_json(self) -> dict:
        values = super().to_json()
        values.update(values.pop("options") or {})
        return values

    def __getattr__(self, name: str):
        # only for names the class lacks: the objective's options read as `params.temperature`
        options = self.__dict__.get("options")
        if options is not None and name in options.__dataclass_fields__:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__} of objective {self.__dict__.get('objective')!r} has no {name!r}")


PRETRAIN = Stage("pretrain", 1, "unsupervised pre-training of a sentence encoder (pretrain.objective: SimCSE, CT, "
                 "TSDAE, Noise Matching, MLM / TSDAE multi-task) on a dataset's sentences",
                 "augsbert.jobs.pretrain:run",
                 # the triples file enters by digest
                 section="pretrain", runtime=("eval_batch_size", "model", "triples"), roles=("pretrained",),
                 kind_options=("objective",),
                 raw_inputs=lambda node: triples_inputs(node),
                 seconds_per_item=0.01, trains=True, params=PretrainParams, checkpoint="unsupervised pre-trained",
                 plan=lambda seed_plan: plan_pretrain(seed_plan),
                 needs=("data", "rcl_entropy_0"), items=pool_items,
                 rows={"pretrained": Row(20, "Pre-trained", "encoder after unsupervised pre-training "
                                                            "(pretrain.objective), no labels")},
                 check=lambda graph, name, exp: check_pretrain_use(name, exp, exp["adapt"]["variant"]),
                 gpu_sequences=2)  # two views (SimCSE, NM), two models (CT), or an encoder and its decoder (TSDAE)
STAGES = (PRETRAIN,)


def check_pretrain_use(name: str, exp: dict, variant: str) -> None:
    """Later stages may start from the pretrain stage only when there is one, and not from two checkpoints."""
    uses = {"teacher.base": exp["teacher"]["base"] == "pretrained",
            "student.base": exp["student"]["base"] == "pretrained",
            "candidates.semantic_model": exp["candidates"]["semantic_model"] == "pretrained_stage"}
    if exp["pretrain"]["objective"] == "none":
        for key, used in uses.items():
            if used:
                raise ConfigError(f"experiments.{name}.{key}: starts from the pretrain stage, but "
                                  "pretrain.objective is none; set an objective")
    clash = {"teacher.base": variant != "augsbert", "student.base": variant == "full_domain"}
    for key, adapted in clash.items():
        if uses[key] and adapted:
            raise ConfigError(f"experiments.{name}.{key}: pretrained, but adapt.variant ({variant}) already "
                              "starts it from the MLM-adapted checkpoint; choose one")
    for objective in OBJECTIVES.values():  # what each objective refuses (its own options set for another one, ...)
        objective.check(f"experiments.{name}", exp["pretrain"])


# options of the `rcl` objective that train its entropy models (stage `rcl_entropy`): in their keys only
ENTROPY_ONLY = ("rcl_patience", "rcl_eval_steps", "rcl_entropy_max_steps")


def pretrain_options(graph: Graph, name: str, exp: dict) -> tuple[dict, str]:
    """The `pretrain` section as a pretrain node keeps it (`objectives.resolved`, the model, the evaluation sizes,
    the triples' digests) and the dataset of its corpus (`pretrain.dataset`, or the target): also what RCL's entropy
    models are planned from (stages.rcl_entropy)."""
    options = resolved(exp["pretrain"])
    options["model"] = options.pop("base_model") or exp["base_model"]
    options["eval_batch_size"] = exp["suite"]["batch_size"]
    options["eval_max_length"] = exp["suite"]["max_length"]  # as the zero-shot row: comparable
    corpus = options.pop("dataset") or exp["dataset"]
    if corpus not in graph.config["datasets"]:
        raise ConfigError(f"experiments.{name}.pretrain.dataset: unknown dataset '{corpus}' "
                          f"(configured: {', '.join(sorted(graph.config['datasets']))})")
    if options.get("triples_format") == "auto":  # told from each file (name or first record) when read:
        options.pop("triples_format")             # keys of configs without the option stay as they were
    if options["triples"]:
        one = isinstance(options["triples"], str)  # a list (SNLI + MultiNLI): one digest per file
        paths = [Path(graph.config["data_dir"]) / f for f in ([options["triples"]] if one else options["triples"])]
        # as a missing raw data file: its job stops with the path (a grid for NLI data not yet
        # downloaded must not break every plan), and the file's arrival changes the key
        digests = [path_digest(graph.digests, p) if p.is_file() else "missing" for p in paths]
        options["triples"] = os.path.normpath(paths[0]) if one else [os.path.normpath(p) for p in paths]
        options["triples_digest"] = digests[0] if one else digests
    else:
        options.pop("triples")
        options.pop("triples_format", None)
    return options, corpus


def pretrain(graph: Graph, name: str, exp: dict, seed: int, target: Node, entropy: dict[str, Node]) -> Node:
    """The pretrain node: corpus = `pretrain.dataset` (or the target), evaluated on the target (`eval`); `entropy`:
    RCL's entropy models (inputs `entropy_<k>`)."""
    options, corpus = pretrain_options(graph, name, exp)
    for key in ENTROPY_ONLY:
        options.pop(key, None)
    inputs = {"data": data_node(graph, corpus), "eval": target, **entropy}
    return graph.add(PRETRAIN, f"{corpus}.{options['objective']}.{options['pooling']}", {**options, "seed": seed},
                     inputs)


def plan_pretrain(seed_plan: SeedPlan) -> dict[str, Node]:
    """The pretrain stage's encoder (`pretrain.objective`), from RCL's entropy models (roles `rcl_entropy_<k>`, the
    `rcl_entropy` stage's) with `rcl`."""
    exp = seed_plan.config
    if exp["pretrain"]["objective"] == "none":
        return {}
    entropy = {role.removeprefix("rcl_"): node for role, node in seed_plan.roles.items()
               if role.startswith(ENTROPY_ROLE)}
    return {"pretrained": pretrain(seed_plan.graph, seed_plan.experiment, exp, seed_plan.seed,
                                   seed_plan.roles["data"], entropy)}
