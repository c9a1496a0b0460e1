# Stage adapt_mlm: masked-LM domain adaptation before the teacher (domain / full_domain variants).


rule adapt_mlm:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/adapt/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/adapt/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=720,
        gpu=1,
    shell:
        "augsbert adapt-mlm --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
