# Shared set-up: validate the config and build the plan every rule looks up.

import os
import sys

from augsbert.config import ConfigError, name_pattern, prepare_config, short_hash
from augsbert.models.device import DEVICE_ENV
from augsbert.plan import KEY_PATTERN, Plan
from augsbert.stages.common import PRECISION_ENV

# Coerce --config strings, merge experiments over `defaults`, validate with defaults filled, plan.
# The package's own validator (not snakemake.utils.validate) so a misspelt key reads the same as in
# the `augsbert` CLI (key path + suggestion) instead of a dump of the schema; exiting with the message
# keeps Snakemake from adding a traceback to an error the user fixes in the config.
try:
    _effective = prepare_config(config)
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
# Jobs call the `augsbert` CLI of the environment that runs Snakemake.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


# Every wildcard of every rule (tests/test_safety.py checks): names as the config allows them,
# so no requested path can smuggle `/`, `..` or shell syntax into a job.
wildcard_constraints:
    key=KEY_PATTERN,
    experiment=name_pattern(),
    grid=name_pattern(),


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
