"""docs/guide/own-data.md runs as written (issue 42): its shell blocks, in order, in a fresh checkout.

The page's commands call `.venv/bin/snakemake` and `.venv/bin/augsbert` from the repository root; the
checkout gets this environment's .venv as a link, and its config/config.yaml the tiny random model as
`defaults.base_model` (the page's my.yaml sets none), so the chain costs seconds per job. What the page
promises is checked: the table at the end, the two small-silver warnings, the export and its files.
"""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO
from test_docs import SHELL, code_blocks
from workflow_helpers import checkout, keep_experiments

PAGE = REPO / "docs" / "guide" / "own-data.md"


def test_the_own_data_page_runs_as_written(tmp_path, tiny_model):
    work = checkout(tmp_path / "repo")
    keep_experiments(work, "demo_zeroshot")  # the page's commands plan only its own experiment
    config = yaml.safe_load((work / "config" / "config.yaml").read_text())
    config["defaults"]["base_model"] = tiny_model
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu", "COLUMNS": "200"}
    blocks = [b.text for b in code_blocks(PAGE) if b.lang in SHELL]
    assert len(blocks) == 4 and "-n" not in blocks[2]  # files, my.yaml, the run, the export
    out = ""
    for text in blocks:
        proc = subprocess.run(["bash", "-e", "-c", text], cwd=work, env=env, capture_output=True, text=True,
                              timeout=900)
        out += proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-5000:]
    assert (work / "results" / "mine_augsbert.json").is_file()
    # the table the run ends with, and the warnings the page says this tiny example gets
    assert "results/mine_augsbert.json:\n\nwarnings:\n  - the silver pool holds only " in out
    assert "\n\nmine_augsbert: test Spearman and Pearson × 100 (seed 42)\n" in out
    # the estimate before the first job (issue 50): the page's run prints it, one line per job and the total
    estimate = out.index("augsbert: estimate for 6 job(s) on this CPU")
    assert estimate < out.index("augsbert data --spec") and "\n  total " in out[estimate:]
    # with what it assumes and the load (issue 56); each job's estimate was handed to it and removed at the end
    assert "\naugsbert: the figures are for " in out[estimate:out.index("augsbert data --spec")]
    assert not list((work / ".snakemake" / "augsbert").glob("estimate-*.json"))
    import json

    student = json.loads((work / "results" / "mine_augsbert.json").read_text())["models"]["student"]["per_seed"]["42"]
    assert student["speed_device"] == "cpu" and student["speed_cpus"] >= 1 and student["speed_load"] >= 0  # issue 56
    for model in ("SBERT (lower bound)", "CBE (upper bound)", "AugSBERT"):  # the rows by their titles
        assert f"\n{model} " in out
    assert "augsbert: warning: the silver pool holds only " in out and "sentence(s) (below 100)" in out
    assert "augsbert: warning: only " in out and "silver pair(s) were drawn (below 100;" in out
    export = work / "models" / "mine_student"
    card = (export / "README.md").read_text()
    assert 'SentenceTransformer("models/mine_student")' in card and "score_range:" in card
    assert {oct(p.stat().st_mode & 0o777) for p in export.rglob("*") if p.is_file()} == {"0o644"}
