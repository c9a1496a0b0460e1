"""Cluster use: job sizes from the plan, the SLURM profile template and what it asks the cluster
(augsbert.scheduling.slurm, with a fake `subprocess.run`), `augsbert fetch`, and the demo through a fake SLURM
(sbatch / squeue / sacct / srun / scancel / sinfo / sacctmgr scripts on PATH that record what they are asked
and run the jobs locally) for the GPU lines a real GPU-less cluster cannot show (tests/test_slurm.py runs the
profile against a real one)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from augsbert.config.load import prepare_config, read_config
from augsbert.models import ModelResolutionError
from augsbert.plan import Plan
from augsbert.scheduling.resources import cluster_placement, job_resources, mem_mb, profile_value, runtime_minutes
from augsbert.scheduling.slurm import CPUS_ENV, PARTITION_CPUS_ENV, PROFILE_ENV, STATUS_ENV
from conftest import REPO

CLUSTER_ENV = {"AUGSBERT_SLURM_ACCOUNT": "proj42", "AUGSBERT_SLURM_PARTITION": "cpu_part",
               "AUGSBERT_SLURM_GPU_PARTITION": "gpu_part", "AUGSBERT_SLURM_GPU_MODEL": "a100",
               "AUGSBERT_SLURM_QOS": "normal"}


def repo_config(keep: tuple[str, ...] = (), **experiments) -> dict:
    """The repository's config with only the Lee corpus, the experiments `keep` and the new `experiments`
    (planning every configured experiment would cost each test seconds)."""
    config = read_config(REPO / "config" / "config.yaml")
    config["datasets"] = {"lee": config["datasets"]["lee"]}
    config["experiments"] = {**{name: config["experiments"][name] for name in keep}, **experiments}
    config["grids"] = {}
    return prepare_config(config)


def roles(plan: Plan, experiment: str) -> dict[str, str]:
    exp = plan.experiment(experiment)
    return exp.runs[exp.seeds[0]]


# -- sizes

def test_runtime_and_memory_formula():
    # a 5-epoch student over 100k pairs: 2 x (300 s + 500,000 x 0.01 s) = 10,600 s -> 177 min
    assert runtime_minutes("student", 5 * 100_000) == 177
    assert runtime_minutes("student", 300) == 30  # the demo: the 30-minute floor
    assert runtime_minutes("teacher", 10**9) == 2880  # the 48-hour cap
    assert mem_mb("student", 300) == 16000  # 0.6 MB of pairs: within the base figure
    assert mem_mb("candidates", 1_000_000) == 4000 + 8000  # BM25 postings + embeddings, whole GB
    assert mem_mb("tables", 0) == 2000


def test_job_sizes_follow_the_plan_and_the_data_artifact(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no artifacts yet: estimates from the dataset table
    big = {"dataset": "lee", "models": ["teacher", "student"], "teacher": {"epochs": 1},
           "student": {"epochs": 5}, "candidates": {"strategies": ["bm25"], "pool": "train+unlabeled", "top_k": 1},
           "seeds": [1]}
    plan = Plan(repo_config(big=big))
    run = roles(plan, "big")
    env = {}
    assert job_resources(plan, run["teacher"], env) == {
        "runtime": 30, "mem_mb": 16000, "cpus_per_task": 4, "gpu": 1, "slurm_partition": None, "gpu_model": None}
    # BM25 runs on CPU: no GPU, the CPU partition
    assert job_resources(plan, run["candidates"], CLUSTER_ENV) == {
        "runtime": 30, "mem_mb": 4000, "cpus_per_task": 2, "gpu": 0, "slurm_partition": "cpu_part", "gpu_model": None}
    # the student's pairs before sampling ran: 300 gold + (2 x 300 + 300 pool sentences) x top_k 1 = 1,200, x 5 epochs
    assert job_resources(plan, run["student"], CLUSTER_ENV) == {
        "runtime": 30, "mem_mb": 16000, "cpus_per_task": 4, "gpu": 1, "slurm_partition": "gpu_part",
        "gpu_model": "a100"}

    # once the data job has run its counts are used: 100k train pairs, no unlabeled sentences
    data = Path(plan.nodes[run["data"]].path)
    data.mkdir(parents=True)
    (data / "metrics.json").write_text(json.dumps({"sizes": {"train": 100_000, "dev": 10, "test": 10, "unlabeled": 0}}))
    candidates = Path(plan.nodes[run["candidates"]].path)
    candidates.mkdir(parents=True)
    (candidates / "metrics.json").write_text(json.dumps({"candidates": {"bm25": 0}}))
    # student: 100k gold pairs x 5 epochs -> 177 min; 100k x 0.002 MB = 200 MB -> +1 GB
    assert job_resources(plan, run["student"], env) == {
        "runtime": 177, "mem_mb": 17000, "cpus_per_task": 4, "gpu": 1, "slurm_partition": None, "gpu_model": None}
    # teacher: 100k x 1 epoch x 0.02 s = 2,000 s -> 2 x 2,300 s = 77 min
    assert job_resources(plan, run["teacher"], env)["runtime"] == 77
    # resubmitted (the profile's `retries`): attempt 2 and 3 get 2 and 3 times the time, nothing else changes
    second = job_resources(plan, run["teacher"], env, attempt=2)
    assert second == {**job_resources(plan, run["teacher"], env), "runtime": 154}
    assert job_resources(plan, run["teacher"], env, attempt=3)["runtime"] == 231
    # sampling from 200k sentences: 2 x (300 + 400 s) -> 24 min -> floor 30; 1.6 GB of index; 4 CPUs
    assert job_resources(plan, run["candidates"], env) == {
        "runtime": 30, "mem_mb": 6000, "cpus_per_task": 4, "gpu": 0, "slurm_partition": None, "gpu_model": None}


def test_device_cpu_jobs_ask_for_no_gpu(tmp_path, monkeypatch):
    """Issue 25/30: under `device: cpu` a model job held the profile's one GPU slot (one model job at a time on a
    CPU machine) and asked SLURM for a GPU (sbatch refused it on a GPU-less node)."""
    monkeypatch.chdir(tmp_path)
    exp = read_config(REPO / "config" / "config.yaml")["experiments"]["demo_augsbert_cbe"]
    sharded = {**exp, "candidates": {**exp["candidates"], "shards": 2}}
    for device, gpu in (("auto", 1), ("cuda:0", 1), ("cpu", 0)):
        plan = Plan(prepare_config({**repo_config(keep=("demo_augsbert_cbe",), sharded=sharded), "device": device}))
        run, shards = roles(plan, "demo_augsbert_cbe"), roles(plan, "sharded")
        for role in ("zero_shot", "teacher", "student", "candidates", "labels"):
            res = job_resources(plan, run[role], CLUSTER_ENV)
            assert res["gpu"] == gpu, (device, role)
            assert res["slurm_partition"] == ("gpu_part" if gpu else "cpu_part"), (device, role)
            assert res["gpu_model"] == ("a100" if gpu else None), (device, role)
        assert job_resources(plan, shards["pool_index"], CLUSTER_ENV)["gpu"] == gpu  # fixed sizes, the same rule
        assert job_resources(plan, shards["label_shard_0"], CLUSTER_ENV)["gpu"] == gpu


def test_semantic_search_sampling_asks_for_a_gpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = Plan(repo_config(keep=("demo_augsbert_cbe",)))
    res = job_resources(plan, roles(plan, "demo_augsbert_cbe")["candidates"], {"AUGSBERT_SLURM_PARTITION": "p1"})
    assert (res["gpu"], res["slurm_partition"], res["gpu_model"]) == (1, "p1", None)  # no GPU partition: the partition
    # sharded (candidates.shards: 2): the merge of the shards encodes nothing, so it runs on CPU (the shared
    # index, stage pool_index, asks for its GPU itself)
    exp = read_config(REPO / "config" / "config.yaml")["experiments"]["demo_augsbert_cbe"]
    plan = Plan(repo_config(sharded={**exp, "candidates": {**exp["candidates"], "shards": 2}}))
    assert job_resources(plan, roles(plan, "sharded")["candidates"], {})["gpu"] == 0


def test_placement_falls_back_to_the_default_partition_and_leaves_unset_values_out(monkeypatch):
    assert cluster_placement(True, {"AUGSBERT_SLURM_GPU_PARTITION": " ", "AUGSBERT_SLURM_GPU_MODEL": ""}) == {
        "slurm_partition": None, "gpu_model": None}
    assert cluster_placement(False, CLUSTER_ENV) == {"slurm_partition": "cpu_part", "gpu_model": None}
    # a rule's slurm_partition replaces default-resources', so a profile's default is passed on
    assert cluster_placement(True, {}, default_partition="gpu") == {"slurm_partition": "gpu", "gpu_model": None}
    assert cluster_placement(False, {}, default_partition="gpu")["slurm_partition"] == "gpu"
    monkeypatch.setenv("MY_PARTITION", "p2")
    assert [profile_value(raw) for raw in ("'cpu_part'", "gpu-a100", "$MY_PARTITION", "''", None)] == [
        "cpu_part", "gpu-a100", "p2", None, None]


# -- profile

def parse_profile(monkeypatch, env: dict) -> dict:
    from snakemake.profiles import ProfileConfigFileParser

    for name in [*CLUSTER_ENV, "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", STATUS_ENV, CPUS_ENV, PARTITION_CPUS_ENV,
                 PROFILE_ENV]:
        monkeypatch.setenv(name, "")  # recorded, so what the profile sets is undone after the test
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with open(REPO / "profiles" / "slurm" / "config.yaml") as stream:
        return dict(ProfileConfigFileParser().parse(stream))


def test_slurm_profile_reads_the_cluster_from_the_environment(monkeypatch):
    profile = parse_profile(monkeypatch, CLUSTER_ENV)
    assert profile["executor"] == "slurm" and profile["slurm-qos"] == "normal" and profile["jobs"] == "50"
    assert profile["default-resources"] == ["runtime=60", "mem_mb=4000", "slurm_account='proj42'",
                                            "slurm_partition='cpu_part'"]
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"  # jobs run offline
    # nothing set: nothing invented (the plugin guesses the account, SLURM picks its default partition)
    profile = parse_profile(monkeypatch, {"HF_HUB_OFFLINE": "0"})
    assert "slurm-qos" not in profile and profile["default-resources"] == ["runtime=60", "mem_mb=4000"]
    assert os.environ["HF_HUB_OFFLINE"] == "0"  # an explicit choice is kept


def fake_run(answers: dict[str, tuple[int, str]], calls: list | None = None):
    """subprocess.run as augsbert.scheduling.slurm calls it, answering by program (`scontrol`, `sinfo`, ...): (exit code,
    output); a program not in `answers` is missing."""
    def run(argv, **kwargs):
        if calls is not None:
            calls.append(argv)
        if argv[0] not in answers:
            raise FileNotFoundError(argv[0])
        code, out = answers[argv[0]]
        if code == "timeout":
            raise subprocess.TimeoutExpired(argv, kwargs.get("timeout"))
        return subprocess.CompletedProcess(argv, code, out, "")
    return run


def test_status_command_follows_accounting_or_the_environment():
    from augsbert.scheduling.slurm import SlurmSettingError, status_command

    calls = []
    assert status_command({}, fake_run({"sacct": (0, ""), "squeue": (0, "")}, calls)) == "sacct"
    # the probe is shaped like the plugin's own status query (so a sacct that answers it answers the plugin)
    assert calls[0][:5] == ["sacct", "-X", "--parsable2", "--noheader", "--format=JobIdRaw,State"]
    assert calls[0][-2:] == ["--name", "augsbert-probe"]
    assert status_command({}, fake_run({"sacct": (1, ""), "squeue": (0, "")})) == "squeue"  # accounting off
    assert status_command({}, fake_run({"sacct": ("timeout", ""), "squeue": (0, "")})) == "squeue"
    assert status_command({}, fake_run({"squeue": (0, "")})) == "squeue"  # no sacct program
    assert status_command({}, fake_run({"sacct": (1, ""), "squeue": (1, "")})) is None  # no cluster here
    calls = []
    assert status_command({"AUGSBERT_SLURM_STATUS": " squeue "}, fake_run({}, calls)) == "squeue" and not calls
    with pytest.raises(SlurmSettingError, match="AUGSBERT_SLURM_STATUS='qstat': use one of sacct, squeue"):
        status_command({"AUGSBERT_SLURM_STATUS": "qstat"}, fake_run({}))


SCONTROL_PARTITIONS = (
    "PartitionName=cpu AllowGroups=ALL Default=YES MaxCPUsPerNode=UNLIMITED Nodes=c[1-2] State=UP TotalCPUs=96\n"
    "PartitionName=gpu AllowGroups=ALL Default=NO MaxCPUsPerNode=16 Nodes=g1,c2 State=UP TotalCPUs=64\n"
    "PartitionName=empty Default=NO Nodes=(null) State=UP\n")
SINFO_NODES = "cpu|32\ncpu|64\ngpu|32\ngpu|64\n"  # sinfo -N: one line per node and partition


def test_partition_cpus_are_what_one_job_can_get():
    from augsbert.scheduling.slurm import format_partition_cpus, parse_partition_cpus, partition_cpus

    offer = partition_cpus(fake_run({"scontrol": (0, SCONTROL_PARTITIONS), "sinfo": (0, SINFO_NODES)}))
    # the largest node, at most MaxCPUsPerNode; the default partition also as "*"; no nodes, no entry
    assert offer == {"cpu": 64, "*": 64, "gpu": 16}
    assert parse_partition_cpus(format_partition_cpus(offer)) == offer
    assert partition_cpus(fake_run({"scontrol": (1, ""), "sinfo": (0, SINFO_NODES)})) == {}
    assert partition_cpus(fake_run({})) == {}


def test_configure_exports_the_partitions_for_the_jobs():
    from augsbert.scheduling.slurm import SlurmSettingError, configure

    run = fake_run({"sacct": (1, ""), "squeue": (0, ""), "scontrol": (0, SCONTROL_PARTITIONS),
                    "sinfo": (0, SINFO_NODES)})
    env = {}
    assert configure(env, run) == "squeue"
    assert env == {"AUGSBERT_SLURM_PARTITION_CPUS": "cpu=64,*=64,gpu=16", "AUGSBERT_SLURM_PROFILE": "1"}
    env = {"AUGSBERT_SLURM_PARTITION_CPUS": "cpu=8"}  # set already (by you, over what sinfo says): kept
    configure(env, run)
    assert env["AUGSBERT_SLURM_PARTITION_CPUS"] == "cpu=8"
    with pytest.raises(SlurmSettingError, match="AUGSBERT_SLURM_CPUS='four'"):
        configure({"AUGSBERT_SLURM_CPUS": "four"}, run)


def test_s1_sbatch_without_a_controller_stops_with_a_message():
    """Issue 49 S1: on a host with sbatch but no controller the profile's run hung for 12+ minutes."""
    from augsbert.scheduling.slurm import SlurmSettingError, configure

    calls = []
    run = fake_run({"sbatch": (0, "slurm 24.11.5"), "sacct": ("timeout", ""), "squeue": ("timeout", ""),
                    "scontrol": ("timeout", ""), "sinfo": ("timeout", "")}, calls)
    with pytest.raises(SlurmSettingError, match=r"^profiles/slurm: sbatch is installed here, but no SLURM controller "
                                                r"answers \(squeue and sacct failed or gave no answer within 30 s\)"):
        configure({}, run)
    assert [argv[0] for argv in calls] == ["sacct", "squeue", "sbatch"]  # nothing submitted, no partition probe
    env = {}
    assert configure(env, fake_run({"sacct": (1, ""), "squeue": (1, "")})) is None  # no SLURM here at all: as before


