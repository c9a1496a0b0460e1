"""The `student` stage: a Bi-Encoder trained on teacher-labelled pairs (with or without the gold), and the
lower bound, the same Bi-Encoder on gold labels only (job: augsbert.jobs.student)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..params import Params, default_of, option, restate, slice_of
from ..planning.graph import Graph, Node, SeedPlan
from .base import MODEL_SETTINGS, Row, Stage
from .runs import from_adapted, inert_grouping_dropped, source, topic_prompt, trained_on, transfer, wants
from .sizes import trained_items
from .training_options import (Prompted, Trained, TrainingOptions, group_by_length_words, megabatch_words,
                               torch_compile_option)


@dataclass(frozen=True, kw_only=True)
class StudentModelOptions(Params):
    """The head of the `student` section: from what, on what, and how it picks its epoch (before the schedule)."""

    base_model: str | None = option(None, "Model the student starts from; null = the experiment's `base_model`.")
    base: Literal["base_model", "pretrained"] = option("base_model", """
        `pretrained`: the student starts from the encoder of this experiment's `pretrain` stage (its pooling
        included); the lower bound stays on `base_model`.""")
    max_length: int = option(256, "Maximum tokens per sentence.", minimum=8)
    use_gold_labels: bool = option(False, """
        Also train on the teacher's gold train pairs with their gold scores (in domain transfer: the source's
        gold). Default false, as the thesis: each gold pair enters once, with the teacher's score
        (`labels.relabel_gold`). true + relabel_gold false = the AugSBERT paper's gold + silver; both true = each
        gold pair twice (gold label and teacher label). The lower bound always learns gold.""")
    selection: Literal["source_dev", "target_dev", "last"] | None = option(None, """
        How the Bi-Encoders (student and lower bound) pick their epoch: by Spearman on the dev split of the source
        (`source_dev`), of the target (`target_dev`), or the last epoch (`last`). null = `source_dev` with
        `source` set (domain transfer: no target label is used at any point), else `target_dev` (in-domain the
        two are the same split). Written to the results file.""")


@dataclass(frozen=True, kw_only=True)
class StudentOptions(TrainingOptions, StudentModelOptions):
    """The `student` section (its schema section is written from here: augsbert.reference.schema): the head, the
    shared schedule (augsbert.stages.training_options; the student's own `max_steps` words, length grouping on
    with larger mega-batches), the loss and the compact students' options."""

    SECTION = "student"
    SECTION_DESCRIPTION = "The Bi-Encoder (mean pooling, cosine, CosineSimilarityLoss); also used for the lower bound."

    max_steps = restate(None, """
        Train for this many optimizer steps instead of `epochs`, as many passes over the pairs as that takes
        (thesis 5.4.3: the Table 6.10 Bi-Encoders train "for an additional 12.5K steps, with a batch size of
        64"). Warm-up is `warmup_ratio` of these steps; dev Spearman is taken after each full pass and at the last
        step, the best kept, as with epochs. null = `epochs` decides. Set, it enters the artifact key and `epochs`
        leaves it (the lower bound trains the same steps).""")
    group_by_length = restate(True, group_by_length_words("false = uniformly random batches."))
    megabatch = restate(400, megabatch_words("""
        The Bi-Encoder pads its two sentences separately, so a batch must be alike in two lengths: it needs more
        batches per mega-batch than a pair model for the same padding (README "Training": 400 keeps padding under
        5 %, 200 does not)."""))
    loss: Literal["cosine", "cosent", "angle", "mnrl", "margin_mse", "kl_div"] = option("cosine", """
        The Bi-Encoder's objective (sentence-transformers losses): `cosine` (CosineSimilarityLoss, MSE of cos(u, v)
        and the score: the thesis and AugSBERT), `cosent` (CoSENTLoss), `angle` (AnglELoss), `mnrl`
        (MultipleNegativesRankingLoss on the pairs scored >= positive_threshold, in-batch negatives, optional hard
        negatives), `margin_mse` (MarginMSELoss on cosine: per sentence, its best-scored partner against each
        lower-scored one, target = the score difference; a GPL student: the teacher's margins over the mined
        negatives), `kl_div` (DistillKLDivLoss over a mined list: query against positive and negatives, softmax
        of the teacher's scores; a GPL student only). Also the lower bound's. README "Student objectives".""")
    similarity: Literal["cos", "dot"] = option("cos", """
        `margin_mse`, `kl_div`: the student's score, cosine or dot product (GPL: dot, its `gpl_score_function`).
        Enters the key of a `margin_mse` student only when `dot`.""")
    scale: float = option(20.0, """
        `cosent`, `angle`, `mnrl`: the scale (1 / temperature) of the library's losses (their default 20).""",
                          exclusiveMinimum=0)
    positive_threshold: float = option(0.8, """
        `mnrl`: pairs scored at least this (0-1 scale) are positives (as suite.positive_threshold: STS-B > 4
        of 5).""", minimum=0, maximum=1)
    hard_negatives: bool = option(False, """
        `mnrl`: add each anchor's lowest-scored partner below negative_threshold as a hard negative; positives
        whose anchor has none are dropped (the log counts them).""")
    negative_threshold: float = option(0.2, """
        `mnrl` with hard_negatives: partners scored below this are hard-negative candidates.""", minimum=0,
                                       maximum=1)
    torch_compile: bool = torch_compile_option()
    # students that deploy (augsbert.models.compact); each keyed only when set, the student's only
    init: Literal["full", "layers"] = option("full", """
        `layers`: the student starts from `layers` of the base model's Transformer layers (embeddings and pooling
        kept), as sentence-transformers' layer-reduction distillation examples, and trains on the same pairs as
        the full student. The student only: the lower bound stays the full model. Enters the key only when
        `layers` (docs/guide/compact.md).""")
    layers: int | list[int] = option(3, """
        `init: layers`: how many layers to keep, evenly spread (floor((i + 0.5) * n / k) for i < k of the base's
        n: 3 of MiniLM-L6's 6 are layers 1, 3, 5; 4 of 12 are 1, 4, 7, 10, as sentence-transformers' former
        examples/training/distillation/model_distillation.py kept; its current model_distillation_layer_reduction.py
        keeps every third layer from 0), or the base's layer indices to keep (0-based, ascending).""", minimum=1, items={"type": "integer", "minimum": 0},
                                     minItems=1)
    arch: Literal["transformer", "static"] = option("transformer", """
        `static`: a static-embedding student (sentence-transformers' StaticEmbedding: one vector per token,
        mean-pooled), initialised by model2vec's distillation of the base (offline on a local model; needs the
        `deploy` extra), then trained on the student's pairs at `static_lr`. Length grouping is off for it. The
        student only; keyed only when `static`.""")
    static_dims: int | None = option(256, """
        `arch: static`: PCA dimensions of the distilled token vectors (model2vec's default 256); null = the base's
        own dimensions.""", minimum=2)
    static_lr: float | None = option(0.005, """
        `arch: static`: the static student's learning rate, in place of `lr` (a table of token vectors learns at
        rates a Transformer would not survive). 0.005 at this section's batch of 16: the best STS-B dev Spearman
        of a sweep over 0.002-0.2 and batches 16 / 64 / 256, 3 seeds each, on the gold pairs (docs/guide/
        compact.md; sentence-transformers' static-embedding script uses 0.2 from random vectors and 0.05 from a
        model2vec start, both with batches of 2048 and an in-batch-negatives loss). It trains without weight
        decay. null = `lr`.""", exclusiveMinimum=0)
    static_lr_sweep: list[float] | None = option(None, """
        `arch: static`: further learning rates tried beside `static_lr` on the experiment's own dev split (the
        `selection`'s): each rate trains the student's schedule on its pairs (or `static_lr_sweep_steps`), and
        the rate whose model scores best on dev is the student's (its candidates, their dev Spearman and the
        chosen rate in its metrics.json and card). `static_lr` was chosen on STS-B dev; on another corpus the
        best rate can lie elsewhere (issue 65: 13.2 points below the full student there, 7.7 on STS-B). A
        static table trains in seconds to minutes, so a few rates cost little: e.g. [0.002, 0.01, 0.02] with
        the default 0.005, the range STS-B's sweep found within 2.5 test points (docs/guide/compact.md). null
        = `static_lr` alone. Needs a dev split (`selection` other than `last`); keyed only when set.""",
                                               items={"type": "number", "exclusiveMinimum": 0}, minItems=1)
    static_lr_sweep_steps: int | None = option(None, """
        `static_lr_sweep`: each rate's run is this many optimizer steps (its own warm-up and decay over them),
        and the best rate on dev then trains the student's schedule once more; null = each rate trains the
        student's whole schedule and the best run is kept as it is (no run repeated: the exact choice, at the
        cost of one run per rate). Keyed only when set.""", minimum=1)
    static_pretrain: Literal["none", "full"] = option("none", """
        `arch: static`. `full`: pre-train the distilled token table before it learns the pairs, on the embeddings
        that the full Transformer student (this section without `arch: static`: the compact grid's `full` row, planned and
        shared) gives the target's pool (train sentences and `unlabeled` texts; never dev / test): tokenlearn's
        "featurize then train", written here (the embeddings reduced by PCA to `static_dims`, mean squared error
        through a linear head that is dropped afterwards; docs/guide/compact.md). `none`: the distilled table
        learns the pairs directly. Keyed only when `full`.""")
    matryoshka_dims: list[int] | None = option(None, """
        Train the student with sentence-transformers' MatryoshkaLoss around `loss` at these embedding sizes (e.g.
        [384, 128, 64]: each prefix of the vector learns the loss, equal weights), so its vectors can be cut; its
        test split is scored at each size (`test_by_dim` in its metrics.json; `spearman@<d>` in the results). The
        student only; keyed only when set.""", items={"type": "integer", "minimum": 1}, minItems=1)


