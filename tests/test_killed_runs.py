"""A run killed with -9 while its job goes on (issue 64 L3b, L2), as the fault probe did it: `augsbert run` and its
Snakemake killed, the job finishing its artifact alone, then a second run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import augsbert
from augsbert.store.incomplete import INCOMPLETE, marked_outputs
from augsbert.store.live_runs import RUNS_DIR, SNAKEMAKE_LOCKS, busy_outputs
from workflow_helpers import checkout, job_stats, keep_experiments

pytestmark = pytest.mark.workflow

SRC = str(Path(augsbert.__file__).parents[1])
# Loaded by every Python process of the run (PYTHONPATH): the data job (`augsbert data ...`) waits at its start
# until the gate file exists, so that the test kills the run while the job is started and not yet finished.
GATE = """import os, sys, time
if os.environ.get("TEST_GATE") and sys.argv[1:2] == ["data"]:
    open(os.environ["TEST_GATE"] + ".arrived", "w").close()
    while not os.path.exists(os.environ["TEST_GATE"]):
        time.sleep(0.05)
"""


def _wait(what, seconds: float, check) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _augsbert(workdir: Path, *args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu", "AUGSBERT_WARM": "0",
           **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "augsbert", *args], cwd=workdir, env=env, text=True, **popen)


def test_l3b_an_artifact_a_job_finished_after_its_run_was_killed_is_kept_not_trained_again(tmp_path):
    """Issue 64 L3b (data loss): the next run deleted the finished artifact and ran its job again ("Forced
    execution": Snakemake's incomplete marker and the profile's `rerun-incomplete`). Now the second run keeps it, says
    so on its console, and its plan holds only what was not built; the killed run's lock files go with it (L2)."""
    workdir = checkout(tmp_path / "project")
    keep_experiments(workdir, "demo_zeroshot")
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "sitecustomize.py").write_text(GATE)
    console = (tmp_path / "first.log").open("w")
    first = _augsbert(workdir, "run", "config/config.yaml", "demo_zeroshot", stdout=console, stderr=subprocess.STDOUT,
                      env={"PYTHONPATH": f"{gate}{os.pathsep}{SRC}", "TEST_GATE": str(gate / "open")})
    try:
        _wait("the data job to start", 300, lambda: (gate / "open.arrived").exists() or first.poll() is not None)
        assert first.poll() is None, (tmp_path / "first.log").read_text()
        marked = [output for output in marked_outputs(workdir) if output.startswith("artifacts/data/")]
        assert len(marked) == 1, marked
        out = workdir / marked[0]
        # the run's record names Snakemake's lock files of the run (those of a killed run are told from a live one's)
        record = json.loads(next((workdir / RUNS_DIR).glob("*.json")).read_text())
        assert sorted(c["file"] for c in record["snakemake_locks"]) == sorted(
            p.name for p in (workdir / SNAKEMAKE_LOCKS).iterdir())
        (snakemake,) = _children(first.pid)
        os.kill(snakemake, signal.SIGKILL)  # `augsbert run` and its Snakemake; the job goes on
        first.kill()
    finally:
        (gate / "open").touch()
        first.wait()
        console.close()
    _wait("the job to finish its artifact alone", 300,
          lambda: (out / "manifest.json").is_file() and not busy_outputs([str(out)]))
    assert record["pid"] == snakemake and marked_outputs(workdir).get(marked[0])  # Snakemake's mark stayed
    before = (out.stat().st_ino, (out / "metrics.json").read_text())

    second = _augsbert(workdir, "run", "config/config.yaml", str(out.relative_to(workdir)), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    said = second.communicate(timeout=600)[0]
    assert second.returncode == 0, said
    assert f"augsbert: removed 2 lock file(s) in .snakemake/locks/ of 1 run(s) killed before they ended (pid " \
           f"{snakemake} on host " in said, said
    assert (f"augsbert: {out.relative_to(workdir)} was finished by a job that outlived the run that started it (its "
            "manifest checks): kept, not run again (Snakemake's incomplete marker of it removed)") in said, said
    assert "Nothing to be done" in said and "rule data" not in said, said
    assert (out.stat().st_ino, (out / "metrics.json").read_text()) == before  # the same artifact, not a new one
    assert not marked_outputs(workdir) and not list((workdir / INCOMPLETE).iterdir())

    plan = _augsbert(workdir, "run", "-n", "config/config.yaml", "demo_zeroshot", stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT)
    said = plan.communicate(timeout=600)[0]
    assert plan.returncode == 0 and job_stats(said) == {"zero_shot": 1, "suite": 1, "collect_results": 1}, said