def test_cpu_limit_and_threads(tmp_path, monkeypatch):
    from augsbert.scheduling.slurm import SlurmSettingError, cpu_limit, job_threads

    env = {"AUGSBERT_SLURM_PARTITION_CPUS": "cpu=64,*=64,gpu=2"}
    assert [cpu_limit(4, p, env) for p in ("gpu", "cpu", None, "other")] == [2, 4, 4, 4]
    assert [cpu_limit(4, p, {**env, "AUGSBERT_SLURM_CPUS": "3"}) for p in ("gpu", "cpu")] == [2, 3]
    assert cpu_limit(4, "cpu", {}) == 4  # nothing known, nothing capped
    with pytest.raises(SlurmSettingError, match="AUGSBERT_SLURM_CPUS='0': give a whole number of CPUs, 1 or more"):
        cpu_limit(4, None, {"AUGSBERT_SLURM_CPUS": "0"})
    # threads: the stage's own outside the profile; under it the job's CPUs (fixed-size stages: theirs, capped)
    sized = {"cpus_per_task": 3, "slurm_partition": "gpu"}
    assert job_threads(2, sized, env) == 2
    on_slurm = {**env, "AUGSBERT_SLURM_PROFILE": "1"}
    assert job_threads(2, sized, on_slurm) == 3
    assert job_threads(4, {"cpus_per_task": None, "slurm_partition": "gpu"}, on_slurm) == 2

    # the job sizes: a GPU job (4 CPUs planned) in a 2-CPU GPU partition asks 2
    monkeypatch.chdir(tmp_path)
    plan = Plan(repo_config(keep=("demo_zeroshot",)))
    run = roles(plan, "demo_zeroshot")
    cluster = {**CLUSTER_ENV, "AUGSBERT_SLURM_PARTITION_CPUS": "cpu_part=8,gpu_part=2"}
    assert job_resources(plan, run["zero_shot"], CLUSTER_ENV)["cpus_per_task"] == 4
    assert job_resources(plan, run["zero_shot"], cluster)["cpus_per_task"] == 2
    assert job_resources(plan, run["data"], {**cluster, "AUGSBERT_SLURM_CPUS": "1"})["cpus_per_task"] == 1


