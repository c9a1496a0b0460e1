# Shared set-up: validate the config and build the plan every rule looks up.

import os
import sys

from augsbert.store.keys import short_hash
from augsbert.config.load import ConfigError, merged_files, prepare_config
from augsbert.config.names import name_pattern
from augsbert.config.yaml_files import check_config_file, check_duplicate_keys
from augsbert.export.backends import BACKEND_WILDCARD
from augsbert.export.facts import MODEL_WILDCARD
from augsbert.training.distributed import GPUS_ENV
from augsbert.errors import MissingDataError
from augsbert.models.device import CUDA_GRAPHS_ENV, DEVICE_ENV, PRECISION_ENV
from augsbert.planning.graph import KEY_PATTERN
from augsbert.plan import Plan
from augsbert.reporting.curves import curve_spec, curve_spec_file, has_curve
from augsbert.reporting.frontier import export_targets, frontier_spec, frontier_spec_file
from augsbert.reporting.layout import grid_spec, grid_spec_file
from augsbert.scheduling.progress import PROGRESS_FD_ENV
from augsbert.training.tracking import TRACKING_DIR_ENV, TRACKING_ENV

# artifacts/ and results/ must be writable before anything is planned: a dry run writes the jobs' spec files
try:
    from augsbert.store.artifacts import OutputWriteError, check_writable

    for _folder in ("artifacts", "results"):
        check_writable(_folder, below=True)  # and each stage's folder: Snakemake removes an output there to rerun
except OutputWriteError as err:
    print(f"augsbert: error: {err}", file=sys.stderr)
    sys.exit(2)

# Coerce --config strings, merge experiments over `defaults`, validate with defaults filled, plan.
# The package's own validator (not snakemake.utils.validate) so a misspelt key reads the same as in
# the `augsbert` CLI (key path + suggestion) instead of a dump of the schema; exiting with the message
# keeps Snakemake from adding a traceback to an error the user fixes in the config.
try:
    # the grid files beside each config file read (config/grids/*.yaml), under the configs' own `grids:`
    # as read, relative to the project (a rehearsal runs in its own root below it)
    # (relative to the current folder again, so that a message names config/config.yaml as the user knows it)
    # in Snakemake's order: the Snakefile's configfile (unless --replace-workflow-config), then each --configfile
    _cli_files = [str(f) for f in workflow.config_settings.configfiles]  # absolute
    _config_files = (
        []
        if workflow.config_settings.replace_workflow_config
        else [f for f in (os.path.join(PROJECT_DIR, f) for f in workflow.configfiles) if f not in _cli_files]
    )
    _config_files = [os.path.relpath(f) for f in dict.fromkeys(_config_files + _cli_files)]
    for _file in _config_files:  # Snakemake read them keeping the last of duplicate keys
        check_duplicate_keys(_file)
        # a target written after --configfile is read as one more config file: say so, not "unknown key ..."
        check_config_file(_file, option="--configfile")
    # a rehearsal reads the project's data folder, cut into its own root (augsbert.run.rehearse.prepare)
    _data_source = os.path.join(PROJECT_DIR, os.path.expanduser(str(config.get("data_dir", "data/raw"))))
    # Snakemake merged the files before this code runs: built again as the CLI builds it, each file's old section
    # names renamed where it wrote them (a user's `defaults.silver` over the shipped `defaults.labels`), then --config
    _raw = merged_files(_config_files, dict(workflow.config_settings.config))
    _effective = prepare_config(_raw, lazy=True)  # experiments validated when planned
    config.clear()
    config.update(_effective)
    if _rehearsal.is_on(config):
        from augsbert.run.rehearse import prepare as _prepare_rehearsal

        for _name, _done in _prepare_rehearsal(config, _data_source).items():
            print(f"augsbert: rehearsal: {_name}: {_done}", file=sys.stderr)
    PLAN = Plan(config)
except ConfigError as err:
    print(f"augsbert: error: {err}", file=sys.stderr)
    sys.exit(2)  # as the augsbert CLI

