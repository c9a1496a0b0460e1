# Stage sample_pairs: candidate silver pairs from the target's train sentences (random, BM25, semantic search, KDE pools).


rule sample_pairs:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/candidates/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/candidates/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=1,
    shell:
        "augsbert sample-pairs --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
