"""Issue 42: a model job's progress on the workflow's console (augsbert.scheduling.progress)."""

import io
import os

from augsbert.scheduling import progress
from augsbert.scheduling.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_line_names_stage_step_eta_and_log():
    clock, out = Clock(), io.StringIO()
    job = Progress("teacher lee.cbe-0123456789", "logs/teacher/lee.cbe-0123456789.log", out, clock=clock)
    clock.now = 190.0
    assert job.line() == ("augsbert: teacher lee.cbe-0123456789: running for 1:30 "
                          "(log logs/teacher/lee.cbe-0123456789.log)")  # before the trainer starts
    job.steps(0, 20)
    assert "step 0/20 (0 %), time left after the first step" in job.line()
    clock.now += 30.0
    job.steps(5, 20)  # 6 s a step, 15 steps left
    assert job.line() == ("augsbert: teacher lee.cbe-0123456789: step 5/20 (25 %), 1:30 left "
                          "(log logs/teacher/lee.cbe-0123456789.log)")
    job.steps(0, 4)  # a new trainer: a new base for the time left
    clock.now += 7200.0
    job.steps(2, 4)
    assert job.line().endswith("step 2/4 (50 %), 2:00:00 left (log logs/teacher/lee.cbe-0123456789.log)")
    job.print()
    assert out.getvalue() == job.line() + "\n"
    # after the last step the job's scoring is named, not a frozen "100 %, 0:00 left" (issue 50 item 5)
    import augsbert.scheduling.progress as progress_module

    job.steps(4, 4)
    progress_module._active = job
    try:
        progress_module.phase("scoring test (4,906 pairs)")
        clock.now += 75.0
        assert job.line() == ("augsbert: teacher lee.cbe-0123456789: scoring test (4,906 pairs), for 1:15 "
                              "(log logs/teacher/lee.cbe-0123456789.log)")
    finally:
        progress_module._active = None


def test_time_left_comes_from_the_estimate_then_from_the_measured_steps():
    """Issue 56 (case 13): under load the estimate was 29x short on one job and the progress line never said so.
    Until MEASURED_STEPS steps are measured the time left is the run's estimate of the job (idle cores) times the
    factor of the load it read; then the measured rate, with the estimate beside it where the two part by more
    than DEPARTS."""
    clock, load = Clock(), [(12.3, 2)]
    job = Progress("teacher k", None, io.StringIO(), clock=clock, estimate={"step_s": 0.5, "load": 9.8, "cores": 2},
                   load=lambda: load[0])
    job.steps(0, 60)
    assert job.line() == ("augsbert: teacher k: step 0/60 (0 %), about 2:57 left (estimated, 5.9x for load 9.8 on 2 "
                          "core(s); 0 of 3 steps measured)")  # 60 x 0.5 s x 5.9
    clock.now += 6.0
    job.steps(2, 60)
    assert "about 2:51 left (estimated, 5.9x" in job.line()  # 2 steps are not yet a rate
    clock.now += 9.0
    job.steps(5, 60)  # 3 s a step, 55 steps left
    assert job.line() == ("augsbert: teacher k: step 5/60 (8 %), 2:45 left (measured 3.00 s/step, 6.0x the "
                          "estimate's 0.50 s for idle cores; load now 12.3 on 2 core(s), this job's threads included)")
    load[0] = (4.0, 2)  # no load recorded with the estimate: the load now
    nameless = Progress("teacher k", None, io.StringIO(), clock=clock, estimate={"step_s": 0.5}, load=lambda: load[0])
    nameless.steps(0, 10)
    assert "about 0:15 left (estimated, 3.0x for load 4.0 on 2 core(s); 0 of 3 steps measured)" in nameless.line()
    load[0] = (0.1, 2)
    idle = Progress("student k", None, io.StringIO(), clock=clock, estimate={"step_s": 0.5}, load=lambda: load[0])
    idle.steps(0, 60)
    clock.now += 2.5
    idle.steps(4, 60)  # 0.62 s a step: within DEPARTS of the estimate
    assert idle.line() == "augsbert: student k: step 4/60 (6 %), 0:35 left (measured 0.62 s/step, as estimated)"
    fast = Progress("student k", None, io.StringIO(), clock=clock, estimate={"step_s": 5.0}, load=lambda: load[0])
    fast.steps(0, 10)
    clock.now += 3.0
    fast.steps(3, 10)
    assert "0:07 left (measured 1.00 s/step, 0.2x the estimate's 5.00 s for idle cores; load now 0.1" in fast.line()


