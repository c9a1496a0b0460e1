"""Grid tables from results files: layout, mean ± std, averages, missing cells, skipped-task notes."""

import json

import pandas as pd
import pytest

from augsbert.reporting import tables
from augsbert.reporting.results import summarise, validate_results
from augsbert.store.results_files import seal


def model(values, skipped=None):
    per_seed = {str(s): {"spearman": v, "pearson": v, "n_pairs": 10} for s, v in zip((1, 2), values)}
    return {"description": "x", "per_seed": per_seed, "skipped": skipped or {}, "artifacts": {},
            "summary": {"spearman": summarise(values), "pearson": summarise(values)}}


def write(results, name, models):
    doc = {"experiment": name, "seeds": [1, 2], "config_hash": "0123456789", "models": models, "stages": {}}
    (results / f"{name}.json").write_text(json.dumps(seal(doc)))  # as collect-results writes it


SPEC = {"grid": "g", "description": "a test grid", "metrics": ["spearman"], "columns": ["a", "b"],
        "experiments": ["g.bm25.a", "g.bm25.b"],
        "rows": [{"label": "SBERT (lower bound)", "role": "lower_bound", "cells": {"a": "g.bm25.a", "b": "g.bm25.b"}},
                 {"label": "AugSBERT", "role": "student", "cells": {"a": "g.bm25.a", "b": "g.bm25.b"}}]}


def test_one_seed_tables_show_no_spread(tmp_path):
    """A grid of one seed and one experiment: no "± 0.00", no "over seeds 42", no "the 1 experiments"."""
    doc = {"experiment": "g.bm25.a", "seeds": [42], "config_hash": "0123456789", "stages": {},
           "models": {"lower_bound": model([60.0]), "student": model([70.0])}}
    (tmp_path / "g.bm25.a.json").write_text(json.dumps(seal(doc)))
    spec = {**SPEC, "columns": ["a"], "experiments": ["g.bm25.a"],
            "rows": [{**row, "cells": {"a": "g.bm25.a"}} for row in SPEC["rows"]]}
    text = tables.run(spec, tmp_path, tmp_path / "tables" / "g.md")
    assert "| SBERT (lower bound) | 60.00 |" in text and "| AugSBERT | 70.00 |" in text and "±" not in text
    assert "One seed (42): single runs, no spread;" in text and "of the experiment of this grid" in text


def test_summarise_is_mean_and_sample_std():
    assert summarise([60.0, 64.0]) == {"mean": 62.0, "std": pytest.approx(2.8284, abs=1e-4), "n": 2}
    assert summarise([50.0, None]) == {"mean": 50.0, "std": 0.0, "n": 1}
    assert summarise([None]) == {"mean": None, "std": None, "n": 0}


def test_markdown_table_layout_average_and_missing_cells(tmp_path):
    write(tmp_path, "g.bm25.a", {"lower_bound": model([60.0, 64.0]), "student": model([70.0, 70.0])})
    write(tmp_path, "g.bm25.b", {"lower_bound": model([50.0, None], {"sts12": "no file x"})})  # no student
    text = tables.run(SPEC, tmp_path, tmp_path / "tables" / "g.md")
    assert "| Method | a | b | Avg. |" in text
    assert "| SBERT (lower bound) | 62.00 ± 2.83 | 50.00 ± 0.00 (n=1) | 56.00 |" in text
    assert "| AugSBERT | 70.00 ± 0.00 | – | – |" in text
    assert "- b: sts12 not evaluated (optional, not a failure): no file x" in text
    assert "| b | AugSBERT | `g.bm25.b` | 1 2 | 0123456789 |" in text
    csv = pd.read_csv(tmp_path / "tables" / "g.csv")
    assert list(csv.columns) == ["grid", "method", "role", "column", "experiment", "metric", "mean", "std", "n_seeds",
                                 "seeds", "measured_under"]
    assert csv.loc[(csv["method"] == "AugSBERT") & (csv["column"] == "b"), "n_seeds"].item() == 0
    assert (tmp_path / "tables" / "g.png").stat().st_size > 5_000
    assert (tmp_path / "tables" / "g.logs").is_dir() and (tmp_path / "tables" / "g.figures").is_dir()


def test_results_schema_rejects_a_malformed_document():
    with pytest.raises(ValueError, match=r"results.schema.yaml:\n  <top level>: 'experiment' is a required property"):
        validate_results({"models": {}})


def test_rendering_sweeps_a_killed_render_and_writes_the_table_atomically(tmp_path):
    write(tmp_path, "g.bm25.a", {"lower_bound": model([60.0, 64.0])})
    write(tmp_path, "g.bm25.b", {"lower_bound": model([50.0, 52.0])})
    out = tmp_path / "tables" / "g.md"
    out.parent.mkdir()
    (out.parent / ".g.md.partial-99999").write_text("| Method | a")  # a render killed while writing the table
    text = tables.run(SPEC, tmp_path, out)
    assert out.read_text() == text
    assert sorted(p.name for p in out.parent.iterdir()) == [".locks", "g.csv", "g.figures", "g.logs", "g.md", "g.png"]


