# Stage pretrain: unsupervised pre-training of a sentence encoder (pretrain.objective), before any
# supervised stage; the teacher, the student and semantic search may start from its model.


rule pretrain:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/pretrain/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/pretrain/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=720,
        gpu=1,
    shell:
        "augsbert pretrain --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