def test_progress_is_printed_on_the_console_descriptor_every_period(tmp_path, monkeypatch):
    (tmp_path / "logs" / "student").mkdir(parents=True)
    (tmp_path / "logs" / "student" / "lee.be-1.log").write_text("")
    monkeypatch.chdir(tmp_path)
    read, write = os.pipe()
    monkeypatch.setattr(progress, "PERIOD_S", 0.05)
    assert progress.start("student", "artifacts/student/lee.be-1", env={}) is None  # outside the workflow: nothing
    progress.start("student", "artifacts/student/lee.be-1", env={progress.PROGRESS_FD_ENV: str(write)})
    callback = progress.callback()
    state = type("State", (), {"global_step": 0, "max_steps": 10})()
    callback.on_train_begin(None, state, None)
    state.global_step = 3
    callback.on_step_end(None, state, None)
    import time

    time.sleep(0.3)
    progress.stop()
    os.close(write)
    text = os.read(read, 100000).decode()
    assert text.startswith("augsbert: student lee.be-1: ") and "lee.be-1: step 3/10 (30 %), 0:0" in text
    assert "(log logs/student/lee.be-1.log)" in text and progress.callback() is None
    progress.warn("only 3 silver pair(s)", env={progress.PROGRESS_FD_ENV: "999"})  # no such descriptor: no error


def test_a_small_silver_pool_or_set_is_warned_about_with_the_count_and_why():
    from augsbert.stages.candidates import CandidatesParams  # noqa: F401 - the params class the stage reads
    from augsbert.sampling.candidate_table import small_silver

    params = type("P", (), {"pool": "train", "top_k": 3, "strategies": ["bm25"]})()
    assert small_silver(params, 4, 21, {"bm25": 3}) == [
        "the silver pool holds only 4 sentence(s) (below 100): 21 sentence(s) of dev/test pairs were removed from "
        "it (candidates.exclude_eval_sentences: no test sentence is trained on; a random split shares sentences across "
        "splits); add unlabeled text (the dataset's `unlabeled` file, candidates.pool: train+unlabeled) for more "
        "silver pairs",
        "only 3 silver pair(s) were drawn (below 100; pool of 4 sentence(s), top_k 3, pairs already in the gold "
        "train split excluded): the students learn from almost no silver data"]
    assert small_silver(params, 325, 0, {"bm25": 300}) == []
    assert small_silver(params, 180, 820, {"bm25": 500}) == [  # issue 50: a pool shrunk by 82 % is said too
        "820 of the 1000 pool sentences (82 %) occur in dev/test pairs and were removed from the silver pool "
        "(candidates.exclude_eval_sentences): the splits share many sentences; for a larger pool, set candidates.pool: "
        "train+unlabeled (the train pairs left unlabelled, with gold_fraction < 1, and the dataset's `unlabeled` file) "
        "and give the `unlabeled` file sentences that occur in no dev/test pair (the test-free sentences: none is "
        "removed)"]  # issue 64, 14: and what to do about it
    both = type("P", (), {"pool": "train+unlabeled", "top_k": 3, "strategies": ["bm25"]})()
    assert small_silver(both, 180, 820, {"bm25": 500})[0].endswith(
        "the splits share many sentences; for a larger pool, give the dataset's `unlabeled` file sentences that "
        "occur in no dev/test pair (the test-free sentences: none is removed)")
    none = type("P", (), {"pool": "train", "top_k": 3, "strategies": ["none"]})()
    assert small_silver(none, 325, 0, {"none": 300}) == []  # no sampling asked for: no silver to warn about