# the `student` options that plan nodes (where the student starts) or are planned into another (`static_lr`: the
# static student's `lr`), never in a student spec
PLANNED = ("base_model", "base", "static_lr")


@dataclass(frozen=True, kw_only=True)
class StudentParams(slice_of(StudentOptions, but=PLANNED), Prompted, Trained):
    """A student (or lower-bound) spec: the `student` section but its `PLANNED` options as the planner passes it
    (a step budget leaves `epochs` out, the options a loss or an architecture does not read are left out: they read
    as their defaults, unread), and what it adds (`model`, `seed`, the topic delimiter). `selection` and
    `freeze_embeddings` are resolved (the options' null: by transfer, from an adapted checkpoint)."""

    selection: Literal["source_dev", "target_dev", "last"] = field()  # resolved: required (the option's null)
    freeze_embeddings: bool = field()  # resolved by the planner (null in the config: from an adapted checkpoint)


EMBEDDER = "embedder"  # the input whose embeddings pre-train a static student's table (`static_pretrain`)
COMPACT_OPTIONS = ("arch", "static_pretrain", "init", "layers", "matryoshka_dims")  # what compact_kind reads


def compact_kind(options: dict) -> str | None:
    """What makes a student compact, in a few words, from its `student` section or its spec (None: the full
    Transformer student): "static", "static, pre-trained", "3 layers", "layers 0, 2, 4", "Matryoshka 384/128/64"."""
    if options.get("arch") == "static":
        pretrain = options.get("static_pretrain", default_of(StudentOptions, "static_pretrain"))  # a spec: when set
        return "static, pre-trained" if pretrain != default_of(StudentOptions, "static_pretrain") else "static"
    parts = []
    if options.get("init") == "layers":
        layers = options.get("layers")
        parts.append(f"layers {', '.join(map(str, layers))}" if isinstance(layers, list) else f"{layers} layers")
    if options.get("matryoshka_dims"):
        parts.append("Matryoshka " + "/".join(map(str, sorted(options["matryoshka_dims"], reverse=True))))
    return ", ".join(parts) or None


