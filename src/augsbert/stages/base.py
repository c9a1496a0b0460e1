"""The stage registry: one declaration per stage, the single source of its name, version and job facts.

A stage's `name` is its plan key and its artifact and log folders (`artifacts/<name>/<key>/`,
`logs/<name>/`); its command is the name hyphenated (`augsbert zero-shot`). What the plan, the
command line and the job sizing need to know of a stage is read from here, so they cannot drift:

- `version`: part of every artifact key of the stage. Bump it when the stage's code changes what
  it computes: its keys (and every key downstream) change, so old artifacts are not reused.
- `runtime`: settings that cannot change what the stage computes (batch sizes of inference,
  checkpoint intervals, data locations, model references, which enter keys by identity): passed to
  the job, never part of its key, so changing them reruns nothing.
- `gpu`, `data_parallel`, `seconds_per_item`, `base_mem_mb`, `mb_per_item`, `fixed_resources`: what
  its job asks a scheduler for (augsbert.resources has the formula).
- `roles`: the experiment roles it fills, in the order `--config` standalone runs pick one.
- `runner`: "module:function" of the entry point, imported only when the stage runs, so that
  `augsbert --help` and planning import no model library.

Importing this module imports nothing else of the package: the plan, the CLI and the resources
read it without loading torch or pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Callable


@dataclass(frozen=True)
class Stage:
    name: str
    version: int
    summary: str
    runner: str
    section: str = ""  # the config section its options come from (`datasets` or a section of `defaults`)
    runtime: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    gpu: bool = True
    data_parallel: bool = False
    device: bool = True  # the command takes --device (every stage that runs a model)
    seconds_per_item: float = 0.02
    base_mem_mb: int = 16000
    mb_per_item: float = 0.0
    fixed_resources: dict = field(default_factory=dict)  # rules with fixed sizes (shards), not from the plan
    aliases: tuple[str, ...] = ()  # former command names, accepted for one release (README "Stages")
    rule_alias: str | None = None  # the former rule name: its --set-resources still apply, one release
    # the rule (workflow/rules/stages.smk): software environment (workflow/envs/<env>.yaml), threads,
    # job group (many short GPU jobs share a queue slot: profile `group-components`), and whether its
    # artifacts may be shared between checkouts (`snakemake --cache`, README "Shared artifact cache")
    env: str = "models"
    threads: int = 2
    group: str | None = None
    cache: bool = True

    @property
    def command(self) -> str:
        return self.name.replace("_", "-")

    def load_runner(self) -> Callable:
        module, function = self.runner.split(":")
        return getattr(import_module(module), function)


MODEL_SETTINGS = ("eval_batch_size", "checkpoint_steps", "model")  # the trained stages' runtime settings

STAGES = (
    Stage("data", 3, "read a dataset's raw files into canonical parquet splits", "augsbert.stages.prepare_data:run",
          section="datasets", runtime=("data_dir", "path", "train", "dev", "test", "unlabeled"), roles=("data",),
          gpu=False, device=False,
          seconds_per_item=0.001, base_mem_mb=4000, mb_per_item=0.002, aliases=("prepare-data",),
          rule_alias="prepare_data", env="cpu", threads=1, cache=False),
    Stage("zero_shot", 3, "evaluate the untrained base model (cosine of mean-pooled embeddings) on the test split",
          "augsbert.stages.zero_shot:run", section="evaluation", runtime=("batch_size", "model"), roles=("zero_shot",),
          seconds_per_item=0.002, base_mem_mb=8000, aliases=("evaluate-zero-shot",), rule_alias="evaluate_zero_shot",
          group="evaluation", cache=False),
    Stage("adapt", 2, "masked-LM domain adaptation of the base model on target pairs in the CBE layout",
          "augsbert.stages.adapt:run", section="adapt_mlm", runtime=("checkpoint_steps", "model"), roles=("adapt",),
          seconds_per_item=0.01, aliases=("adapt-mlm",), rule_alias="adapt_mlm"),
    Stage("pretrain", 1, "unsupervised pre-training of a sentence encoder (pretrain.objective: SimCSE, CT, TSDAE, "
          "Noise Matching, MLM / TSDAE multi-task) on a dataset's sentences", "augsbert.stages.pretrain:run",
          # the triples file enters by digest
          section="pretrain", runtime=("eval_batch_size", "model", "triples"), roles=("pretrained",),
          seconds_per_item=0.01),
    Stage("rcl_entropy", 1, "train one entropy model of Regularized Contrastive Learning (pretrain.objective rcl, one "
          "per rcl_phis value) and store its embeddings of every training query and document",
          "augsbert.stages.rcl_entropy:run", section="pretrain", runtime=("eval_batch_size", "model", "triples"),
          roles=("rcl_entropy_0",),  # --role rcl_entropy_<n> for the n-th φ
          seconds_per_item=0.01),
    Stage("teacher", 3, "train the teacher (Cross-Encoder or Cross-Bi-Encoder) on the gold train split",
          "augsbert.stages.train:run_teacher",
          section="teacher", runtime=MODEL_SETTINGS, roles=("teacher",), data_parallel=True,
          seconds_per_item=0.02, mb_per_item=0.002, aliases=("train-teacher",), rule_alias="train_teacher"),
    Stage("candidates", 2, "draw candidate silver pairs (random, BM25, semantic search, KDE pools) from the target "
          "sentences", "augsbert.stages.candidates:run",
          section="sampling", runtime=("batch_size", "model", "semantic_model"),
          roles=("candidates",), seconds_per_item=0.002, base_mem_mb=4000, mb_per_item=0.008,
          aliases=("sample-pairs",), rule_alias="sample_pairs"),  # GPU only when a strategy encodes: resources
    Stage("labels", 3, "score pairs with the teacher (silver labels)", "augsbert.stages.labels:run",
          section="silver", runtime=("batch_size",), roles=("labels",), seconds_per_item=0.004, base_mem_mb=8000,
          mb_per_item=0.002,
          aliases=("label-pairs",), rule_alias="label_pairs"),
    # sampling.shards > 1 (README "Large pools"): fixed sizes, one shard of a 10-million sentence pool
    Stage("pool_index", 1, "sampling.shards > 1: write the sentence pool and, for semantic search, its embeddings "
          "and faiss index once for every shard", "augsbert.stages.pool_index:run",
          section="sampling", runtime=("batch_size", "model", "semantic_model"), roles=("pool_index",),
          fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 1}, aliases=("index-pool",),
          rule_alias="index_pool"),
    Stage("candidate_shard", 1, "sampling.shards > 1: partners of one range of query sentences (merged by "
          "candidates)", "augsbert.stages.candidates:run_shard",
          section="sampling", runtime=("batch_size", "model", "semantic_model"),
          roles=("candidate_shard_0",),  # --role candidate_shard_<n> for the n-th shard
          gpu=False, fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 0}, aliases=("sample-pairs-shard",),
          rule_alias="sample_pairs_shard"),
    Stage("label_shard", 1, "sampling.shards > 1: teacher scores of one row range of the candidates, streamed from "
          "parquet (merged by labels)", "augsbert.stages.labels:run_shard", section="silver", runtime=("batch_size",),
          roles=("label_shard_0",), fixed_resources={"mem_mb": 8000, "runtime": 720, "gpu": 1},
          aliases=("label-pairs-shard",), rule_alias="label_pairs_shard"),
    Stage("student", 3, "train a Bi-Encoder on gold and/or teacher-labelled pairs (also the lower bound)",
          "augsbert.stages.train:run_student",
          section="student", runtime=MODEL_SETTINGS, roles=("student", "lower_bound"),
          data_parallel=True, seconds_per_item=0.01, mb_per_item=0.002, aliases=("train-student",),
          rule_alias="train_student"),
    Stage("classifier", 1, "train the topic-classifier baseline (encoder + linear head on the target's topics) and "
          "test its encoder as a Bi-Encoder", "augsbert.stages.classifier:run",
          section="classifier", runtime=MODEL_SETTINGS,
          roles=("classifier",), seconds_per_item=0.01, aliases=("train-classifier",), rule_alias="train_classifier"),
    Stage("suite", 2, "evaluate a Bi-Encoder on the STS suite, topic classification, USEB and alignment/uniformity "
          "(--role zero_shot_suite | pretrained_suite | lower_bound_suite | student_suite)",
          "augsbert.stages.suite:run",
          # the tasks run and their files enter the key by digest
          section="evaluation", runtime=("batch_size", "model", "sts", "useb", "mteb", "skipped"),
          roles=("student_suite", "lower_bound_suite", "pretrained_suite", "classifier_suite", "zero_shot_suite"),
          seconds_per_item=0.002, aliases=("evaluate-suite",), rule_alias="evaluate_suite", group="evaluation",
          cache=False),
)

REGISTRY: dict[str, Stage] = {stage.name: stage for stage in STAGES}


def stage(name: str) -> Stage:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown stage '{name}' (stages: {', '.join(REGISTRY)})") from None
