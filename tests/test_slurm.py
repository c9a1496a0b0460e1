"""The SLURM profile against a real scheduler: a single-node cluster (tests/slurm_node.py), where root and
Debian's `slurmctld slurmd slurm-client munge` are available (.ci/run installs them); elsewhere the test
skips, naming the packages.

The cluster: accounting off (as on many small clusters), no GPU, partitions `main` (default, every CPU of
this machine) and `small` (1 CPU per node: MaxCPUsPerNode=1). Two Snakemake runs go through
`--profile profiles/slurm` at once, so that their waits overlap:

- the chain, in `small`: teacher and BM25 sampling -> labels -> student -> results (the data job runs
  locally before), `device: cpu`, the tiny test model, no --set-resources and no CPU setting: the jobs are
  planned with 2 CPUs, which
  `small` never gives one job (they would wait for ever), so the profile's partition limit must hold
  them to 1. The sampling job is cancelled with scancel while its stage runs;
- in `main`: a job that sleeps past its 1-minute time limit (SLURM checks limits every 30 s, so it is
  killed 60-90 s after it starts), and a group job asking for a GPU the node does not have (refused by
  sbatch), with --keep-going and no retries.

One test with subtests, not one test per check: pytest-xdist would spread tests over its workers, each
starting a cluster and the runs (`--dist loadgroup` would keep them together, but pytest 9.2 drops its
group marks: pytest-xdist issue 1386). The profile's settings are also checked without a cluster in
tests/test_cluster.py, and what only a fake scheduler can show (GPU partitions and models on the sbatch
line) stays there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from augsbert.config.load import prepare_config
from augsbert.plan import Plan
from conftest import REPO
from slurm_node import SingleNodeSlurm, machine, unavailable
from workflow_helpers import snakemake

RUN_TIMEOUT_S = 900


@pytest.fixture
def cluster():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    # not under pytest's base temp: munged wants every folder above its socket searchable by all
    root = Path(tempfile.mkdtemp(prefix="augsbert-slurm-"))
    node = SingleNodeSlurm(root, partitions={"main": None, "small": 1})
    try:
        node.start()
        yield node
    finally:
        node.stop()
        print(f"\nslurm cluster stopped in {node.stop_s:.1f} s")
        left = node.marked_processes()
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"processes of the test cluster still running: {left}"


def run_env(cluster: SingleNodeSlurm, **extra: str) -> dict[str, str]:
    env = {**cluster.env, **extra,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{cluster.env['PATH']}",
           "OMP_WAIT_POLICY": "PASSIVE"}  # idle OpenMP threads sleep (two jobs share 2 busy cores)
    for name in [*env]:
        if name.startswith("AUGSBERT_SLURM_") and name not in extra and name != "AUGSBERT_SLURM_NODE":
            del env[name]  # this machine's settings do not leak into the runs
    env.pop("HF_HUB_OFFLINE", None)  # the profile sets it for the jobs
    return env


def profile_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--profile", str(REPO / "profiles" / "slurm"),
            "--slurm-init-seconds-before-status-checks", "1", "--slurm-keep-successful-logs", *args]


def jobs(cluster: SingleNodeSlurm) -> list[dict[str, str]]:
    """Every job the cluster knows (finished ones stay listed for MinJobAge)."""
    fields = ("id", "comment", "state", "cpus", "gres", "limit", "partition", "start", "end")
    out = cluster.run(["squeue", "--noheader", "--states=all", "--format=%i|%k|%T|%C|%b|%l|%P|%S|%e"]).stdout
    return [dict(zip(fields, line.split("|"))) for line in out.splitlines()]


def minutes(limit: str) -> int:
    """squeue's time limit (`[days-]hours:minutes:seconds` or `minutes:seconds`) in minutes."""
    days, _, clock = limit.rpartition("-")
    parts = [int(x) for x in clock.split(":")]
    hours, mins, secs = ([0] * (3 - len(parts)) + parts)
    return (int(days or 0) * 24 + hours) * 60 + mins + secs // 60


MINI = """
rule all:
    input: "too_long.txt", "refused.txt"

rule too_long:
    output: "too_long.txt"
    resources: runtime=1, mem_mb=100, cpus_per_task=1
    shell: "sleep 600; touch {output}"

rule refused:
    output: "refused.txt"
    group: "g"
    resources: runtime=1, mem_mb=100, cpus_per_task=1, gpu=1
    shell: "touch {output}"
"""