def test_group_errors_show_the_executor_message(caplog):
    """Snakemake 9 drops the message of a failed group job (sbatch's refusal); the profile logs it."""
    from types import SimpleNamespace

    from snakemake.jobs import GroupJob

    from augsbert.scheduling.slurm import show_group_error_messages

    original = GroupJob.log_error
    try:
        show_group_error_messages()
        patched = GroupJob.log_error
        show_group_error_messages()  # once per process
        assert GroupJob.log_error is patched
        group = SimpleNamespace(groupid="evaluation", jobs=[])
        with caplog.at_level("ERROR"):
            GroupJob.log_error(group, msg="SLURM sbatch failed. The error message was 'sbatch: error: X'")
            GroupJob.log_error(group)
        messages = [r.getMessage() for r in caplog.records]
        assert messages == ["Error in group evaluation: SLURM sbatch failed. The error message was "
                            "'sbatch: error: X'", "Error in group evaluation", "Error in group evaluation"]
    finally:
        GroupJob.log_error = original


def test_workflow_profile_keeps_no_cluster_settings():
    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    # keys of the workflow profile override a global profile's: default-resources would drop the account
    assert not {"default-resources", "executor", "slurm_account", "slurm_partition"} & set(profile)


# -- fetch

def test_fetch_lists_exactly_the_hub_models_and_datasets(tmp_path, monkeypatch, capsys):
    from augsbert.models import fetch as fetch_module

    monkeypatch.chdir(tmp_path)
    hub = {"dataset": "lee", "base_model": "google-bert/bert-base-uncased", "models": ["zero_shot", "teacher", "student"],
           "teacher": {"base_model": "cross-encoder/stsb-distilroberta-base"},
           "candidates": {"strategies": ["semantic_search"], "pool": "train+unlabeled", "semantic_model": "minilm-l6"},
           "suite": {"suites": ["sts"], "sts_tasks": ["sts12", "stsb"], "sts_hub": True}, "seeds": [1]}
    config = repo_config(hub=hub)
    config["hub_revisions"] = {"cross-encoder/stsb-distilroberta-base": "v1"}
    plan = Plan(config)
    calls = []
    items = fetch_module.fetch(plan, "hub", download=lambda item: calls.append(item) or f"/cache/{item.repo_id}")
    assert [(i.repo_type, i.repo_id, i.revision) for i in calls] == [
        ("dataset", "mteb/sts12-sts", None), ("dataset", "mteb/stsbenchmark-sts", None),
        ("model", "cross-encoder/stsb-distilroberta-base", "v1"), ("model", "google-bert/bert-base-uncased", None)]
    assert items == calls
    assert "model google-bert/bert-base-uncased: /cache/google-bert/bert-base-uncased" in capsys.readouterr().out

    # no network: one message naming the model
    def offline(item):
        raise OSError("Cannot reach https://huggingface.co: offline")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelResolutionError) as err:
        fetch_module.fetch(Plan(repo_config(only=dict(hub, suite={"suites": []}))), "only", download=offline)
    assert str(err.value).startswith("cannot download model 'cross-encoder/stsb-distilroberta-base' from the Hugging "
                                     "Face hub (OSError: Cannot reach https://huggingface.co: offline)")
    assert str(err.value).endswith("HF_HUB_OFFLINE is set here: unset it for the download")


