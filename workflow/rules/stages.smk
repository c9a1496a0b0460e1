# One rule per stage of the registry (src/augsbert/stages/). A stage's rule, its `augsbert`
# command (the name hyphenated), its artifacts (artifacts/<stage>/<key>/) and its logs share one name,
# and everything that differs between stages is read from its declaration, so a rule cannot drift
# from its stage. Each job runs `augsbert <stage> --spec @<spec file>`: the planned node as JSON.
# Every rule appends to its log (`>>`): a rerun that finds an orphaned job still writing the same key
# stops on its lock, and must not have emptied the live job's log first.
# A stage declared cacheable gets its `cache:` directive only when the run asks for `--cache`
# (workflow.enable_cache): Snakemake prints a notice for every rule that declares one in a run without it.

for _stage in REGISTRY.values():

    rule:
        name:
            _stage.name
        input:
            unpack(stage_inputs(_stage)),
        output:
            # the stage is a wildcard fixed to this rule's stage, so that the shell command can name it
            directory(f"artifacts/{{stage,{_stage.name}}}/{{key}}"),
        log:
            "logs/{stage}/{key}.log",
        cache: "omit-software" if _stage.cache and workflow.enable_cache else False
        group:
            _stage.group
        conda:
            f"../envs/{_stage.env}.yaml"
        threads: FORMER_THREADS.get(_stage.name, sized_threads(_stage))
        resources:
            mem_mb=sized("mem_mb", _stage.name),
            runtime=sized("runtime", _stage.name),
            cpus_per_task=sized("cpus_per_task", _stage.name),
            gpu=sized("gpu", _stage.name),
            gpu_mem_mb=sized("gpu_mem_mb", _stage.name),
            model_jobs=sized("model_jobs", _stage.name),
            slurm_partition=sized("slurm_partition", _stage.name),
            gpu_model=sized("gpu_model", _stage.name),
        params:
            spec=node_spec,
            gpu_claim=gpu_claim,
        # empty (Snakemake's usual job block) except for a job named by its role: `Job N: lower_bound: ...`
        message:
            "{JOB_TITLE:{wildcards.key}/}"
        # the wildcard, not the loop variable: a shell directive is evaluated when the job runs, after the
        # loop (a stage `a_b` runs the command `augsbert a-b`). In a packed local run the job's GPU count
        # and memory tell it which GPU it may take (`AUGSBERT_JOB_GPU_CLAIM=<gpus>:<MB>`, augsbert/scheduling/gpus.py;
        # empty elsewhere). `3>&2` keeps the console for the job's progress lines (augsbert/scheduling/progress.py).
        shell:
            "{params.gpu_claim:q} augsbert {wildcards.stage:q} --spec {params.spec:q} --out {output:q} "
            "3>&2 >> {log:q} 2>&1"
