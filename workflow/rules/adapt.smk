# Stage adapt_mlm: masked-LM domain adaptation before the teacher (domain / full_domain variants).


rule adapt_mlm:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/adapt/{key}"),
    log:
        "logs/adapt/{key}.log",
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
        "augsbert adapt-mlm --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
