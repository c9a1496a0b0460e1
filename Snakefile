# augsbert: Augmented SBERT as a Snakemake workflow.
# Targets: results/<experiment>.json (experiments are named in config/config.yaml) and
# results/tables/<grid>.md (a grid of experiments rendered as a thesis table).
# Every stage artifact lives in artifacts/<stage>/<name>-<hash>/, keyed by the
# hash of its effective parameters and its inputs' keys (src/augsbert/plan.py).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/adapt.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/sampling.smk"
include: "workflow/rules/results.smk"
include: "workflow/rules/tables.smk"


rule all:
    default_target: True
    input:
        "results/demo_zeroshot.json",
