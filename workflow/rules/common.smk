# Shared set-up: validate the config and build the plan every rule looks up.

import os
import sys

from augsbert.config import ConfigError, name_pattern, prepare_config, short_hash
from augsbert.export import MODEL_WILDCARD
from augsbert.distributed import GPUS_ENV
from augsbert.models.device import DEVICE_ENV
from augsbert.plan import KEY_PATTERN, Plan
from augsbert.stages.common import PRECISION_ENV
from augsbert.tracking import TRACKING_DIR_ENV, TRACKING_ENV

# Coerce --config strings, merge experiments over `defaults`, validate with defaults filled, plan.
# The package's own validator (not snakemake.utils.validate) so a misspelt key reads the same as in
# the `augsbert` CLI (key path + suggestion) instead of a dump of the schema; exiting with the message
# keeps Snakemake from adding a traceback to an error the user fixes in the config.
try:
    _effective = prepare_config(config, lazy=True)  # each experiment is validated when planned
    config.clear()
    config.update(_effective)
    PLAN = Plan(config)
except ConfigError as err:
    print(f"augsbert: error: {err}", file=sys.stderr)
    sys.exit(2)  # as the augsbert CLI

# Device and precision are runtime choices, not a parameter of any artifact: it is passed
# through the environment so switching GPU/CPU never reruns finished stages.
os.environ[DEVICE_ENV] = config["device"]
os.environ[PRECISION_ENV] = config["precision"]
os.environ[GPUS_ENV] = str(config["gpus"])  # likewise: teacher / student jobs train on `gpus` GPUs
os.environ[TRACKING_ENV] = config["tracking"]  # likewise the tracker (augsbert/tracking.py)
os.environ[TRACKING_DIR_ENV] = config["tracking_dir"]
# Jobs call the `augsbert` CLI of the environment that runs Snakemake (a write of PATH, not a setting the
# user must provide, hence no `envvars:`; under --sdm conda the rule's environment comes first).
os.environ.update(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


# Every wildcard of every rule is constrained here to names as the config allows them (tests/test_safety.py
# checks), so no requested path can smuggle `/`, `..` or shell syntax into a job.
wildcard_constraints:
    key=KEY_PATTERN,
    experiment=name_pattern(),
    grid=name_pattern(),
    model=MODEL_WILDCARD,  # models/<experiment>/<model>/ (export.smk): student, teacher or lower_bound


def node_spec(wildcards):
    # `@artifacts/.specs/<stage>/<key>.json`: the path depends on the key alone, so settings that
    # leave the key (batch sizes, checkpoint interval, data locations) never trigger a params rerun
    return PLAN.spec_file(wildcards.key)


def raw_files(wildcards):
    # Raw data enter the data stage's key by content; their timestamps must not rerun it
    # (re-copying or touching an identical file plans nothing).
    return [ancient(path) for path in PLAN.raw_inputs(wildcards.key)]


def node_inputs(wildcards):
    return PLAN.input_paths(wildcards.key)


# Job resources (runtime, mem_mb, cpus_per_task, gpu; on SLURM also partition and GPU model) sized
# from the plan: epochs, pairs, sentences (src/augsbert/resources.py has the formula). A None value
# leaves the resource out (no GPU model given; no partition given anywhere: SLURM's default one).
# Override any of them with --set-resources, or with `set-resources` in a profile.
from augsbert.resources import cluster_placement, job_resources, profile_value, report_resources

# A rule's slurm_partition replaces the default-resources one, so that one is passed on as the fallback.
DEFAULT_PARTITION = profile_value(
    getattr((workflow.resource_settings.default_resources or {}).get("slurm_partition"), "raw", None)
)


def sized(name):
    return lambda wildcards: job_resources(PLAN, wildcards.key, default_partition=DEFAULT_PARTITION)[name]


def gpu_placement(name):
    # slurm_partition / gpu_model of a rule with fixed sizes that always asks for a GPU
    return lambda wildcards: cluster_placement(True, default_partition=DEFAULT_PARTITION)[name]


# Seconds-long bookkeeping runs where Snakemake runs (login node or driver job), never in the queue.
localrules:
    collect_results,


# `gpu` limits (profiles/default: `resources: gpu=1`, one GPU job at a time on a workstation) hold
# per submitted job: locally that is the whole run, on a cluster each (group) job gets its own GPU,
# so the queue is never held to one GPU job and a group of evaluations runs one after the other on it.
resource_scopes:
    gpu="local",
