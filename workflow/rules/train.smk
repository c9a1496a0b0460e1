# Training stages: teacher (CE / CBE) on gold, silver labels, Bi-Encoder students.
# Resumable checkpoints live in artifacts/.checkpoints/<stage>/<key>/ (outside the declared outputs).
# Every rule appends to its log (`>>`): a rerun that finds an orphaned job still writing the same key
# stops on its lock, and must not have emptied the live job's log first.


rule train_teacher:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/teacher/{key}"),
    log:
        "logs/teacher/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
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
        "augsbert train-teacher --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule label_pairs:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/labels/{key}"),
    log:
        "logs/labels/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
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
        "augsbert label-pairs --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule train_student:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/student/{key}"),
    log:
        "logs/student/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
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
        "augsbert train-student --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule train_classifier:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/classifier/{key}"),
    log:
        "logs/classifier/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
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
        "augsbert train-classifier --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


# sampling.shards > 1: the teacher scores one row range of the candidates (streamed from parquet);
# label_pairs merges the shards' scores, selects (KDE) and writes the pairs.
rule label_pairs_shard:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/label_shard/{key}"),
    log:
        "logs/label_shard/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=720,
        gpu=1,
        slurm_partition=gpu_placement("slurm_partition"),
        gpu_model=gpu_placement("gpu_model"),
    params:
        spec=node_spec,
    shell:
        "augsbert label-pairs-shard --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
