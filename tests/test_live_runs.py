"""Issue 56 I4: a second run beside a live one (after `snakemake --unlock`) stops before any job when it would write
what the live run writes or reads (augsbert.store.live_runs); runs of disjoint outputs still run side by side."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import augsbert
from augsbert.store.live_runs import (RUNS_DIR, SNAKEMAKE_LOCKS, ConcurrentRunError, clear_stale_locks, live_runs,
                                     register_run, release_run)
from workflow_helpers import checkout, keep_experiments, snakemake

SRC = str(Path(augsbert.__file__).parents[1])


def _live(cwd: Path, outputs: list[str], inputs: list[str] = ()) -> subprocess.Popen:
    """Another process that registers a run in `cwd` (as a Snakemake run's onstart does) and lives until its input
    closes; returns once it is registered."""
    code = ("import sys; from augsbert.store.live_runs import register_run; "
            f"register_run({outputs!r}, {list(inputs)!r}, command=['snakemake', '--cores', '1']); "
            "print('ready', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": SRC})
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_a_run_writing_what_a_live_run_writes_or_reads_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    other = _live(tmp_path, ["artifacts/data/a-0123456789", "artifacts/teacher/t-0123456789"],
                  ["artifacts/data/d-0123456789"])
    try:
        for outputs in (["artifacts/teacher/t-0123456789", "results/x.json"], ["artifacts/data/d-0123456789"]):
            with pytest.raises(ConcurrentRunError) as err:
                register_run(outputs, [])
            assert str(err.value).startswith(f"another run is live in this folder (pid {other.pid} on host ")
            assert (f"started as `snakemake --cores 1`) and writes or reads 1 of the outputs this run would write "
                    f"({outputs[0]}); two runs writing one artifact remove each other's work. Wait for it to end, or "
                    f"stop it (`kill {other.pid}`), then run again; no job was started") in str(err.value)
        assert [r["pid"] for r in live_runs()] == [other.pid]
        # disjoint outputs, or reading what the live run writes: side by side, as Snakemake allows
        mine = register_run(["artifacts/student/s-0123456789"], ["artifacts/data/a-0123456789"])
        assert mine is not None and mine.is_file() and json.loads(mine.read_text())["pid"] == os.getpid()
        release_run(mine)
        assert not mine.exists()
    finally:
        other.kill()  # SIGKILL: no exit handler runs, its record stays, unheld
        other.wait()
    assert len(list((tmp_path / RUNS_DIR).glob("*.json"))) == 1
    assert live_runs() == [] and not list((tmp_path / RUNS_DIR).glob("*.json"))  # a dead run's record is swept
    release_run(register_run(["artifacts/teacher/t-0123456789"], []))


def test_lock_files_no_live_run_holds_are_removed_and_a_live_run_s_are_kept(tmp_path, monkeypatch):
    """A killed run's Snakemake lock files stopped every later `augsbert run` with Snakemake's message naming
    `--unlock`, an option `augsbert run` does not take: they are removed when no run of the folder is alive."""
    monkeypatch.chdir(tmp_path)
    assert clear_stale_locks().removed == 0  # no lock files: nothing to do
    locks = tmp_path / SNAKEMAKE_LOCKS
    locks.mkdir(parents=True)
    for name in ("0.input.lock", "0.output.lock"):
        (locks / name).write_text("artifacts/teacher/t-0123456789\n")
    other = _live(tmp_path, ["artifacts/teacher/t-0123456789"])
    try:
        assert clear_stale_locks().removed == 0 and sorted(p.name for p in locks.iterdir()) == ["0.input.lock",
                                                                                         "0.output.lock"]
    finally:
        other.kill()  # SIGKILL: its record stays, unheld, as after a lost session
        other.wait()
    assert clear_stale_locks().removed == 2 and not list(locks.iterdir())
    assert not list((tmp_path / RUNS_DIR).glob("*.json"))  # the dead run's record went with them


@pytest.mark.workflow
def test_a_second_snakemake_run_beside_a_live_one_starts_no_job(tmp_path):
    """As the probe did it, but with the live run's record standing for the first Snakemake (its onstart writes the
    same record): `snakemake --unlock` leaves the record alone, and the second run stops before its first job with
    one message, exit code 2; nothing is written or removed."""
    workdir = checkout(tmp_path / "project")
    keep_experiments(workdir, "demo_zeroshot")
    other = _live(workdir, ["results/demo_zeroshot.json"])
    try:
        assert snakemake(workdir, "--unlock").returncode == 0
        proc = snakemake(workdir, "--cores", "1", "results/demo_zeroshot.json")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (f"augsbert: error: another run is live in this folder (pid {other.pid} on host ") in proc.stderr
        assert "Traceback" not in proc.stderr and "rule data" not in proc.stdout + proc.stderr
        assert not [p for p in (workdir / "artifacts").glob("*/*") if not p.parent.name.startswith(".")]  # no job
        assert not (workdir / "logs").exists()
    finally:
        other.stdin.close()
        other.wait()
    assert live_runs(workdir / RUNS_DIR) == []


def test_a_run_that_would_write_what_an_orphaned_job_writes_is_refused(tmp_path, monkeypatch):
    """A job whose Snakemake was killed lives on; a new run (no live run recorded) planning its artifact stops before
    any job, naming it: Snakemake would otherwise remove that artifact before its own job, were it finished by then."""
    monkeypatch.chdir(tmp_path)
    out = "artifacts/teacher/t-0123456789"
    code = ("import sys; from augsbert.store.artifacts import writer_lock\n"
            f"with writer_lock({out!r}):\n    print('ready', flush=True); sys.stdin.read()")
    job = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env={**os.environ, "PYTHONPATH": SRC})
    assert job.stdout.readline() == "ready\n"
    try:
        with pytest.raises(ConcurrentRunError) as err:
            register_run([out, "results/x.json"], [])
        assert str(err.value).startswith(f"{out} is being written by pid {job.pid} on host ")
        assert str(err.value).endswith(f"(a job that outlived the run that started it?), and this run would write it "
                                       f"too. Wait for it to finish, or stop it (`kill {job.pid}`), then run again; no "
                                       "job was started")
    finally:
        job.stdin.close()
        job.wait()
    release_run(register_run([out], []))  # its job ended: the lock file stays, free


def _run_with_locks(cwd: Path, outputs: list[str], lock_files: list[str]) -> subprocess.Popen:
    """A Snakemake run stand-in in `cwd`: it writes its Snakemake lock files (`.snakemake/locks/<n>.<kind>.lock`, as
    Snakemake does) and registers, naming them, as the Snakefile's onstart does; lives until its input closes."""
    code = ("import sys; from pathlib import Path; from augsbert.store.live_runs import SNAKEMAKE_LOCKS, register_run\n"
            "locks = [SNAKEMAKE_LOCKS / name for name in sys.argv[1:]]\n"
            "SNAKEMAKE_LOCKS.mkdir(parents=True, exist_ok=True)\n"
            "[lock.write_text('\\n'.join(" + repr(outputs) + ') + "\\n") for lock in locks]\n'
            f"register_run({outputs!r}, [], command=['snakemake', '--cores', '1'], snakemake_locks=locks)\n"
            "print('ready', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, *lock_files], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_l2_the_lock_files_of_a_run_killed_beside_a_live_one_are_removed_and_the_live_one_is_named(tmp_path,
                                                                                               monkeypatch, capsys):
    """Issue 64 L2: a run killed with -9 while another run lived left its Snakemake lock files; `augsbert run` removed
    none (a run was alive) and every rerun stopped with Snakemake's LockException naming `--unlock`, which it does not
    take. Each run's record names its own lock files: the killed run's go (the live run's stay), and where the live run
    holds what a rerun would write, one line says which run it is and what to do."""
    from augsbert.scheduling.snakemake_console import run_snakemake
    from augsbert.store.live_runs import lock_holders

    monkeypatch.chdir(tmp_path)
    live = _run_with_locks(tmp_path, ["results/a.json"], ["0.input.lock", "0.output.lock"])
    killed = _run_with_locks(tmp_path, ["results/b.json"], ["1.input.lock", "1.output.lock"])
    killed.kill()  # SIGKILL: no exit handler runs; its record and its lock files stay
    killed.wait()
    try:
        locks = tmp_path / SNAKEMAKE_LOCKS
        cleared = clear_stale_locks()
        assert cleared.removed == 2 and sorted(p.name for p in locks.iterdir()) == ["0.input.lock", "0.output.lock"]
        line = cleared.line()
        assert line.startswith(f"removed 2 lock file(s) in .snakemake/locks/ of 1 run(s) killed before they ended (pid "
                               f"{killed.pid} on host "), line
        assert f"; the live run (pid {live.pid} on host " in line and line.endswith(
            "started as `snakemake --cores 1`) keeps its own; what it finished is kept, and a job it cut short runs "
            "again"), line
        assert [r["pid"] for r in live_runs()] == [live.pid]
        assert clear_stale_locks().removed == 0  # the live run's are never removed
        # a rerun that would write what the live run writes: Snakemake's LockException, then who holds it
        said = lock_holders()
        assert said.startswith(f"Snakemake's lock of this folder is held by the live run pid {live.pid} on host ")
        assert said.endswith(f"(it writes or reads files this run would write). Wait for it to end, or stop it (`kill "
                             f"{live.pid}`), then run again (`snakemake --unlock` does not stop a run)"), said
        fake = ("import sys; print('LockException:', file=sys.stderr); print('Error: Directory cannot be locked. "
                "Please make sure ...', file=sys.stderr); sys.exit(1)")
        capsys.readouterr()
        assert run_snakemake([sys.executable, "-c", fake]) == 1
        assert capsys.readouterr().err.splitlines()[-1] == f"augsbert: error: {said}"
        # lock files no live run names (a run killed before its first job, or one of an older augsbert)
        (locks / "2.output.lock").write_text("results/c.json\n")
        assert clear_stale_locks().removed == 0
        assert lock_holders().endswith(
            "; and 1 lock file(s) in .snakemake/locks/ (2.output.lock) belong to no live run that says so: a killed "
            "run's (killed before its first job), or one started by an older augsbert (live now: pid "
            f"{live.pid} on host {live_runs()[0]['host']}, since {live_runs()[0]['since']}, started as `snakemake "
            "--cores 1`). Once no run of this folder is live `augsbert run` removes them itself; if you are sure that "
            "run is dead, remove them now with `snakemake --unlock` and run again")
    finally:
        live.stdin.close()
        live.wait()
    # no run is live (the stand-in left its lock files, as a killed run does): every one goes
    assert clear_stale_locks().removed == 3 and not list(locks.iterdir())


