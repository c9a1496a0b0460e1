"""What a stage is: one declaration per stage, the single source of its name, version and job facts.

Each stage's declaration lives in `augsbert.stages.<name>` with its params class and planning hook; the
package's modules make the registry (`augsbert.stages.REGISTRY`), which the plan, the rules, the command
line and the job sizing read.

A stage's `name` is its plan key and its artifact and log folders (`artifacts/<name>/<key>/`,
`logs/<name>/`); its command is the name hyphenated (`augsbert zero-shot`). What the plan, the
command line and the job sizing need to know of a stage is read from here, so they cannot drift:

- `version`: part of every artifact key of the stage. Bump it when the stage's code changes what
  it computes: its keys (and every key downstream) change, so old artifacts are not reused.
- `runtime`: settings that cannot change what the stage computes (batch sizes of inference,
  checkpoint intervals, data locations, model references, which enter keys by identity): passed to
  the job, never part of its key, so changing them reruns nothing.
- its cost terms, the one place that says what a job of the stage costs (the formulas read them and name no
  stage): `gpu`, `data_parallel`, `seconds_per_item`, `base_mem_mb`, `mb_per_item`, `fixed_resources`, `items`,
  `uses_gpu`: what its job asks a scheduler for (augsbert.scheduling.resources); `trains`, `gpu_sequences`,
  `model_input`: its GPU memory (augsbert.models.gpu_memory's formula); `estimate` and `counts`: how `augsbert
  plan --estimate` times it (augsbert.scheduling.estimate prices the kind; the counts hook, in the stage's module,
  walks the plan to what the kind prices: GPL's queries, mined lists, margins, tuples).
- `roles`: the experiment roles it fills, in the order `--config` standalone runs pick one.
- `plan`, `needs`: how it joins an experiment. Planning an experiment (`augsbert.plan`) is a loop
  over the registry's stages in dependency order (`augsbert.stages.planning_order`), calling each `plan(SeedPlan) -> {role: Node}` once per
  seed; the hook sees the roles planned so far (`data`, `teacher`, `labels`, ...) and returns the nodes it
  adds by role (empty when the experiment does not use it). `needs` names the roles it reads: it runs after
  every stage whose `roles` hold one of them, and before every stage that needs one of its `roles`. A stage
  that needs a role it also fills refines it (runs after the role's other stages, before its readers:
  a filter between `labels` and `student` returns `{"labels": <its node>}`). Ordering knows the roles a
  stage declares in `roles`; a hook may also return the numbered or chained roles of the stages it plans
  itself (ensemble members, shards, Trans-Encoder rounds, GPL's queries, negatives and margins), which no stage
  can `need` (a numbered family's first role, which its stage declares, can: `pretrain` needs `rcl_entropy_0`,
  the first of RCL's entropy models). A role is refined for the readers that take it from the roles: the
  labelling stage plans the teacher itself when the teacher is not a row, and sampling its lower bound.
- `check(graph, experiment, config)`: what is checked once per experiment before any seed is planned.
- `items(plan, node)`: what its job iterates over before epochs (pairs, sentences), for its runtime and
  memory (augsbert.scheduling.resources); None: the train pairs of its `data` input. `uses_gpu(node)`:
  whether this node needs a GPU where `gpu` alone does not say (candidates: only strategies that encode).
- `raw_inputs(node)`: the raw files a node reads, named by the config (the `data` stage's corpora, the
  `suite` stage's local task files): they enter its key by content, and Snakemake not at all (a moved or
  touched file reruns nothing); the data stage's raises MissingDataError with instructions for a missing one.
- `runner`: "module:function" of the entry point, imported only when the stage runs, so that
  `augsbert --help` and planning import no model library.
- `params`: the class of its spec's `params` (an `augsbert.params.Params` dataclass): the command
  checks a spec against it before running, and the runner reads its parameters through it.
- `rows`: the table rows it fills, `{role: Row(place, title, description)}`: rows stand in grid tables and
  results files by place (thesis order: zero-shot 10, pre-trained 20, classifier 25, lower bound 30, teacher
  40, student 50, GPL 60); `{arch}` in a title is the teacher's architecture, the student's title is the
  grid's `student_title` (augsbert.reporting.layout); the description says what the model is in a results
  file (augsbert.reporting.results). `row_arch(plan, node)`: the architecture a row title's `{arch}` says of its model
  (a teacher's, an ensemble's); `figures`: plots of its artifact the reports copy (labels: the score densities);
  `statistics`: files of its artifact a results file keeps per seed, under a section (labels: its sampling
  statistics, `silver`); `evaluates(role)`: the row whose model a node in `role` scores (the suite: its
  metrics' summary and skipped tasks join that model's entry in the results file).
- `awaits(node)`: what a person is to give before the node's job can go on (`active_label` of `annotator: file`:
  "round 1", its file not filled yet), None once given: its job stops the run for them, which the run says is no
  failure (augsbert.scheduling.stops), and the estimate adds the whole experiment (augsbert.scheduling.estimate).
- `checkpoint`, `console_label(spec)`, `hub_datasets(node)`: what a model card says of a model that started from
  its artifact, the name its job shows on the console (a `student` job without labels is the lower bound), the
  hub datasets its job downloads (fetched ahead by `augsbert fetch`); `card`: what its model's card says where the
  pair models' sections do not fit (the multilingual student: its parallel data, languages and loss).

Importing this module imports nothing else of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable, NamedTuple



class Row(NamedTuple):
    """A model a stage puts in the results tables: where it stands, its row title, what it is, and how the
    reports show it."""

    place: int
    title: str  # "{arch}": the architecture (Stage.row_arch of the row's model); "": the grid's student_title
    description: str
    seeded: bool = True  # False: the model does not depend on the seed (its cell shows no ± and no (n=k))
    bi_encoder: bool = True  # False: a cross model, which the evaluation suites do not score
    curves: bool = False  # trained with a dev split: its per-epoch history is in the experiment's training curves
    export: str = ""  # what `augsbert export --model <role>` calls the model on its card; "": not exportable
    # what kind of model the row is, in a few words, from its stage's section (a static student: "static"); its
    # label says it unless a varying axis of the grid sets one of `kind_options` (the axis' labels then say it)
    kind: Callable[[dict], str | None] | None = None
    kind_options: tuple[str, ...] = ()


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
    gpu_sequences: int = 1  # sequences per batch row on the GPU (a Bi-Encoder pair: 2), for gpu_mem_mb
    # its job trains a model: weights, gradients and optimizer state on the GPU (gpu_mem_mb); else forward passes only
    trains: bool = False
    model_input: str = ""  # the input whose model it runs when its settings name none (labels: `teacher`)
    # what `augsbert plan --estimate` counts of its job (augsbert.scheduling.estimate): `train` (steps of
    # batches), `score` (its items, as pairs scored), `test` (the test pairs scored), `test+suites` (and the
    # evaluation suites), `read` (the data's files), GPL's chain by what each computes: `generate` (queries),
    # `mine` (negatives: encoding and search), `cross_scores` (margins: Cross-Encoder pairs), `distill` (gpl: the student's tuples);
    # empty: its items at `seconds_per_item`
    estimate: str = ""
    # (plan, node) -> what its `estimate` kind prices, counted (GPL's kinds: the stage module's `*_counts` says which
    # keys): the plan walked in the stage's own module, so the estimate names no stage
    counts: Callable[[Any, Any], dict] | None = None
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
    plan: Callable[[Any], dict[str, Any]] | None = None  # augsbert.planning.graph.SeedPlan -> {role: Node}
    needs: tuple[str, ...] = ()  # roles its plan hook reads: it is planned after the stages filling them
    check: Callable[[Any, str, dict], None] | None = None  # (graph, experiment name, config), once per experiment
    items: Callable[[Any, Any], int] | None = None  # (plan, node) -> items its job iterates over
    uses_gpu: Callable[[Any], bool] | None = None  # (node) -> needs a GPU (else `gpu` says)
    raw_inputs: Callable[[Any], list[str]] | None = None  # (node) -> raw files it reads, by content in its key
    awaits: Callable[[Any], str | None] | None = None  # (node) -> what a person is to give first, None once given
    rows: dict[str, Row] = field(default_factory=dict)  # the table rows it fills, by role
    row_arch: Callable[[Any, Any], str] | None = None  # (plan, node) -> what a row's {arch} says of its model
    # plots its artifact holds that the reports copy, file -> name in an experiment's report (`<name>.seed<s>.png`)
    figures: dict[str, str] = field(default_factory=dict)
    # files of its artifact the results file keeps per seed, file -> section of the results file (labels:
    # `sampling_stats.json` -> `silver`); read through the run's role, below any stage that refines it
    statistics: dict[str, str] = field(default_factory=dict)
    evaluates: Callable[[str], str] | None = None  # (its role) -> the row whose model it scores (`<row>_suite`)
    checkpoint: str = ""  # what a model started from its artifact is called on a model card ("MLM-adapted")
    console_label: Callable[[dict], str | None] | None = None  # (spec) -> its job's name on the console, if not its own
    hub_datasets: Callable[[Any], list[str]] | None = None  # (node) -> hub datasets its job downloads (`augsbert fetch`)
    # files each of its artifacts holds beyond spec.json and metrics.json (store.manifests.HOLDS): `augsbert verify`
    # names a manifest that does not list one
    holds: tuple[str, ...] = ()
    # "module:function" (imported when a card is written) giving the model card of its row's model what the pair
    # models' sections do not say, (spec, artifact, test figures) -> (metadata, training section lines, citations as
    # (title, bibtex)); "": the pair models' card (augsbert.export.model_card)
    card: str = ""
    # the options of its params, beyond their declared choices (Literal and bool fields, which all count), whose
    # value chooses its job's code path (`data`: the loader): `augsbert rehearse --every-kind` runs one job of each
    kind_options: tuple[str, ...] = ()
    # its spec's `params` as a typed class (augsbert.params.Params): checked by the command before it runs
    params: type | None = None

    @property
    def command(self) -> str:
        return self.name.replace("_", "-")

    def load_runner(self) -> Callable:
        module, function = self.runner.split(":")
        return getattr(import_module(module), function)

    def load_card(self) -> Callable:
        module, function = self.card.split(":")
        return getattr(import_module(module), function)


MODEL_SETTINGS = ("eval_batch_size", "checkpoint_steps", "model")  # the trained stages' runtime settings