STUDENT = Stage("student", 3, "train a Bi-Encoder on gold and/or teacher-labelled pairs (also the lower bound)",
                "augsbert.jobs.student:run", section="student", runtime=MODEL_SETTINGS,
                roles=("student", "lower_bound"), data_parallel=True, seconds_per_item=0.01, mb_per_item=0.002,
                trains=True, aliases=("train-student",), rule_alias="train_student",
                gpu_sequences=2,  # both sides of a pair
                params=StudentParams, plan=lambda seed_plan: plan_student(seed_plan), kind_options=("matryoshka_dims",),
                needs=("data", "source_data", "gold_subset", "labels", "adapt", "pretrained"), items=trained_items,
                rows={"lower_bound": Row(30, "SBERT (lower bound)", "Bi-Encoder trained on gold only (SBERT, lower "
                                                                         "bound)", curves=True,
                                         export="lower bound (Bi-Encoder on gold only)"),
                      "student": Row(50, "", "Bi-Encoder student trained on the teacher's labels (AugSBERT)",
                                     curves=True, export="AugSBERT student (Bi-Encoder on the teacher's labels)",
                                     kind=lambda section: compact_kind(section), kind_options=COMPACT_OPTIONS)},
                console_label=lambda spec: None if "labels" in (spec.get("inputs") or {}) else "lower_bound",
                estimate="train")
STAGES = (STUDENT,)