# A job whose command failed: Snakemake's RuleException report (the exception, the rule file's line, the command
# again) left out; its `Error in rule` block names the log and shows it
# (augsbert.scheduling.snakemake_console.QuietRuleExceptions)
import logging as _logging

from augsbert.scheduling.snakemake_console import QuietRuleExceptions as _QuietRuleExceptions

_logging.getLogger("snakemake.logging").addFilter(_QuietRuleExceptions())
# A labelling job's stop for a person (active.annotator: file) is no failure: Snakemake's report of it is left out,
# and `onerror` (workflow/Snakefile) ends the run with one line saying so (augsbert/scheduling/stops.py)
from augsbert.scheduling.stops import StopReport as _StopReport

STOP_REPORT = _StopReport()
_logging.getLogger("snakemake.logging").addFilter(STOP_REPORT)

# The stage rules' message: a job named by its role rather than its stage (the lower bound, a `student` job) is
# printed as `Job N: lower_bound: artifacts/student/<key> ...`; every other job as Snakemake prints it
from augsbert.scheduling.progress import JobTitle as _JobTitle

JOB_TITLE = _JobTitle(PLAN.node)

# Device and precision are runtime choices, not a parameter of any artifact: it is passed
# through the environment so switching GPU/CPU never reruns finished stages.
os.environ[DEVICE_ENV] = config["device"]
os.environ[PRECISION_ENV] = config["precision"]
# likewise graph-captured training steps (augsbert/training/cuda_graphs.py); YAML reads a bare `off` as false
os.environ[CUDA_GRAPHS_ENV] = "off" if config["cuda_graphs"] in (False, "off") else "auto"
os.environ[GPUS_ENV] = str(config["gpus"])  # likewise: teacher / student jobs train on `gpus` GPUs
os.environ[TRACKING_ENV] = config["tracking"]  # likewise the tracker (augsbert/training/tracking.py)
os.environ[TRACKING_DIR_ENV] = config["tracking_dir"]
os.environ[PROGRESS_FD_ENV] = "3"  # the console, kept by every stage rule's `3>&2` (augsbert/scheduling/progress.py)
# Jobs call the `augsbert` CLI of the environment that runs Snakemake (a write of PATH, not a setting the
# user must provide, hence no `envvars:`; under --sdm conda the rule's environment comes first).
os.environ.update(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


# Every wildcard of every rule is constrained here to names as the config allows them (tests/test_safety.py
# checks), so no requested path can smuggle `/`, `..` or shell syntax into a job.
wildcard_constraints:
    key=KEY_PATTERN,
    experiment=name_pattern(),
    grid=name_pattern(),
    model=MODEL_WILDCARD,  # models/<experiment>/<model>/ (export.smk): student, teacher, lower_bound or multilingual


def planned(lookup, name):
    # Experiments are validated when first planned, inside an input function: a config error there ends
    # with the same two lines and exit code as at start-up, not Snakemake's InputFunctionException
    try:
        return lookup(name)
    except ConfigError as err:
        print(f"augsbert: error: {err}", file=sys.stderr)
        sys.exit(2)


def node_spec(wildcards):
    # `@artifacts/.specs/<stage>/<key>.json`: the path depends on the key alone, so settings that
    # leave the key (batch sizes, checkpoint interval, data locations) never trigger a params rerun
    return PLAN.spec_file(wildcards.key)


def raw_files(wildcards):
    # Raw files (a dataset's corpus, a suite's local task files: the stage's `raw_inputs`) enter its key by
    # content (the sha256 of each file), and nothing else of them enters Snakemake: not their path (a moved data folder, a recreated environment holding Lee's files, a
    # project reached by another path all have the same bytes and must rerun nothing, now or at the next
    # parameter change) nor their timestamps (a re-copied or touched identical file). The job re-checks
    # the digests before it reads them (augsbert.jobs.job_inputs.recheck).
    # A missing file ends with the data stage's instructions and exit code 2, as a config error does, not
    # wrapped in Snakemake's InputFunctionException (exit 1).
    try:
        PLAN.raw_inputs(wildcards.key)
    except MissingDataError as err:
        print(f"augsbert: error: {err}", file=sys.stderr)
        sys.exit(2)
    return []


def node_inputs(wildcards):
    return PLAN.input_paths(wildcards.key)


def stage_inputs(stage):
    if stage.raw_inputs is None:
        return node_inputs
    # raw files, by content in the key only (see raw_files): a replaced file gets a new key, a touched or moved
    # one nothing; the node's inputs are artifacts
    return lambda wildcards: {"raw": raw_files(wildcards), **node_inputs(wildcards)}


# Job resources (runtime, mem_mb, cpus_per_task, gpu; on SLURM also partition and GPU model) sized
# from the plan: epochs, pairs, sentences (src/augsbert/scheduling/resources.py has the formula). A None value
# leaves the resource out (no GPU model given; no partition given anywhere: SLURM's default one).
# Override any of them with --set-resources, or with `set-resources` in a profile.
from augsbert.scheduling.resources import job_gpu_mem, job_resources, profile_value, report_resources
from augsbert.scheduling.slurm import job_threads
from augsbert.stages import REGISTRY
from augsbert.scheduling import gpus as _gpus

# A job that outlived its run (`kill -9` of Snakemake) finished its artifact, and Snakemake's mark of it as incomplete
# stayed: with the profile's `rerun-incomplete` the run would delete that finished artifact and train it again. Before
# Snakemake reads the marks, each finished artifact's is removed and the console says so (augsbert/store/incomplete.py).
# Only Snakemake's default store of marks, files (`--persistence-backend db` keeps them in a database).
_backend = getattr(getattr(workflow, "workflow_settings", None), "persistence_backend", None)
if workflow.is_main_process and getattr(_backend, "name", "FILE") == "FILE":
    from augsbert.store.incomplete import keep_finished as _keep_finished

    for _kept in _keep_finished({_stage.name: _stage.holds for _stage in REGISTRY.values()}):
        print(
            f"augsbert: {_kept} was finished by a job that outlived the run that started it (its manifest checks): "
            "kept, not run again (Snakemake's incomplete marker of it removed)",
            file=sys.stderr,
        )

# Several model jobs per GPU in a local run (augsbert/scheduling/gpus.py): the visible GPUs' memory becomes the
# global resource `gpu_mem_mb`, every model job asks for its estimate, and each job takes a GPU with
# room in a ledger the run's jobs share. Without GPUs (or inside a SLURM job) one model job runs at a
# time (`gpu=1`). A --resources gpu=N or gpu_mem_mb=N of your own replaces both.
try:
    # Snakemake sets `nodes` (--jobs) for every executor that submits jobs, and only then
    _local = _gpus.local_gpu_resources(
        workflow.resource_settings.resources, submits=workflow.resource_settings.nodes is not None
    )
except _gpus.GpuInventoryError as err:
    print(f"augsbert: error: {err}", file=sys.stderr)
    sys.exit(2)
for _name, _value in _local.items():
    workflow.register_resource(_name, _value)
# Without GPUs the one-at-a-time limit is `model_jobs` (no job shows a `gpu` it does not get); the rules' `gpu`
# and `gpu_mem_mb` are then left out, as is the claim a packed run's job makes (gpu_claim)
MODEL_JOBS_ONLY = _gpus.MODEL_JOBS in {**_local, **(workflow.resource_settings.resources or {})}
LARGEST_GPU_MB = None
if "gpu_mem_mb" in _local:
    LARGEST_GPU_MB = _gpus.largest_gpu_mb()
    # the jobs read the same inventory and share one ledger (under Snakemake's own .snakemake/)
    os.environ[_gpus.GPUS_INVENTORY_ENV] = _gpus.inventory_text(_gpus.inventory())
    os.environ[_gpus.LEDGER_ENV] = os.path.abspath(os.path.join(".snakemake", "augsbert", "gpu-ledger.json"))
    print(
        f"augsbert: model jobs share the GPUs by memory: {os.environ[_gpus.GPUS_INVENTORY_ENV]} (MB), "
        f"gpu_mem_mb={_local['gpu_mem_mb']}",
        file=sys.stderr,
    )

# A rule's slurm_partition replaces the default-resources one, so that one is passed on as the fallback.
DEFAULT_PARTITION = profile_value(
    getattr((workflow.resource_settings.default_resources or {}).get("slurm_partition"), "raw", None)
)


# Stages' former rule names, e.g. train_student before 0.2. A --set-resources or --set-threads given
# for one still applies to the stage's rule, for one release, with a warning (README "Stages").
FORMER_RESOURCES, FORMER_THREADS = {}, {}
for _stage in REGISTRY.values():
    for _given, _found in (
        (workflow.resource_settings.overwrite_resources, FORMER_RESOURCES),
        (workflow.resource_settings.overwrite_threads, FORMER_THREADS),
    ):
        if _stage.rule_alias in (_given or {}):
            _found[_stage.name] = _given[_stage.rule_alias]
# Snakemake has parsed them already (Resource objects); a rule takes plain values
FORMER_RESOURCES = {
    stage: {name: getattr(value, "raw", value) for name, value in dict(given).items()}
    for stage, given in FORMER_RESOURCES.items()
}
FORMER_THREADS = {stage: getattr(value, "raw", value) for stage, value in FORMER_THREADS.items()}
for _name in sorted({*FORMER_RESOURCES, *FORMER_THREADS}):
    print(
        f"augsbert: warning: {REGISTRY[_name].rule_alias} is now named {_name}; the settings given for "
        f"{REGISTRY[_name].rule_alias} apply to it in this release only",
        file=sys.stderr,
    )


def sized(name, stage):
    """The resource `name` of a stage's job: a former rule name's override, else computed from the plan."""
    if name in FORMER_RESOURCES.get(stage, {}):
        return FORMER_RESOURCES[stage][name]
    if name == "model_jobs":  # a model job without GPUs: 1 (a None value leaves the resource out)
        return lambda wildcards: (job_resources(PLAN, wildcards.key)["gpu"] or None) if MODEL_JOBS_ONLY else None
    if name in ("gpu", "gpu_mem_mb") and MODEL_JOBS_ONLY:
        return lambda wildcards: None
    if name == "gpu_mem_mb":
        return lambda wildcards: job_gpu_mem(PLAN, wildcards.key, LARGEST_GPU_MB)
    if name == "runtime":  # a resubmitted job (profile `retries`) gets `attempt` times the time
        return lambda wildcards, attempt: job_resources(
            PLAN, wildcards.key, default_partition=DEFAULT_PARTITION, attempt=attempt
        )["runtime"]
    return lambda wildcards: job_resources(PLAN, wildcards.key, default_partition=DEFAULT_PARTITION)[name]


def gpu_claim(wildcards, resources):
    """`AUGSBERT_JOB_GPU_CLAIM=<gpus>:<MB>` before a job's command in a packed local run (the job claims its GPU
    with it, augsbert.scheduling.gpus.claim_for_job); nothing elsewhere (augsbert.scheduling.gpus.JobClaim)."""
    claim = _gpus.JobClaim(resources.gpu, resources.gpu_mem_mb) if "gpu_mem_mb" in _local else _gpus.JobClaim()
    # `--cache` hashes every param as JSON, which JobClaim is not (on purpose: see its docstring); there the
    # claim is a plain string, so a packed run's cached artifact is found again only by runs that pack alike
    return str(claim) if workflow.enable_cache else claim


def sized_threads(stage):
    """A stage job's threads: under profiles/slurm its CPUs (augsbert.scheduling.slurm.job_threads), else the stage's."""
    return lambda wildcards: job_threads(
        stage.threads, job_resources(PLAN, wildcards.key, default_partition=DEFAULT_PARTITION)
    )


# Seconds-long bookkeeping runs where Snakemake runs (login node or driver job), never in the queue.
localrules:
    collect_results,


# `gpu` and `gpu_mem_mb` limits (above) hold per submitted job: locally that is the whole run, on a
# cluster each (group) job gets its own GPU, so the queue is never held to one GPU job and a group of
# evaluations runs one after the other on it.
resource_scopes:
    gpu="local",
    gpu_mem_mb="local",