class SideRun:
    """The run in `main`, in the background: a job over its time limit and a refused group job."""

    # what it prints once both have failed; after that Snakemake only waits out its next status-check
    # interval (about a minute) before it exits
    REPORTED = ("Error in group g", "SLURM status is: 'TIMEOUT'", "DUE TO TIME LIMIT")

    def __init__(self, cluster: SingleNodeSlurm, work: Path):
        work.mkdir()
        (work / "Snakefile").write_text(textwrap.dedent(MINI))
        self.path = work / "snakemake.out"
        with open(self.path, "w") as out:
            self.proc = subprocess.Popen(profile_command("--retries", "0", "--keep-going"), cwd=work,
                                         env=run_env(cluster), stdout=out, stderr=subprocess.STDOUT, text=True)
        self.started = time.monotonic()

    def finish(self) -> tuple[int | None, str, float]:
        """Exit code (None: stopped here once both failures were reported), output and seconds to that point."""
        deadline = self.started + RUN_TIMEOUT_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            if all(text in self.path.read_text() for text in self.REPORTED):
                break
            time.sleep(0.5)
        seconds = time.monotonic() - self.started
        self.stop()
        return self.proc.returncode if self.proc.returncode >= 0 else None, self.path.read_text(), seconds

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def chain_config(model: str) -> dict:
    from augsbert.config.load import read_config

    config = read_config(REPO / "config" / "config.yaml")
    config["defaults"]["base_model"] = model
    config["device"] = "cpu"
    config["datasets"] = {"lee": config["datasets"]["lee"]}
    config["experiments"] = {"chain": yaml.safe_load(
        "dataset: lee\nmodels: [teacher, student]\nseeds: [1]\n"
        "teacher: {epochs: 1, max_length: 32, batch_size: 64}\n"
        "student: {epochs: 1, max_length: 32, batch_size: 64}\n"
        "candidates: {strategies: [bm25], pool: train+unlabeled, top_k: 1}\n"
        "suite: {max_length: 32, suites: []}\n"
        "description: teacher -> sampling -> labels -> student through the SLURM profile\n")}
    config["grids"] = {}
    return config


def cancel_when_running(cluster: SingleNodeSlurm, work: Path, rule: str, proc: subprocess.Popen) -> str | None:
    """scancel the first job of `rule` once its stage command has started (its rule log exists); the job id."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        for job in jobs(cluster):
            if job["comment"].startswith(f"rule_{rule}_") and job["state"] == "RUNNING":
                key = job["comment"].rsplit(f"{rule}_", 1)[1]
                if (work / "logs" / rule / f"{key}.log").exists():
                    cluster.run(["scancel", job["id"]])
                    return job["id"]
        time.sleep(0.2)
    return None


def run_chain(cluster: SingleNodeSlurm, work: Path, model: str) -> dict:
    """The chain through the profile, its sampling job cancelled once its stage runs."""
    for item in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / item, work / item)
    shutil.rmtree(work / "config" / "grids")  # the shipped grids need datasets this config drops
    config = chain_config(model)
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # the data job is no part of the chain: it runs here first (seconds), so the queue holds only the chain
    plan = Plan(prepare_config(config))
    exp = plan.experiment("chain")
    local = snakemake(work, "--cores", "1", plan.nodes[exp.runs[exp.seeds[0]]["data"]].path)
    assert local.returncode == 0, local.stdout + local.stderr[-4000:]
    with open(work / "snakemake.out", "w+") as out:
        started = time.monotonic()
        proc = subprocess.Popen(profile_command("results/chain.json"), cwd=work,
                                env=run_env(cluster, AUGSBERT_SLURM_PARTITION="small"), stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        try:
            cancelled = cancel_when_running(cluster, work, "candidates", proc)
            rc = proc.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wall_s = time.monotonic() - started
        out.seek(0)
        text = out.read()
    return {"work": work, "rc": rc, "out": text, "cancelled": cancelled, "jobs": jobs(cluster), "wall_s": wall_s}


def by_rule(listing: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    """The chain's jobs by rule (groups by group name), in submission order."""
    found: dict[str, list[dict[str, str]]] = {}
    for job in sorted(listing, key=lambda j: int(j["id"])):
        kind, _, rest = job["comment"].partition("_")
        name = rest.split("_wildcards_")[0] if kind == "rule" else rest
        found.setdefault(name, []).append(job)
    return found


def chain_jobs(chain) -> dict[str, list[dict[str, str]]]:
    return {name: js for name, js in by_rule(chain["jobs"]).items() if js[0]["partition"] == "small"}