def student_loss_options(options: dict) -> dict:
    """A student section without the options its `loss` does not read (the default `cosine` reads none,
    so students planned before `student.loss` existed keep their keys)."""
    options = dict(options)
    loss = options.pop("loss")
    used = {"cosent": ("scale",), "angle": ("scale",), "mnrl": ("scale", "positive_threshold", "hard_negatives"),
            "margin_mse": (), "kl_div": ("similarity",)}.get(loss, ())
    if loss == "margin_mse" and options["similarity"] != "cos":  # cosine: keys as before the option
        used += ("similarity",)
    if loss == "mnrl" and options.get("hard_negatives"):
        used += ("negative_threshold",)
    for key in ("scale", "positive_threshold", "hard_negatives", "negative_threshold", "similarity"):
        if key not in used:
            options.pop(key, None)
    if loss != "cosine":
        options["loss"] = loss
    if loss in ("mnrl", "margin_mse", "kl_div"):
        # mnrl: in-batch negatives, length-sorted batches would change them; margin_mse: triples, which the
        # two-sided length grouping does not sort (random batches, said here so the key says it too)
        options["group_by_length"] = False
        options.pop("megabatch", None)
    return options


def compact_options(options: dict, gold_only: bool, name: str = "student") -> dict:
    """A student section with the options of the compact students (issue 51) only where they are set, so
    students planned before they existed keep their keys; the lower bound (gold only) is always the full
    Transformer (it is also the encoder of `semantic_model: finetuned` sampling, upstream of the student)."""
    options = dict(options)
    init, arch, dims = options.pop("init"), options.pop("arch"), options.pop("matryoshka_dims")
    layers, static_dims = options.pop("layers"), options.pop("static_dims")
    static_lr, static_pretrain = options.pop("static_lr"), options.pop("static_pretrain")
    sweep, sweep_steps = options.pop("static_lr_sweep"), options.pop("static_lr_sweep_steps")
    if gold_only:
        return options
    where = f"experiments.{name}.student"
    if (sweep or sweep_steps) and arch != "static":
        raise ConfigError(f"{where}.static_lr_sweep: sweeps a static student's learning rate, but arch is `{arch}`")
    if sweep_steps and not sweep:
        raise ConfigError(f"{where}.static_lr_sweep_steps: the steps of a static_lr_sweep's runs, but "
                          "static_lr_sweep is not set")
    if sweep and options.get("selection") == "last":
        raise ConfigError(f"{where}.static_lr_sweep: chooses the rate on a dev split, but selection is `last` "
                          "(no dev split is read)")
    if init == "layers":
        if arch == "static":
            raise ConfigError(f"{where}.init: `layers` keeps Transformer layers, but arch is `static` (no layers)")
        options.update(init=init, layers=layers)
    if static_pretrain != "none" and arch != "static":
        raise ConfigError(f"{where}.static_pretrain: pre-trains a static student's token table, but arch is `{arch}`")
    if arch == "static":
        if static_pretrain != "none":
            options["static_pretrain"] = static_pretrain
        if options.get("freeze_embeddings"):
            raise ConfigError(f"{where}.freeze_embeddings: a static student is its embeddings; it cannot freeze them")
        if options.get("torch_compile"):
            raise ConfigError(f"{where}.torch_compile: a static student has no Transformer to compile")
        # one vector per token: no sequence to group by length, no embeddings to freeze apart
        options.update(arch=arch, static_dims=static_dims, group_by_length=False, freeze_embeddings=False,
                       weight_decay=0.0)  # no weight decay on a token table: ST's static recipe
        if static_lr is not None:  # its own rate: the lower bound of the same section keeps `lr`
            options["lr"] = static_lr
        if sweep:  # the further rates tried beside `lr` on dev (keyed only when set)
            options["static_lr_sweep"] = sorted(set(sweep))
            if sweep_steps:
                options["static_lr_sweep_steps"] = sweep_steps
        options.pop("megabatch", None)
    if dims:
        if len(set(dims)) != len(dims):
            raise ConfigError(f"{where}.matryoshka_dims: {dims} lists a dimension twice")
        options["matryoshka_dims"] = sorted(dims, reverse=True)
    return options


def student_selection(name: str, exp: dict) -> str:
    """How Bi-Encoders pick their epoch: `target_dev`, `source_dev` (transfer default) or `last`."""
    transfer = bool(exp["source"]) and exp["source"] != exp["dataset"]
    selection = exp["student"]["selection"] or ("source_dev" if transfer else "target_dev")
    if selection == "source_dev" and not transfer:
        selection = "target_dev"  # in-domain the teacher's data is the target: one and the same split
    if selection == "last" and exp["student"]["seed_optimization"]["trials"] > 0:
        raise ConfigError(f"experiments.{name}.student.seed_optimization.trials: seed optimisation compares "
                          "seeds on a dev split, but student.selection is `last`; set trials to 0 or choose "
                          "a dev split")
    return selection


