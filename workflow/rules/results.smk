# results/<experiment>.json: metrics of every model of an experiment, per seed and mean +- std, and
# results/<experiment>.report/: its metrics table, training curves and silver densities for `snakemake --report`.


rule collect_results:
    input:
        lambda wc: planned(PLAN.experiment_inputs, wc.experiment),
    output:
        results=report(
            "results/{experiment}.json",
            caption="../report/results.rst",
            category="Experiments",
            subcategory="{experiment}",
        ),
        report=report(
            directory("results/{experiment}.report"),
            patterns=["{name}.csv", "{name}.png"],
            caption="../report/experiment.rst",
            category="Experiments",
            subcategory="{experiment}",
        ),
    log:
        "logs/results/{experiment}.log",
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        spec=lambda wc: PLAN.experiment_spec_file(wc.experiment),
        # cheap job: rerun whenever what it reports changes (seeds, description, config)
        digest=lambda wc: short_hash(PLAN.experiment_spec(wc.experiment)),
    shell:
        "augsbert collect-results --spec {params.spec:q} --out {output.results:q} --report-dir {output.report:q} "
        ">> {log:q} 2>&1"