def test_q2_verify_repair_leaves_what_a_live_run_reads_or_writes(tmp_path, monkeypatch, capsys):
    """Issue 64 Q2: `verify --repair` during a live run moved an artifact the run still needed, which then failed
    with Snakemake's "Missing files after 5 seconds". A damaged artifact a live run reads or writes, or a live
    process writes, is left in place with one line saying whose it is; the others are moved."""
    from augsbert.face.cli import main
    from augsbert.store.artifacts import artifact_dir

    monkeypatch.chdir(tmp_path)
    read = Path("artifacts/data/lee-0123456789")
    other = Path("artifacts/teacher/lee.ce-0123456789")
    for folder, stage in ((read, "data"), (other, "teacher")):
        with artifact_dir(folder, {"stage": stage, "key": folder.name}) as tmp:
            (tmp / "x.parquet").write_bytes(b"x" * 8)
        (folder / "x.parquet").write_bytes(b"y" * 8)  # damaged
    run = _live(tmp_path, ["artifacts/student/lee.be-0123456789"], [str(read)])
    try:
        capsys.readouterr()
        assert main(["verify", "--repair"]) == 1
        out = capsys.readouterr().out.splitlines()
        assert read.is_dir() and not other.exists()
        assert out[0] == f"{read}: x.parquet changed since it was written (same size, other content)"
        assert out[1].startswith(f"  not moved: the live run pid {run.pid} on host "), out
        assert out[1].endswith("started as `snakemake --cores 1` reads it; run `augsbert verify --repair` again once "
                               "it has ended"), out
        assert out[3].startswith(f"  moved to artifacts/.quarantine/teacher/{other.name}-"), out
    finally:
        run.stdin.close()
        run.wait()
    assert main(["verify", "--repair"]) == 0 and not read.exists()  # the run has ended: moved now
