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
        "augsbert evaluate-zero-shot --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule evaluate_suite:
    input:
        unpack(node_inputs),
        # local STS-suite files and USEB folders: they enter the key by content, so a replaced
        # file gets a new key and a touched one nothing
        files=lambda wc: [ancient(path) for path in PLAN.local_files(wc.key)],
    output:
        directory("artifacts/suite/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/suite/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=120,
        gpu=1,
    shell:
        "augsbert evaluate-suite --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
