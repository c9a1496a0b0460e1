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
                                 "seeds"]
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
