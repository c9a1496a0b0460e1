"""Snakemake's between-workflow cache: two checkouts share one cache, the second trains nothing."""

import json
import subprocess
from pathlib import Path

import pytest

from workflow_helpers import JOB_SLOTS, checkout, keep_experiments, snakemake

pytestmark = pytest.mark.workflow


def cached_run(workdir: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    # `--cache` last: it takes rule names, and a target after it would be read as one
    proc = snakemake(workdir, *JOB_SLOTS, *args, "--cache", env={"SNAKEMAKE_OUTPUT_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_second_checkout_takes_trained_models_from_the_shared_cache(tmp_path, tiny_model):
    # What is cached and reused is checked, not what was learnt: the random tiny BERT trains in seconds.
    cache = tmp_path / "cache"
    cache.mkdir()
    small = tmp_path / "small.yaml"
    small.write_text(
        f"defaults:\n  base_model: {tiny_model}\n"
        "  teacher: {epochs: 1, max_length: 64, batch_size: 32}\n"
        "  student: {epochs: 1, max_length: 48, batch_size: 32}\n"
        "  suite: {max_length: 48, suites: []}\n"
        # the two models the cache holds (the zero-shot evaluation is no cached rule)
        "experiments:\n  demo_cbe: {models: [lower_bound, teacher]}\n")
    target = "results/demo_cbe.json"
    args = (target, "--configfile", "config/config.yaml", str(small))

    first, second = checkout(tmp_path / "alice"), checkout(tmp_path / "bob")
    for workdir in (first, second):
        keep_experiments(workdir, "demo_cbe")  # both plan only the experiment they run
    cached_run(first, cache, *args)
    assert len(list(cache.iterdir())) == 2  # the teacher and the lower-bound student (the cached rules run)

    proc = cached_run(second, cache, *args)
    out = proc.stdout + proc.stderr
    a, b = (json.loads((w / target).read_text()) for w in (first, second))
    for role, stage in (("teacher", "teacher"), ("lower_bound", "student")):
        assert a["models"][role]["per_seed"] == b["models"][role]["per_seed"]
        key = next(k for k, s in b["stages"].items() if s["stage"] == stage)
        assert f"Symlinking output file artifacts/{stage}/{key}/model from cache." in out
        log = second / "logs" / stage / f"{key}.log"
        assert not log.exists() or log.stat().st_size == 0  # the job never ran (Snakemake touches its log)
        # the first checkout's artifact moved into the cache and is linked back; the second links its files
        assert (first / "artifacts" / stage / key).is_symlink()
        model = second / "artifacts" / stage / key / "model"
        assert model.is_symlink() and model.resolve().parent.parent == cache.resolve()


def test_only_a_run_with_cache_declares_cached_rules(tmp_path):
    """Without --cache a run prints no per-rule "eligible for caching" notice (the stages declare their
    `cache:` directive only under --cache); with it, the dry run plans the cached stages' cache writes."""
    workdir = checkout(tmp_path / "ck")
    keep_experiments(workdir, "demo_zeroshot", "demo_cbe")
    plain = snakemake(workdir, "-n", "results/demo_zeroshot.json")
    out = plain.stdout + plain.stderr
    assert plain.returncode == 0, out
    assert "eligible for caching" not in out and "between-workflow cache" not in out, out
    cached = snakemake(workdir, "-n", "results/demo_cbe.json", "--cache",
                       env={"SNAKEMAKE_OUTPUT_CACHE": str(tmp_path / "cache")})
    out = cached.stdout + cached.stderr
    assert cached.returncode == 0, out
    assert "eligible for caching" not in out
    written = sorted(line.split()[2].split("/")[1] for line in out.splitlines()
                     if line.endswith("will be written to global between-workflow cache."))
    assert written == ["student", "teacher"], out