def dev_input(selection: str, target: Node, transfer: bool) -> dict[str, Node]:
    """A transfer model selected by `target_dev` reads the target's dev split (else that of `data`)."""
    return {"dev": target} if selection == "target_dev" and transfer else {}


def student(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], selection: str,
            gold_only: bool = False, prompt: str | None = None, name: str = "student") -> Node:
    if exp["student"]["loss"] == "kl_div":
        raise ConfigError("student.loss kl_div learns a teacher's scores over a mined list of passages: it is the "
                          "loss of a GPL student (`models: [gpl]`), not of a student of scored pairs")
    options = compact_options(exp["student"], gold_only, name)
    options = student_loss_options(inert_grouping_dropped(options))
    if options.get("max_steps") is None:  # unset: `epochs` decides, and keys planned before the option stay
        options.pop("max_steps", None)
    else:  # a step budget (thesis 5.4.3): the number of epochs does not enter
        options.pop("epochs")
    model = options.pop("base_model") or exp["base_model"]
    options.pop("base")  # the start point is the `init` input (pretrained / adapted) or `model`
    if options["freeze_embeddings"] is None:
        options["freeze_embeddings"] = from_adapted(inputs)
    if gold_only:
        options["use_gold_labels"] = True
    options["selection"] = selection
    params = {**options, "model": model, "seed": seed}
    if prompt and options.get("arch") == "static":
        raise ConfigError(f"experiments.{name}.student.arch: a static student takes no topic prompts")
    if prompt:  # `prompted`: the student sees the prompts too (`hidden`: plain texts, same scores)
        params["topic_prompt"] = prompt
    return graph.add(STUDENT, f"{dataset}.be", params, inputs)


def lower_bound_node(seed_plan: SeedPlan) -> Node:
    """The lower bound: the student's Bi-Encoder on the gold alone (also the encoder of `semantic_model:
    finetuned` sampling, so it is planned whether or not it is a row)."""
    exp = seed_plan.config
    selection = student_selection(seed_plan.experiment, exp)
    inputs = {**trained_on(seed_plan), **dev_input(selection, seed_plan.roles["data"], transfer(exp))}
    return student(seed_plan.graph, exp, source(exp), seed_plan.seed, inputs, selection, gold_only=True,
                   name=seed_plan.experiment)


def plan_student(seed_plan: SeedPlan) -> dict[str, Node]:
    """The lower bound (planned always, a row with `models: [lower_bound]`) and the student of the teacher's
    labels (`labels`). The student's gold (use_gold_labels) and default dev split are the teacher's: the
    source's in transfer. It starts from the MLM-adapted checkpoint with `adapt.variant: full_domain`,
    from the pretrain stage's encoder with `student.base: pretrained`."""
    exp, roles = seed_plan.config, seed_plan.roles
    lower_bound = lower_bound_node(seed_plan)
    planned = {"lower_bound": lower_bound} if wants(seed_plan, "lower_bound") else {}
    if not wants(seed_plan, "student"):
        return planned
    selection = student_selection(seed_plan.experiment, exp)
    inputs = {**trained_on(seed_plan), "labels": roles["labels"],
              **dev_input(selection, roles["data"], transfer(exp))}
    if exp["adapt"]["variant"] == "full_domain":
        inputs["init"] = roles["adapt"]
    elif exp["student"]["base"] == "pretrained":
        inputs["init"] = roles.get("pretrained")
    prompt = topic_prompt(exp) if exp["topic_prompt"] == "prompted" else None
    if exp["student"]["arch"] == "static" and exp["student"]["static_pretrain"] != "none":
        # the embedder of the static table's pre-training: the full Transformer student of the same section and
        # pairs (the same key as the `full` row of a grid: trained once)
        full = {**exp, "student": {**exp["student"], "arch": "transformer", "static_pretrain": "none",
                                   "static_lr_sweep": None, "static_lr_sweep_steps": None}}
        inputs[EMBEDDER] = student(seed_plan.graph, full, exp["dataset"], seed_plan.seed, dict(inputs), selection,
                                   prompt=prompt, name=seed_plan.experiment)
    planned["student"] = student(seed_plan.graph, exp, exp["dataset"], seed_plan.seed, inputs, selection,
                                 prompt=prompt, name=seed_plan.experiment)
    return planned
