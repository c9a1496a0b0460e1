# models/<experiment>/<model>/: a finished model copied out of its hashed artifact into a named directory, in its
# library's format with a model card (`augsbert export`): <model> is student, teacher or lower_bound; the
# experiment's first seed (for another seed run `augsbert export --seed N` yourself). The card's test metrics come
# from the results file, hence its input.


rule export_model:
    input:
        results="results/{experiment}.json",
    output:
        directory("models/{experiment}/{model}"),
    log:
        "logs/export/{experiment}/{model}.log",
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=lambda wc: PLAN.experiment_spec_file(wc.experiment),
    shell:
        "augsbert export --spec {params.spec:q} --model {wildcards.model:q} --results {input.results:q} "
        "--to {output:q} >> {log:q} 2>&1"