def test_fetch_command_for_a_local_experiment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(repo_config(keep=("demo_zeroshot",))))
    proc = subprocess.run([sys.executable, "-m", "augsbert", "fetch", "--experiment", "demo_zeroshot"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "experiment 'demo_zeroshot' needs nothing from the Hugging Face hub (local models and data only)\n"
    proc = subprocess.run([sys.executable, "-m", "augsbert", "fetch", "--experiment", "nope"], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("augsbert fetch: error: unknown experiment 'nope'")


# -- a run through a fake SLURM

FAKE_SBATCH = """
import fcntl, json, os, subprocess, sys
state = os.environ["FAKE_SLURM_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "next_id"), "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)  # the plugin submits from two threads at once
    f.seek(0)
    job_id = int(f.read() or 1000) + 1
    f.seek(0); f.truncate(); f.write(str(job_id)); f.flush()
def value(flag):
    return args[args.index(flag) + 1] if flag in args else None
wrap = next(a[len("--wrap="):] for a in args if a.startswith("--wrap="))
with open(os.path.join(state, "sbatch.jsonl"), "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.write(json.dumps({"id": job_id, "argv": args}) + "\\n")
with open(os.path.join(state, f"{job_id}.name"), "w") as f:
    f.write(value("--job-name"))
log = value("--output").replace("%j", str(job_id))
env = {**os.environ, "SLURM_JOB_ID": str(job_id)}
script = f"{wrap}\\necho $? > {state}/{job_id}.rc.tmp && mv {state}/{job_id}.rc.tmp {state}/{job_id}.rc"
job = subprocess.Popen(["sh", "-c", script], cwd=value("-D"), env=env, stdout=open(log, "w"),
                       stderr=subprocess.STDOUT, start_new_session=True)
with open(os.path.join(state, f"{job_id}.pid"), "w") as f:
    f.write(str(job.pid))  # its own process group: the test stops what is left of it
print(job_id)
"""

FAKE_STATUS = """
import glob, os, sys
state = os.environ["FAKE_SLURM_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "status.log"), "a") as f:
    f.write(os.path.basename(sys.argv[0]) + " " + " ".join(args) + "\\n")
if "--name" not in args:
    sys.exit(0)  # accounting lookups (reasons, account guesses): nothing to add
name = args[args.index("--name") + 1]
for path in sorted(glob.glob(os.path.join(state, "*.name"))):
    job_id = os.path.basename(path)[:-5]
    if open(path).read() != name:
        continue
    rc = os.path.join(state, job_id + ".rc")
    status = ("COMPLETED" if open(rc).read().strip() == "0" else "FAILED") if os.path.exists(rc) else "RUNNING"
    print(f"{job_id}|{status}")
"""

FAKE_SRUN = """
import os, sys
args = sys.argv[1:]
with open(os.path.join(os.environ["FAKE_SLURM_STATE"], "srun.log"), "a") as f:
    f.write(" ".join(a for a in args if a.startswith("-")) + "\\n")
while args and args[0].startswith("-"):
    args.pop(0)
os.execvp(args[0], args)
"""


def fake_slurm(bin_dir: Path) -> None:
    scripts = {"sbatch": FAKE_SBATCH, "sacct": FAKE_STATUS, "squeue": FAKE_STATUS, "srun": FAKE_SRUN,
               "scancel": "import sys\n", "sinfo": "print('PARTITION')\nprint('cpu_part*')\nprint('gpu_part')\n",
               "sacctmgr": "print('proj42')\n"}
    bin_dir.mkdir()
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{textwrap.dedent(body)}")
        path.chmod(0o755)


def submitted(state: Path) -> dict[str, list[str]]:
    """sbatch argument lists by rule (group jobs by group name), from the log directory the plugin names
    rule_<rule>/<wildcards>/%j.log or group_<group>_<its rules>/%j.log."""
    lines = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    by_rule = {}
    for line in lines:
        log_dir = Path(line["argv"][line["argv"].index("--output") + 1]).relative_to(state.parent / "work")
        kind, _, name = log_dir.parts[2].partition("_")  # .snakemake/slurm_logs/<kind>_<name>/...
        rule = name if kind == "rule" else name.split("_")[0]
        by_rule.setdefault(rule, []).append(line["argv"])
    return by_rule


def flag(argv: list[str], name: str) -> str | None:
    """Value of `name` in an sbatch argument list (`-p x` or `--gpus=x` forms), None if absent."""
    for i, arg in enumerate(argv):
        if arg == name:
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


@pytest.fixture
def stop_fake_jobs(tmp_path):
    """After the test, stop the process group of every fake job that has not finished (a failed run leaves some)."""
    yield
    import signal

    for pid_file in (tmp_path / "state").glob("*.pid"):
        if not pid_file.with_suffix(".rc").exists():
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.mark.workflow
def test_gpu_partition_and_model_on_the_sbatch_line(tmp_path, tiny_model, stop_fake_jobs):
    """What the real single-node cluster of tests/test_slurm.py cannot show, having no GPU: a GPU job's partition
    and GPU model on its sbatch line, with the account and QOS of the environment. The demo's zero-shot
    evaluation (a group job) goes through the profile with the fake SLURM; its data job runs locally before."""
    from workflow_helpers import snakemake

    work = tmp_path / "work"
    work.mkdir()
    for item in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / item, work / item)
    shutil.rmtree(work / "config" / "grids")  # the shipped grids need datasets this config drops
    fake_slurm(tmp_path / "bin")
    state = tmp_path / "state"
    state.mkdir()
    # only what the run needs: every job starts Snakemake twice (the plugin's sbatch --wrap runs its jobstep
    # executor, which runs each rule with `srun python -m snakemake`), and each start plans the config
    config = read_config(REPO / "config" / "config.yaml")
    config["defaults"]["base_model"] = tiny_model
    config["datasets"] = {"lee": config["datasets"]["lee"]}
    config["experiments"] = {"demo_zeroshot": {**config["experiments"]["demo_zeroshot"],
                                               "suite": {"suites": []}}}
    config["grids"] = {}
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    plan = Plan(prepare_config(config))
    local = snakemake(work, "--cores", "1", plan.nodes[roles(plan, "demo_zeroshot")["data"]].path)
    assert local.returncode == 0, local.stdout + local.stderr[-4000:]
    env = {**os.environ, **CLUSTER_ENV, "FAKE_SLURM_STATE": str(state),
           "PATH": f"{tmp_path / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "OMP_WAIT_POLICY": "PASSIVE"}  # idle OpenMP threads sleep instead of spinning on a shared core
    env.pop("HF_HUB_OFFLINE", None)  # the profile sets it for the jobs
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "--slurm-init-seconds-before-status-checks",
         "1", "--slurm-keep-successful-logs", "results/demo_zeroshot.json"],
        cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    assert json.loads((work / "results" / "demo_zeroshot.json").read_text())["experiment"] == "demo_zeroshot"

    jobs = submitted(state)
    # results are a local rule; the zero-shot evaluation goes as a group job (group-components: evaluation)
    assert {rule: len(argvs) for rule, argvs in jobs.items()} == {"evaluation": 1}
    group = jobs["evaluation"][0]
    wrap = next(a for a in group if a.startswith("--wrap="))
    assert [t.strip("'").split(":")[0] for t in wrap.split("--target-jobs ")[1].split(" --")[0].split()] == \
        ["zero_shot"]
    assert (flag(group, "-p"), flag(group, "--gpus"), flag(group, "-t"), flag(group, "--mem")) == \
        ("gpu_part", "a100:1", "30", "8000")
    assert (flag(group, "-A"), flag(group, "--qos"), flag(group, "--cpus-per-task")) == ("proj42", "normal", "4")
    # inside the job the plugin's jobstep runs the rule with srun, on the job's GPU
    assert "--gpus=1" in (state / "srun.log").read_text()
