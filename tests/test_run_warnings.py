"""Data-quality warnings reach the user (issue 50 item 2): each printed once as one line on the run's console
while the data job runs, stored in the results file, and printed again above the results table."""

import json
import os
import shutil

from augsbert.face.cli import main
from augsbert.reporting.console import results_table
from augsbert.scheduling.progress import PROGRESS_FD_ENV
from conftest import REPO

PAIRS = [(f"a sentence about topic {i}.", f"another sentence on theme {i}.", i % 6) for i in range(20)]


def write_pairs(path, rows):
    path.write_text("sentence1,sentence2,score\n" + "".join(f"{a},{b},{s}\n" for a, b, s in rows))


def test_shared_and_duplicate_pairs_are_warned_on_the_console_and_in_the_results(tmp_path, monkeypatch, tiny_model):
    shutil.copytree(REPO / "config", tmp_path / "config")
    write_pairs(tmp_path / "train.csv", PAIRS[:12] + PAIRS[:2])  # 2 duplicate pairs
    write_pairs(tmp_path / "dev.csv", PAIRS[12:16])
    write_pairs(tmp_path / "test.csv", PAIRS[16:20] + PAIRS[5:8])  # 3 pairs shared with train
    (tmp_path / "my.yaml").write_text(f"""
datasets:
  mine: {{loader: pairs_file, train: {tmp_path}/train.csv, dev: {tmp_path}/dev.csv, test: {tmp_path}/test.csv,
          score_range: [0, 5]}}
experiments:
  mine_zero: {{dataset: mine, models: [zero_shot], base_model: {tiny_model}, suite: {{suites: []}}}}
""")
    monkeypatch.chdir(tmp_path)
    console = open(tmp_path / "console", "w")
    monkeypatch.setenv(PROGRESS_FD_ENV, str(console.fileno()))
    monkeypatch.setenv("AUGSBERT_DEVICE", "cpu")
    for command in ("data", "zero-shot"):
        assert main(["-q", command, "--config", "my.yaml", "--experiment", "mine_zero"]) == 0
    monkeypatch.delenv(PROGRESS_FD_ENV)
    assert main(["collect-results", "--config", "my.yaml", "--experiment", "mine_zero"]) == 0
    console.close()
    expected = ["mine: 2 duplicate pair(s) inside train (kept)",
                "mine: 3 pair(s) occur in both train/test (a test pair seen in training inflates its score)"]
    printed = [line for line in (tmp_path / "console").read_text().splitlines() if "warning" in line]
    assert printed == [f"augsbert: warning: {w}" for w in expected]  # once each, one line each
    results = json.loads((tmp_path / "results" / "mine_zero.json").read_text())
    assert results["warnings"] == expected
    table = results_table(tmp_path / "results" / "mine_zero.json")
    assert table.startswith("warnings:\n  - " + "\n  - ".join(expected) + "\n\nmine_zero: test Spearman and Pearson "
                            "× 100 (seed 42)\n")
    assert " ± " not in table  # one seed: no spread
