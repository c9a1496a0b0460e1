# results/tables/<grid>.{md,csv,png}: a grid of experiments as the thesis lays it out, plus its logs for the report.


rule grid_table:
    input:
        lambda wc: [f"results/{e}.json" for e in planned(lambda grid: grid_spec(PLAN, grid), wc.grid)["experiments"]],
        # a grid with active-learning cells: its label-budget curves come with its table (rule active_curve)
        lambda wc: [f"results/tables/{wc.grid}.curve.md"] if planned(lambda g: has_curve(PLAN, g), wc.grid) else [],
    output:
        table="results/tables/{grid}.md",
        csv=report("results/tables/{grid}.csv", caption="../report/table.rst", category="Tables", subcategory="{grid}"),
        chart=report(
            "results/tables/{grid}.png", caption="../report/chart.rst", category="Tables", subcategory="{grid}"
        ),
        logs=report(
            directory("results/tables/{grid}.logs"),
            patterns=["{name}.log"],
            caption="../report/logs.rst",
            category="Stage logs",
            subcategory="{grid}",
        ),
        figures=report(
            directory("results/tables/{grid}.figures"),
            patterns=["{name}.png"],
            caption="../report/densities.rst",
            category="Silver-score densities",
            subcategory="{grid}",
        ),
    log:
        "logs/tables/{grid}.log",
    # <grid>.curve.md is the grid's curve table (rule active_curve), <grid>.frontier.md its frontier (rule
    # grid_frontier), never the table of a grid named <grid>.curve or <grid>.frontier
    wildcard_constraints:
        grid=name_pattern() + r"(?<!\.curve)(?<!\.frontier)",
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        mem_mb=report_resources("tables")["mem_mb"],
        runtime=report_resources("tables")["runtime"],
        cpus_per_task=report_resources("tables")["cpus_per_task"],
        gpu=lambda wildcards: None if MODEL_JOBS_ONLY else 0,  # no GPU token where no GPU is
    params:
        spec=lambda wc: grid_spec_file(PLAN, wc.grid),
        digest=lambda wc: short_hash(grid_spec(PLAN, wc.grid)),
    shell:
        "augsbert render-table --spec {params.spec:q} --out {output.table:q} >> {log:q} 2>&1"


# results/tables/<grid>.curve.{md,csv,png}: a grid's active-learning cells as label-budget curves (docs/methods/active.md).
rule active_curve:
    input:
        lambda wc: [f"results/{e}.json" for e in planned(lambda grid: curve_spec(PLAN, grid), wc.grid)["experiments"]],
    output:
        table="results/tables/{grid}.curve.md",
        csv=report(
            "results/tables/{grid}.curve.csv", caption="../report/curve.rst", category="Tables", subcategory="{grid}"
        ),
        chart=report(
            "results/tables/{grid}.curve.png", caption="../report/curve.rst", category="Tables", subcategory="{grid}"
        ),
    log:
        "logs/tables/{grid}.curve.log",
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        mem_mb=report_resources("tables")["mem_mb"],
        runtime=report_resources("tables")["runtime"],
        cpus_per_task=report_resources("tables")["cpus_per_task"],
        gpu=lambda wildcards: None if MODEL_JOBS_ONLY else 0,
    params:
        spec=lambda wc: curve_spec_file(PLAN, wc.grid),
        digest=lambda wc: short_hash(curve_spec(PLAN, wc.grid)),
    shell:
        "augsbert render-curve --spec {params.spec:q} --out {output.table:q} >> {log:q} 2>&1"


# results/tables/<grid>.frontier.{md,json,png}: a grid's compact students side by side (docs/guide/compact.md "The
# frontier"): test Spearman from the results files and the int8 exports' parity records (rule
# export_model_backend_seed, every seed), speed and size of every row in one process under one condition.
rule grid_frontier:
    input:
        lambda wc: [f"results/{e}.json" for e in planned(lambda g: frontier_spec(PLAN, g), wc.grid)["experiments"]],
        lambda wc: export_targets(planned(lambda g: frontier_spec(PLAN, g), wc.grid)),
    output:
        table="results/tables/{grid}.frontier.md",
        json="results/tables/{grid}.frontier.json",
        chart=report(
            "results/tables/{grid}.frontier.png",
            caption="../report/frontier.rst",
            category="Tables",
            subcategory="{grid}",
        ),
    log:
        "logs/tables/{grid}.frontier.log",
    conda:
        "../envs/models.yaml"
    # the speed measurement's threads: Snakemake keeps them free of other jobs while it runs
    threads: lambda wc: planned(lambda g: frontier_spec(PLAN, g), wc.grid)["settings"]["threads"]
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: None if MODEL_JOBS_ONLY else 0,
    params:
        spec=lambda wc: frontier_spec_file(PLAN, wc.grid),
        digest=lambda wc: short_hash(frontier_spec(PLAN, wc.grid)),
    shell:
        "augsbert frontier --spec {params.spec:q} --out {output.table:q} >> {log:q} 2>&1"
