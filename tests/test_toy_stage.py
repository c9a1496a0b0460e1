"""The worked example of README "Development": a new stage is a declaration with a planning hook, a job and
(for options of its own) a schema section. Here all three live in this file; in the package they are
`src/augsbert/stages/<module>.py`, `src/augsbert/jobs/<module>.py` and `src/augsbert/schemas/config.schema.json`.

The toy stage, `word_counts`, counts the words of a dataset's train split for every planned run. Declared and
registered, it is planned into every experiment (its own key, path and spec), gets its `augsbert word-counts`
command, its job sizes and its rule (workflow/rules/stages.smk makes one per registry entry), and its job runs
through the same command line as every stage.
"""

import json
from pathlib import Path

import pytest

from augsbert.store.artifacts import artifact_dir, write_json
from augsbert.cli import build_parser, main
from augsbert.store.graph import Node, SeedPlan
from augsbert.stages import REGISTRY, register
from augsbert.scheduling.resources import job_resources
from augsbert.stages.base import Stage
from augsbert.jobs.common import read_split
from conftest import REPO, plan_shipped


# -- the planning hook: which node the stage adds to a run (its params enter the key; its input is the data)
def plan_word_counts(seed_plan: SeedPlan) -> dict[str, Node]:
    data = seed_plan.roles["data"]
    return {"word_counts": seed_plan.graph.add(WORD_COUNTS, f"{data.name}.words", {"split": "train"}, {"data": data})}


# -- the job: reads its inputs from the spec, writes its artifact (metrics.json) through artifact_dir
def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    pairs = read_split(spec["inputs"]["data"], spec["params"]["split"])
    words = [len(text.split()) for text in [*pairs["sentence1"], *pairs["sentence2"]]]
    metrics = {"sentences": len(words), "words": sum(words)}
    with artifact_dir(out, spec, force) as tmp:
        write_json(tmp / "metrics.json", metrics)
    return metrics


# -- the declaration: name (= plan key, rule, command, artifact folder), version (in every key), job facts
WORD_COUNTS = Stage("word_counts", 1, "count the words of a dataset's train split", "test_toy_stage:run",
                    section="datasets", roles=("word_counts",), gpu=False, device=False, seconds_per_item=0.001,
                    base_mem_mb=1000, env="cpu", threads=1, plan=plan_word_counts)


@pytest.fixture
def toy_stage(monkeypatch):
    """Registered for one test (the package's own stages are its modules in augsbert.stages)."""
    monkeypatch.delitem(REGISTRY, "word_counts", raising=False)
    register(WORD_COUNTS)
    yield WORD_COUNTS
    REGISTRY.pop("word_counts", None)


def test_a_toy_stage_is_planned_run_and_sized_from_its_declaration(toy_stage, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="already declared"):
        register(toy_stage)
    plan = plan_shipped({})
    run_keys = plan.experiment("demo_zeroshot").runs[42]
    key = run_keys["word_counts"]
    node = plan.node(key)
    assert node.stage == "word_counts" and node.path == f"artifacts/word_counts/{key}"
    assert key.startswith("lee.words-") and dict(node.inputs) == {"data": run_keys["data"]}
    # every seed's run gets it; the stage's keys follow its params and version like any other
    assert {plan.experiment("demo_zeroshot").runs[s]["word_counts"] for s in plan.experiment("demo_zeroshot").seeds} \
        == {key}
    spec = plan.spec(key)
    assert spec["stage"] == "word_counts" and spec["params"] == {"split": "train"}
    assert spec["experiments"] == ["demo_zeroshot"]
    # sized for a scheduler from the declaration: no GPU, its base memory
    resources = job_resources(plan, key, env={})
    assert resources["gpu"] == 0 and resources["mem_mb"] == 1000
    # its command, made from the registry: the same options as every stage, no --device (it runs no model)
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    options = {o for action in sub.choices["word-counts"]._actions for o in action.option_strings}
    assert {"--spec", "--config", "--out", "--force"} <= options and "--device" not in options
    # the job, run as the workflow runs it (`augsbert {stage} --spec @file --out DIR`), after the data job
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the runner "test_toy_stage:run"
    data_spec = tmp_path / "data.json"
    data_spec.write_text(json.dumps(plan.spec(run_keys["data"])))
    data_out = tmp_path / plan.node(run_keys["data"]).path
    assert main(["-q", "data", "--spec", f"@{data_spec}", "--out", str(data_out)]) in (0, None)
    spec["inputs"] = {"data": str(data_out)}
    spec_file = tmp_path / "word_counts.json"
    spec_file.write_text(json.dumps(spec))
    out = tmp_path / node.path
    assert main(["-q", "word_counts", "--spec", f"@{spec_file}", "--out", str(out)]) in (0, None)
    metrics = json.loads((out / "metrics.json").read_text())
    pairs = read_split(data_out, "train")
    assert len(pairs) == 300 and "wall_time_s" in metrics  # artifact_dir adds the job's wall time
    assert {k: metrics[k] for k in ("sentences", "words")} == {"sentences": 600,
                       "words": sum(len(t.split()) for t in [*pairs["sentence1"], *pairs["sentence2"]])}


def test_the_rules_are_one_template_over_the_registry():
    """workflow/rules/stages.smk has no rule of its own per stage: a registered stage gets the same rule."""
    text = (REPO / "workflow" / "rules" / "stages.smk").read_text()
    assert "for _stage in REGISTRY.values():" in text
    assert text.count("rule:") == 1