def test_grid_tables_and_their_console_text_carry_the_results_warnings(tmp_path):
    """Issue 56 (case 5): the results files kept the data's warnings (35 pairs in both train and test inflate the
    test scores), but the grid's .md table and the console's table a run ends with had none of them."""
    from augsbert.reporting.console import table_text

    shared = "mine: 35 pair(s) occur in both train/test (a test pair seen in training inflates its score)"
    for name, warnings in (("g.bm25.a", [shared, "only 7 silver pair(s)"]), ("g.bm25.b", [shared])):
        doc = {"experiment": name, "seeds": [1, 2], "config_hash": "0123456789", "stages": {},
               "models": {"lower_bound": model([60.0, 64.0])}, "warnings": warnings}
        (tmp_path / f"{name}.json").write_text(json.dumps(seal(doc)))
    out = tmp_path / "results" / "tables" / "g.md"
    text = tables.run(SPEC, tmp_path, out)
    block = ("## Warnings\n\nRecorded by the experiments' jobs (`warnings` of their results files); a test pair also "
             f"seen in training inflates the scores below.\n\n- {shared} (every experiment)\n- only 7 silver "
             "pair(s) (`g.bm25.a`)\n")
    assert block in text and text.index("## Warnings") < text.index("## Spearman")
    assert block in table_text(out)  # what the run's console shows of the table


def test_speed_is_labelled_with_the_load_it_met_and_the_overview_says_its_scale(tmp_path):
    """Issue 56 (case 14): sentences/s in a grid's overview is measured inside each job under whatever load it met
    (two identical architectures differed 8.7x), unlabelled, under a heading saying "× 100" over the speed and
    size columns. Each figure now carries the load and cores it met; the heading says which columns are not x 100."""
    def deployed(spearman, speeds, loads, cpus=2):
        entry = model(spearman)
        for seed, speed, load in zip(("1", "2"), speeds, loads):
            entry["per_seed"][seed].update(sentences_per_s=speed, model_size_mb=90.9, speed_load=load,
                                           speed_cpus=cpus, speed_threads=2, speed_device="cpu")
        entry["summary"].update(sentences_per_s=summarise(speeds), model_size_mb=summarise([90.9, 90.9]))
        return entry

    doc = {"experiment": "c.full.a", "seeds": [1, 2], "config_hash": "0123456789", "stages": {},
           "models": {"lower_bound": deployed([60.0, 64.0], [400.0, 420.0], [1.04, 1.12]),
                      "student": deployed([70.0, 70.0], [46.0, 50.0], [9.1, 11.6])}}
    (tmp_path / "c.full.a.json").write_text(json.dumps(seal(doc)))
    spec = {**SPEC, "metrics": ["spearman", "sentences_per_s", "model_size_mb"], "columns": ["a"],
            "experiments": ["c.full.a"], "rows": [{**row, "cells": {"a": "c.full.a"}} for row in SPEC["rows"]]}
    text = tables.run(spec, tmp_path, tmp_path / "tables" / "c.md")
    assert "## Overview (a; mean over seeds; scores × 100, Sent./s and MB as measured)" in text
    assert "× 100)" not in text.split("## Overview", 1)[1].split("\n", 1)[0]
    assert "| SBERT (lower bound) | 62.00 | 410.00 (load 1.0–1.1 on 2 cores) | 90.90 |" in text
    assert "| AugSBERT | 70.00 | 48.00 (load 9.1–11.6 on 2 cores) | 90.90 |" in text
    assert "| AugSBERT | 48.00 ± 2.83 (load 9.1–11.6 on 2 cores) |" in text  # the speed's own table too
    assert "- Sent./s is measured inside each student job, on its device, under whatever load" in text
    csv = pd.read_csv(tmp_path / "tables" / "c.csv")
    speed = csv[(csv["metric"] == "sentences_per_s") & (csv["method"] == "AugSBERT")]
    assert speed["measured_under"].item() == "load 9.1–11.6 on 2 cores"
    assert tables.measured_under({"1": {"sentences_per_s": 9.0}}) == "load not recorded"  # collected before
    assert tables.measured_under({"1": {"sentences_per_s": 9.0, "speed_load": 0.5, "speed_cpus": 8,
                                        "speed_device": "cuda:0 (NVIDIA H200)"}}) == "cuda:0 (NVIDIA H200), load 0.5 on 8 cores"


def test_a_bi_encoder_job_records_what_its_speed_was_measured_under(monkeypatch):
    """The student job writes the load average, cores, threads and device beside its sentences/s, and the
    results file keeps them per seed (augsbert.reporting.results.DEPLOYMENT)."""
    import torch

    from augsbert.reporting.results import DEPLOYMENT
    from augsbert.scheduling import progress
    from augsbert.training.pair_job import speed_conditions

    monkeypatch.setattr(progress, "machine_load", lambda: (9.13, 2))
    assert speed_conditions("cpu") == {"speed_load": 9.13, "speed_cpus": 2, "speed_threads": torch.get_num_threads(),
                                       "speed_device": "cpu"}
    assert set(speed_conditions("cpu")) < set(DEPLOYMENT)
