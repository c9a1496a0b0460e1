# Stage prepare_data: raw files -> artifacts/data/<dataset>-<hash>/{train,dev,test,unlabeled}.parquet


rule prepare_data:
    input:
        # Missing raw files raise here, at planning time, with instructions.
        raw=raw_files,
    output:
        directory("artifacts/data/{key}"),
    log:
        "logs/data/{key}.log",
    conda:
        "../envs/cpu.yaml"
    threads: 1
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
        "augsbert prepare-data --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
