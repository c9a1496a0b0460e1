# results/<experiment>.json: metrics of every model of an experiment, per seed and mean +- std.


rule collect_results:
    input:
        lambda wc: PLAN.experiment_inputs(wc.experiment),
    output:
        "results/{experiment}.json",
    params:
        spec=lambda wc: PLAN.experiment_spec_file(wc.experiment),
        # cheap job: rerun whenever what it reports changes (seeds, description, config)
        digest=lambda wc: short_hash(PLAN.experiment_spec(wc.experiment)),
    log:
        "logs/results/{experiment}.log",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "augsbert collect-results --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