@pytest.mark.workflow
def test_profile_on_a_real_slurm(cluster, tiny_model, tmp_path, subtests, monkeypatch):
    from test_cluster import parse_profile

    with subtests.test("the profile reads accounting and the partitions from the cluster"):
        # accounting off: squeue for job states (unless told); the CPUs one job gets in each partition (main:
        # the machine's, small: MaxCPUsPerNode=1), exported for the job sizes
        cpus, _ = machine()
        with monkeypatch.context() as patch:
            patch.setenv("SLURM_CONF", str(cluster.conf))
            assert parse_profile(patch, {})["slurm-status-command"] == "squeue"
            assert os.environ["AUGSBERT_SLURM_PARTITION_CPUS"] == f"main={cpus},*={cpus},small=1"
            assert parse_profile(patch, {"AUGSBERT_SLURM_STATUS": "sacct"})["slurm-status-command"] == "sacct"

    side = SideRun(cluster, tmp_path / "side")
    try:
        chain = run_chain(cluster, tmp_path / "chain", tiny_model)
        side_rc, side_out, side_s = side.finish()
    finally:
        side.stop()
    print(f"\nslurm cluster started in {cluster.start_s:.1f} s; chain {chain['wall_s']:.0f} s, side run "
          f"{side_s:.0f} s; jobs (id, rule, state, start, end):")
    for job in chain["jobs"]:
        print("  ", job["id"], job["comment"][:40], job["state"], job["start"][11:], job["end"][11:])
    work = chain["work"]

    with subtests.test("the chain runs as SLURM jobs and completes"):
        assert chain["rc"] == 0, chain["out"][-8000:]
        result = json.loads((work / "results" / "chain.json").read_text())
        assert sorted(result["models"]) == ["student", "teacher"]
        jobs = chain_jobs(chain)
        assert sorted(jobs) == ["candidates", "labels", "student", "teacher"]  # collect_results: local
        assert [j["state"] for j in jobs["candidates"]] == ["CANCELLED", "COMPLETED"]
        # the resubmission (attempt 2) asked for twice the time limit (augsbert.scheduling.resources.job_resources)
        first, second = (minutes(j["limit"]) for j in jobs["candidates"])
        assert second == 2 * first and first > 0, jobs["candidates"]
        for name, js in jobs.items():
            assert [j["state"] for j in js][-1:] == ["COMPLETED"], (name, js)

    with subtests.test("device: cpu jobs ask no GPU and no more CPUs than the partition gives, threads included"):
        # sbatch refuses a GPU on the GPU-less node; planned with 2 CPUs, `small` gives 1; Snakemake prints
        # `threads: N` for N > 1
        jobs = [j for js in chain_jobs(chain).values() for j in js]
        assert len(jobs) == 5
        assert {(j["gres"], j["cpus"]) for j in jobs} == {("N/A", "1")}
        logs = sorted((work / ".snakemake" / "slurm_logs").rglob("*.log"))
        assert len(logs) == 5
        for log in logs:
            text = log.read_text()
            assert "cpus_per_task=1," in text and "gpu=0" in text and "threads: " not in text, log

    with subtests.test("a cancelled job is retried and writes what an uninterrupted run writes"):
        # scancel'd while its stage ran, the sampling job was resubmitted (the profile's retries): the candidates
        # equal those of the stage run here on the same spec, and no partial files of the killed write are left
        import pandas as pd

        from augsbert.face.cli import main

        assert chain["cancelled"], "the sampling job never ran long enough to be cancelled"
        (artifact,) = (work / "artifacts" / "candidates").iterdir()
        spec = work / "artifacts" / ".specs" / "candidates" / f"{artifact.name}.json"
        reference = tmp_path / "reference" / "candidates" / artifact.name  # named by its key, as the CLI checks
        monkeypatch.chdir(work)  # the spec names its inputs relative to the workflow's directory
        assert main(["candidates", "--spec", f"@{spec}", "--out", str(reference)]) == 0
        pd.testing.assert_frame_equal(pd.read_parquet(artifact / "candidates.parquet"),
                                      pd.read_parquet(reference / "candidates.parquet"))
        ran, ref = (json.loads((d / "metrics.json").read_text()) for d in (artifact, reference))
        assert ran.pop("wall_time_s") >= 0 and ref.pop("wall_time_s") >= 0
        assert ran == ref

    with subtests.test("a job over its time limit fails, its time limit named"):
        assert side_rc in (None, 1)  # None: stopped here once both failures were reported
        assert re.search(r"Error in rule too_long:\n    message: SLURM-job '\d+' failed, SLURM status is: 'TIMEOUT'",
                         side_out), side_out[-6000:]
        assert "DUE TO TIME LIMIT" in side_out  # the job's SLURM log, shown by show-failed-logs

    with subtests.test("a refused submission shows sbatch's message, for a group job too"):
        assert "Error in group g: SLURM sbatch failed. The error message was 'sbatch: error: Invalid generic " \
               "resource (gres) specification'" in side_out, side_out[-6000:]