def test_the_table_a_run_ends_with(tmp_path, monkeypatch):
    import json

    from augsbert.reporting.console import print_tables, table_text

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "tables").mkdir(parents=True)
    from augsbert.store.results_files import seal

    (tmp_path / "results" / "e.json").write_text(json.dumps(seal({"experiment": "e", "seeds": [42, 43],
                                                                 "config": {"teacher": {"arch": "cbe"}}, "models": {
        "teacher": {"summary": {"spearman": {"mean": 43.91, "std": 0.66, "n": 2}, "pearson": {"mean": 53.66,
                                                                                             "std": 0.4, "n": 2}}},
        "zero_shot": {"summary": {"spearman": {"mean": 53.55, "std": None, "n": 1}}}}})))
    assert table_text("results/e.json") == (
        "e: test Spearman and Pearson × 100 (mean ± std over seeds 42, 43)\n"
        "model                     Spearman       Pearson\n"  # the grid tables' row titles (issue 50 item 6)
        "CBE (upper bound)     43.91 ± 0.66  53.66 ± 0.40\n"
        "Zero-shot base model         53.55             –")
    (tmp_path / "results" / "tables" / "g.md").write_text("# g\n\n| a |\n\n## Experiments\n\n| long |\n")
    assert table_text("results/tables/g.md") == "# g\n\n| a |"
    out = io.StringIO()
    print_tables(["results/tables/g.md", "models/e/student", "results/tables/none.md"], out)
    assert out.getvalue() == "\nresults/tables/g.md:\n\n# g\n\n| a |\n\n"


def test_the_lower_bound_is_named_by_its_role(tmp_path, monkeypatch):
    """The lower bound runs as a `student` job: its progress lines say lower_bound (issue 50 item 6)."""
    monkeypatch.chdir(tmp_path)
    read, write = os.pipe()
    job = progress.start("student", "artifacts/student/lee.be-1", env={progress.PROGRESS_FD_ENV: str(write)},
                         label="lower_bound")
    try:
        assert job.line().startswith("augsbert: lower_bound lee.be-1: running for ")
    finally:
        progress.stop()
        os.close(read)
        os.close(write)


def test_the_lower_bound_job_is_named_by_its_role_in_snakemakes_console(tmp_path):
    """Snakemake prints the lower bound's job as `Job N: lower_bound: ...` (the stage rules' message, formatted
    per job by augsbert.scheduling.progress.JobTitle), the other `student` job and the teacher as usual."""
    import re

    from workflow_helpers import checkout, keep_experiments, snakemake

    workdir = checkout(tmp_path)
    keep_experiments(workdir, "demo_augsbert_cbe")
    proc = snakemake(workdir, "-n", "results/demo_augsbert_cbe.json")
    assert proc.returncode == 0, proc.stderr
    console = proc.stdout + proc.stderr
    titled = re.findall(r"^Job \d+: (\S+): artifacts/(\w+)/(\S+) \(log logs/\w+/(\S+)\.log\)$", console, re.M)
    assert [(role, stage) for role, stage, _, _ in titled] == [("lower_bound", "student")]
    assert titled[0][2] == titled[0][3] and titled[0][2].startswith("lee.")
    assert len(re.findall(r"^rule student:$", console, re.M)) == 1  # the student of teacher labels
    assert len(re.findall(r"^rule teacher:$", console, re.M)) == 1


def test_job_title_is_empty_for_jobs_their_stage_names():
    from types import SimpleNamespace

    from snakemake.utils import format as snakemake_format

    nodes = {"lee.be-1": SimpleNamespace(stage="student", inputs=(("data", "lee-0"),)),
             "lee.be-2": SimpleNamespace(stage="student", inputs=(("data", "lee-0"), ("labels", "lee.l-3"))),
             "lee.cbe-4": SimpleNamespace(stage="teacher", inputs=(("data", "lee-0"),))}
    title = progress.JobTitle(nodes.__getitem__)
    message = "{JOB_TITLE:{key}/}"
    assert snakemake_format(message, JOB_TITLE=title, key="lee.be-1") == \
        "lower_bound: artifacts/student/lee.be-1 (log logs/student/lee.be-1.log)"
    assert [snakemake_format(message, JOB_TITLE=title, key=k) for k in ("lee.be-2", "lee.cbe-4", "absent")] == \
        ["", "", ""]


def test_the_estimates_files_of_runs_that_are_gone_are_swept(tmp_path):
    """A run cut off by Ctrl-C or a kill left its estimates file in .snakemake/augsbert/ (nothing removed it): the
    next run removes this host's files whose run is gone, and keeps a live run's and another host's."""
    import socket
    import subprocess
    import sys

    from augsbert.scheduling.estimate import sweep_run_estimates

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    names = [f"estimate-{host}-{gone.pid}.json", f"estimate-{host}-{os.getpid()}.json",
             f"estimate-{host}-{os.getppid()}.json", f"estimate-elsewhere-{gone.pid}.json"]
    for name in names:
        (tmp_path / name).write_text("{}\n")
    assert [p.name for p in sweep_run_estimates(tmp_path)] == [names[0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])
