"""A rehearsal's config: the same experiments, cut to the fewest steps that still take every code path.

`rehearse: true` (`augsbert rehearse TARGET`, or `snakemake --config rehearse=true TARGET`) runs the workflow
under its own root (ROOT, the Snakefile's `workdir:`), where models are stand-ins (augsbert.models.standins,
chosen when a job resolves a reference: the config's references stay as written) and datasets are cut copies
(augsbert.data.standins). What this module changes is the config's amounts, never a value that selects a code
path (an architecture, a loss, a strategy, an objective, a loader, a score scale, a suite):

- one seed (the first of the experiment's, or of the top level's);
- every `epochs` 1, every `max_steps` at most MAX_STEPS (pre-training's preset steps too), every
  `top_k` at most TOP_K, every `trials` (seed optimisation) at most MAX_TRIALS but not 0 when it was not, every
  `max_length` at most MAX_LENGTH, queries per passage at most TOP_K, generated queries in all at most MAX_QUERIES;
- a dataset's fixed split sizes scaled to the cut, Lee's 50 documents in three equal groups;
- a layer-reduced student's `layers` and a Matryoshka student's `matryoshka_dims` scaled to the stand-in
  encoder (STANDIN_LAYERS layers of STANDIN_DIMS dimensions), so the same code path runs on it;
- `data_dir` the root's cut copies (DATA_DIR, relative to the root).

Both functions are idempotent: an experiment validated twice is cut once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROOT = ".rehearsal"  # relative to the directory the workflow runs in; every output of a rehearsal lies below it
DATA_DIR = "data/raw"  # the cut datasets, relative to ROOT (as the shipped data_dir is relative to the project)
STANDINS_ENV = "AUGSBERT_STANDINS"  # the stand-in models' folder: set, every model reference resolves to one
# the project folder (where the workflow was started), set while a rehearsal runs in ROOT below it: a relative local
# model path (`base_model: models/mine`) is read from there, as the real run reads it (augsbert.store.model_refs)
PROJECT_ENV = "AUGSBERT_PROJECT_DIR"
MAX_STEPS = 2
TOP_K = 2
MAX_TRIALS = 2
MAX_LENGTH = 64  # tokens: Lee's documents are hundreds long
MAX_QUERIES = 600  # generated queries in all (GPL's 250K over a cut corpus would be 1,250 per passage)
CUT_ROWS = 120  # rows of a dataset's pairs file after the cut (augsbert.data.standins): a few dozen per split
DEV_SIZE = 10
LEE_FRACTIONS = [1, 1, 1]
# the stand-in encoders' size (augsbert.models.standins builds them so): a student cut to k layers or trained
# at Matryoshka sizes (augsbert.models.compact) gets those amounts scaled to it
STANDIN_LAYERS = 2
STANDIN_DIMS = 16
# amounts the rehearsal caps, by key at any depth of an experiment: key -> new value from the configured one
CAPS = {
    "epochs": lambda v: 1,
    "max_steps": lambda v: min(v, MAX_STEPS),
    "top_k": lambda v: min(v, TOP_K),
    "trials": lambda v: min(v, MAX_TRIALS),
    "max_length": lambda v: min(v, MAX_LENGTH),
    "queries_per_passage": lambda v: min(v, TOP_K),
    "total": lambda v: min(v, MAX_QUERIES),  # queries.total: GPL's automatic sizing (250K)
}


def is_on(config: Mapping) -> bool:
    """Whether `config` asks for a rehearsal (`rehearse: true`; Snakemake's --config gives a bool already)."""
    value = config.get("rehearse", False)
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"))


def _cap(section: Any) -> None:
    if isinstance(section, dict):
        for key, value in section.items():
            if key in CAPS and isinstance(value, int) and not isinstance(value, bool):
                section[key] = CAPS[key](value)
            else:
                _cap(value)
    elif isinstance(section, list):
        for item in section:
            _cap(item)


def _scaled(sizes: list[int], total: int) -> list[int]:
    """`sizes` scaled to add up to `total` (largest remainders), each at least 1 where it was."""
    whole = sum(sizes)
    out = [max(1 if s else 0, s * total // whole) for s in sizes]
    out[out.index(max(out))] += total - sum(out)
    return out


def overlay_top(config: dict) -> dict:
    """The top level of a rehearsal's config, in place: one seed, the cut data (a dataset's split sizes scaled
    to the cut's CUT_ROWS rows, a dev split carved from train at most DEV_SIZE)."""
    config["rehearse"] = True
    config["seeds"] = list(config.get("seeds") or [42])[:1]
    config["data_dir"] = DATA_DIR
    for options in (config.get("datasets") or {}).values():
        if isinstance(options.get("split_sizes"), list) and sum(options["split_sizes"]) > CUT_ROWS:
            options["split_sizes"] = _scaled(options["split_sizes"], CUT_ROWS)
        if isinstance(options.get("dev_size"), int):
            options["dev_size"] = min(options["dev_size"], DEV_SIZE)
        if options.get("loader") == "lee":  # 50 documents in 3 groups: 136 / 136 / 120 pairs, not 300 / 45 / 105
            options["split_fractions"] = LEE_FRACTIONS
    return config


def overlay_experiment(exp: dict) -> dict:
    """One experiment of a rehearsal (validated, defaults filled), in place. Sections are told apart by the options
    they hold, never by name (what a stage's section holds is its declaration's)."""
    if exp.get("seeds"):
        exp["seeds"] = list(exp["seeds"])[:1]
    for section in exp.values():
        if not isinstance(section, dict):
            continue
        # a section with a `preset` (pre-training): `max_steps: null` means the preset's step count, not "epochs
        # decide", so the rehearsal sets MAX_STEPS (elsewhere null selects epoch-based training and stays)
        if "preset" in section and "max_steps" in section and section["max_steps"] is None:
            section["max_steps"] = MAX_STEPS
        # a training loss's positive_threshold (the student's MNRL: a section with a `loss`, not evaluation's): a
        # stand-in teacher's scores lie in a narrow band (about 0.2-0.3), so MNRL's positives are every pair and
        # the loss still runs (the real threshold would leave none: "no pair scores >= positive_threshold")
        if "loss" in section and isinstance(section.get("positive_threshold"), (int, float)):
            section["positive_threshold"] = 0.0
        if "layers" in section or "matryoshka_dims" in section:  # a compact student
            _compact_amounts(section)
    _cap({k: v for k, v in exp.items() if k != "seeds"})
    return exp


def _compact_amounts(student: dict) -> None:
    """A compact student's amounts on the stand-in encoder: k of n layers -> at most STANDIN_LAYERS - 1 (a
    reduction still), listed layer indices folded into the stand-in's; Matryoshka sizes scaled so the largest is
    STANDIN_DIMS (distinct, descending as written)."""
    layers = student.get("layers")
    if isinstance(layers, int) and not isinstance(layers, bool):
        student["layers"] = max(1, min(layers, STANDIN_LAYERS - 1))
    elif isinstance(layers, list) and layers:
        student["layers"] = sorted({int(i) % STANDIN_LAYERS for i in layers})[:STANDIN_LAYERS - 1]
    dims = student.get("matryoshka_dims")
    if isinstance(dims, list) and dims and max(dims) > STANDIN_DIMS:
        top = max(dims)
        student["matryoshka_dims"] = sorted({max(1, round(d * STANDIN_DIMS / top)) for d in dims}, reverse=True)


# Model references: where a config names one, and which stand-in kind (augsbert.models.standins) takes its place.
# A key not listed here is an encoder's (base_model, cross_base_model, semantic_model, retrievers).
REFERENCE_KEYS = ("base_model", "cross_base_model", "semantic_model", "pretrained", "generator", "retrievers",
                  "cross_encoder")
ROLE_OF_KEY = {"pretrained": "cross", "cross_encoder": "cross", "generator": "t5"}
NOT_MODELS = {"finetuned", "pretrained", "pretrained_stage", "trained", "inverse_cloze", "bm25", "base_model"}
REFERENCES_FILE = "references.json"  # in the stand-ins' folder: model reference -> stand-in kind
