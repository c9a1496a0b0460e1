# models/<experiment>/<model>/: a finished model copied out of its hashed artifact into a named directory, in its
# library's format with a model card (`augsbert export`): <model> is student, teacher, lower_bound or multilingual; the
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


# models/<experiment>/<model>-<backend>-int8/: the same export plus the Bi-Encoder for ONNX Runtime or OpenVINO, int8
# (`augsbert export --backend ... --quantize int8`): converted in the deploy environment (`make deploy-env`; without
# it the job stops with that one line) and refused below the parity gate (docs/guide/compact.md).
rule export_model_backend:
    input:
        results="results/{experiment}.json",
    output:
        directory("models/{experiment}/{model}-{backend}-int8"),
    log:
        "logs/export/{experiment}/{model}-{backend}-int8.log",
    wildcard_constraints:
        backend=BACKEND_WILDCARD,
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    params:
        spec=lambda wc: PLAN.experiment_spec_file(wc.experiment),
    shell:
        "augsbert export --spec {params.spec:q} --model {wildcards.model:q} --results {input.results:q} "
        "--backend {wildcards.backend:q} --quantize int8 --to {output:q} >> {log:q} 2>&1"


# models/<experiment>/<model>-<backend>-int8-seed<seed>/: the same for one seed of the experiment (what a grid's
# frontier reads for each of its seeds, rule grid_frontier).
rule export_model_backend_seed:
    input:
        results="results/{experiment}.json",
    output:
        directory("models/{experiment}/{model}-{backend}-int8-seed{seed}"),
    log:
        "logs/export/{experiment}/{model}-{backend}-int8-seed{seed}.log",
    wildcard_constraints:
        backend=BACKEND_WILDCARD,
        seed="[0-9]+",
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    params:
        spec=lambda wc: PLAN.experiment_spec_file(wc.experiment),
    shell:
        "augsbert export --spec {params.spec:q} --model {wildcards.model:q} --seed {wildcards.seed:q} "
        "--results {input.results:q} --backend {wildcards.backend:q} --quantize int8 --to {output:q} >> {log:q} 2>&1"
