# Stage prepare_data: raw files -> artifacts/data/<dataset>-<hash>/{train,dev,test,unlabeled}.parquet


rule prepare_data:
    input:
        # Missing raw files raise here, at planning time, with instructions.
        raw=raw_files,
    output:
        directory("artifacts/data/{key}"),
    params:
        spec=node_spec,
    log:
        "logs/data/{key}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "augsbert prepare-data --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
