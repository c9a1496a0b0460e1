# Evaluation stages.


rule evaluate_zero_shot:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/zero_shot/{key}"),
    log:
        "logs/zero_shot/{key}.log",
    # many short GPU jobs: a few grouped jobs per run in the queue (profile `group-components`)
    group:
        "evaluation"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=sized("mem_mb"),
        runtime=sized("runtime"),
        cpus_per_task=sized("cpus_per_task"),
        gpu=sized("gpu"),
        slurm_partition=sized("slurm_partition"),
        gpu_model=sized("gpu_model"),
    params:
        spec=node_spec,
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
    log:
        "logs/suite/{key}.log",
    # many short GPU jobs: a few grouped jobs per run in the queue (profile `group-components`)
    group:
        "evaluation"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=sized("mem_mb"),
        runtime=sized("runtime"),
        cpus_per_task=sized("cpus_per_task"),
        gpu=sized("gpu"),
        slurm_partition=sized("slurm_partition"),
        gpu_model=sized("gpu_model"),
    params:
        spec=node_spec,
    shell:
        "augsbert evaluate-suite --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
