"""benchmarks/bench_headline.py's pure parts: nvidia-smi parsing, GPU busy %, the stage-time table, the metrics
comparison and the STS-B stand-in for a BWS experiment (the run itself is measured by hand)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_headline", ROOT / "benchmarks" / "bench_headline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_smi_reads_each_gpu_and_skips_unreadable_lines(bench):
    text = "0, 37, 4113\n1, 0, 3\n2, [N/A], [N/A]\n\nsome warning\n"
    assert bench.parse_smi(text) == [(0, 37.0, 4113.0), (1, 0.0, 3.0)]


def test_gpu_summary_means_the_samples_per_gpu(bench):
    samples = [bench.parse_smi("0, 10, 100\n1, 0, 5"), bench.parse_smi("0, 50, 300\n1, 20, 5"), [],
               bench.parse_smi("0, 0, 200")]
    assert bench.gpu_summary(samples) == {
        "0": {"busy_pct": 20.0, "max_util_pct": 50.0, "peak_mem_mb": 300.0, "samples": 3},
        "1": {"busy_pct": 10.0, "max_util_pct": 20.0, "peak_mem_mb": 5.0, "samples": 2}}


RESULTS = {
    "models": {"student": {"summary": {"spearman": {"mean": 80.5, "std": None}},
                           "artifacts": {"42": {"model": "artifacts/train/s1", "suite": "artifacts/suite/u1"}}},
               "teacher": {"summary": {"spearman": {"mean": 70.25, "std": None}},
                           "artifacts": {"42": {"model": "artifacts/train/t1"}}}},
    "stages": {"s1": {"stage": "student", "path": "artifacts/train/s1", "wall_time_s": 219.0},
               "u1": {"stage": "suite", "path": "artifacts/suite/u1", "wall_time_s": 12.5},
               "t1": {"stage": "teacher", "path": "artifacts/train/t1", "wall_time_s": 40.5},
               "c1": {"stage": "candidates", "path": "artifacts/candidates/c1", "wall_time_s": 12.3},
               "d1": {"stage": "data", "path": "artifacts/data/d1", "wall_time_s": None}},
}


def test_stage_rows_name_jobs_by_role_slowest_first(bench):
    assert bench.stage_rows(RESULTS) == [("student", "student", 219.0), ("teacher", "teacher", 40.5),
                                         ("student suite", "suite", 12.5), ("candidates", "candidates", 12.3),
                                         ("data", "data", None)]


def test_metrics_beside_the_previous_run(bench):
    now = bench.headline_metrics(RESULTS)
    assert now == {"student": 80.5, "teacher": 70.25}
    assert bench.comparison_rows(now, {"student": 81.41, "zero_shot": 60.0}) == [
        ("student", 80.5, 81.41, -0.91), ("teacher", 70.25, None, None), ("zero_shot", None, 60.0, None)]
    assert bench.comparison_rows(now, None)[0] == ("student", 80.5, None, None)
    assert bench.table(["a", "b"], [["x", 1.5], ["y", None]]) == "| a | b |\n| --- | --- |\n| x | 1.50 |\n| y | - |"


def test_stsb_variant_is_the_shipped_experiment_on_stsb(bench):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    variant = bench.stsb_variant(config, "bws_cbe")["experiments"]["bws_cbe_stsb"]
    shipped = config["experiments"]["bws_cbe"]
    assert variant["dataset"] == "stsb"
    assert {k: v for k, v in variant.items() if k not in ("dataset", "description")} == \
        {k: v for k, v in shipped.items() if k not in ("dataset", "description")}


def test_every_kth_line_keeps_the_first_of_each_k(bench):
    assert bench.every_kth_line("a\tx\nb\ty\nc\tz\nd\tw\ne", 2) == "a\tx\nc\tz\ne"
    assert bench.every_kth_line("a\nb\n", 1) == "a\nb\n"
