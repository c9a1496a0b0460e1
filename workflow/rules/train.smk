# Training stages: teacher (CE / CBE) on gold, silver labels, Bi-Encoder students.
# Resumable checkpoints live in artifacts/.checkpoints/<stage>/<key>/ (outside the declared outputs).
# Every rule appends to its log (`>>`): a rerun that finds an orphaned job still writing the same key
# stops on its lock, and must not have emptied the live job's log first.


rule train_teacher:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/teacher/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/teacher/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=720,
        gpu=1,
    shell:
        "augsbert train-teacher --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule label_pairs:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/labels/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/labels/{key}.log",
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=1,
    shell:
        "augsbert label-pairs --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule train_student:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/student/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/student/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=720,
        gpu=1,
    shell:
        "augsbert train-student --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule train_classifier:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/classifier/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/classifier/{key}.log",
    threads: 2
    resources:
        mem_mb=16000,
        runtime=360,
        gpu=1,
    shell:
        "augsbert train-classifier --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
