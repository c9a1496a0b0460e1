# Stage sample_pairs: candidate silver pairs from the target's train sentences (random, BM25, semantic search, KDE pools).


rule sample_pairs:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/candidates/{key}"),
    log:
        "logs/candidates/{key}.log",
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
        "augsbert sample-pairs --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


# sampling.shards > 1 (README "Large pools"): the pool and its semantic index once, then one job per
# range of query sentences; sample_pairs above merges them. Fixed resources: one shard of a 10-million
# sentence pool holds the pool texts, its rows of partners and (semantic) the memory-mapped index.
rule index_pool:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/pool_index/{key}"),
    log:
        "logs/pool_index/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=32000,
        runtime=480,
        gpu=1,
        slurm_partition=gpu_placement("slurm_partition"),
        gpu_model=gpu_placement("gpu_model"),
    params:
        spec=node_spec,
    shell:
        "augsbert index-pool --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"


rule sample_pairs_shard:
    input:
        unpack(node_inputs),
    output:
        directory("artifacts/candidate_shard/{key}"),
    log:
        "logs/candidate_shard/{key}.log",
    # shareable between checkouts: snakemake --cache (README "Shared artifact cache")
    cache: "omit-software"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=32000,
        runtime=480,
        gpu=0,
    params:
        spec=node_spec,
    shell:
        "augsbert sample-pairs-shard --spec {params.spec:q} --out {output:q} >> {log:q} 2>&1"
