# Stage pretrain: unsupervised pre-training of a sentence encoder (pretrain.objective), before any
# supervised stage; the teacher, the student and semantic search may start from its model.


rule pretrain:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/pretrain/{key}"),
    log:
        "logs/pretrain/{key}.log",
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
        "augsbert pretrain --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


# Stage rcl_entropy: one entropy model of Regularized Contrastive Learning (seed 002 equation 2) per
# pretrain.rcl_phis value, with its embeddings of every training row; the `rcl` pretrain node reads them.
rule rcl_entropy:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/rcl_entropy/{key}"),
    log:
        "logs/rcl_entropy/{key}.log",
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
        "augsbert rcl-entropy --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
