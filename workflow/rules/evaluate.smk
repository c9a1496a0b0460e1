# Evaluation stages.


rule evaluate_zero_shot:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/zero_shot/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/zero_shot/{key}.log",
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=1,
    shell:
        "augsbert evaluate-zero-shot --spec {params.spec:q} --out {output} > {log} 2>&1"
