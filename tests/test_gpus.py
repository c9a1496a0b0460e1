"""Several model jobs per GPU (augsbert.scheduling.gpus, augsbert.models.gpu_memory): inventory, estimates, claims, and the
workflow's packing, with a fake GPU inventory (no GPU is needed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from augsbert.scheduling import gpus
from augsbert.models.gpu_memory import DEFAULT_DIMS, estimate_mb, model_dims, parameter_count
from augsbert.scheduling.gpus import Gpu, GpuInventoryError, claim, inventory, local_gpu_resources, parse_inventory, release
from augsbert.scheduling.resources import job_gpu_mem, job_gpu_mem_mb
from workflow_helpers import checkout, keep_experiments, snakemake

# -- inventory


def test_inventory_from_the_environment():
    assert parse_inventory("0:81559,1:40960") == [Gpu("0", 81559), Gpu("1", 40960)]
    assert parse_inventory("24576, 24576") == [Gpu("0", 24576), Gpu("1", 24576)]
    assert parse_inventory("none") == parse_inventory("") == []
    with pytest.raises(GpuInventoryError, match=r"item '0:80G' is not '<index>:<MB>' or '<MB>'"):
        parse_inventory("0:80G")
    with pytest.raises(GpuInventoryError, match="names a GPU twice"):
        parse_inventory("0:100,0:100")


def test_inventory_from_nvidia_smi_keeps_to_cuda_visible_devices(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, GPU-aaa, 81559'\necho '1, GPU-bbb, 81559'\necho '2, GPU-ccc, 40960'\n")
    smi.chmod(0o755)
    env = {"PATH": str(tmp_path)}
    assert inventory(env) == [Gpu("0", 81559), Gpu("1", 81559), Gpu("2", 40960)]
    # the names CUDA_VISIBLE_DEVICES uses (index or UUID) are the names a job is given
    assert inventory({**env, "CUDA_VISIBLE_DEVICES": "2,GPU-aaa"}) == [Gpu("2", 40960), Gpu("GPU-aaa", 81559)]
    assert inventory({"PATH": str(tmp_path / "none")}) == []  # no nvidia-smi: no GPUs
    assert inventory({**env, "AUGSBERT_GPU_INVENTORY": "none"}) == []  # the environment wins


def test_global_resources_of_a_run():
    two = {"AUGSBERT_GPU_INVENTORY": "0:10000,1:20000"}
    assert local_gpu_resources({}, two) == {"gpu_mem_mb": 9500 + 19000}  # 5 % headroom per GPU
    # one model job at a time, named for what it limits: no `gpu` where there is none (issue 42)
    assert local_gpu_resources({}, {"AUGSBERT_GPU_INVENTORY": "none"}) == {"model_jobs": 1}
    assert local_gpu_resources({"model_jobs": 2}, {"AUGSBERT_GPU_INVENTORY": "none"}) == {}  # the user's own limit
    assert local_gpu_resources({"gpu": 2}, two) == {} == local_gpu_resources({"gpu_mem_mb": 5}, two)
    assert local_gpu_resources({}, {**two, "SLURM_JOB_ID": "7"}) == {"gpu": 1}  # SLURM gave this job its GPU
    assert local_gpu_resources({}, two, submits=True) == {"gpu": 1}  # a cluster run: one GPU per job


# -- estimates


def test_parameter_count_is_bert_models():
    # BertModel(config, add_pooling_layer=False) counts (sum of numel over its parameters, transformers 5):
    dims = {"hidden_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96,
            "vocab_size": 500, "max_position_embeddings": 64}
    assert parameter_count(dims) == 84144
    # bert-base-uncased: 109,482,240 with its pooler (768 x 768 + 768 = 590,592)
    assert parameter_count(DEFAULT_DIMS) == 109_482_240 - 590_592


def test_memory_estimate_by_hand():
    # BERT-base training, 16 rows x 1 sequence x 128 tokens:
    # 16 x 108,891,648 B state + 2048 tokens x 12 layers x (68 x 768 + 10 x 12 x 128) B = 3403.21 MB;
    # 600 + 1.25 x 3403.21 = 4854.0 -> 5000 MB (250 MB steps)
    assert estimate_mb(DEFAULT_DIMS, training=True, batch_size=16, sequences=1, max_length=128) == 5000
    # forward only, 64 x 128 tokens: 4 x 108,891,648 + 8192 x (20 x 768 + 4 x 12 x 128) B = 611.73 MB -> 1364.7 -> 1500
    assert estimate_mb(DEFAULT_DIMS, training=False, batch_size=64, sequences=1, max_length=128) == 1500
    # sequences longer than the model's positions are cut to them
    assert estimate_mb(DEFAULT_DIMS, training=False, batch_size=64, sequences=1, max_length=4096) == \
        estimate_mb(DEFAULT_DIMS, training=False, batch_size=64, sequences=1, max_length=512)


def test_model_dims_read_config_json(tmp_path, minilm_path):
    assert model_dims("minilm-l6")["hidden_size"] == 384 and model_dims("minilm-l6")["num_hidden_layers"] == 6
    (tmp_path / "config.json").write_text(json.dumps({"dim": 256, "n_layers": 4, "n_heads": 4, "hidden_dim": 1024}))
    assert model_dims(str(tmp_path)) == {**DEFAULT_DIMS, "hidden_size": 256, "num_hidden_layers": 4,
                                         "num_attention_heads": 4, "intermediate_size": 1024}  # DistilBERT names
    assert model_dims("someone/not-downloaded") == DEFAULT_DIMS == model_dims(None)


def _plan(monkeypatch, tmp_path, **override):
    from conftest import plan_shipped

    monkeypatch.chdir(tmp_path)  # no artifacts: estimates before anything ran
    plan = plan_shipped(override, grids=False, plan=("demo_augsbert_cbe",))
    exp = plan.experiment("demo_augsbert_cbe")
    return plan, exp.runs[exp.seeds[0]]


def test_job_estimates_follow_the_plan(tmp_path, monkeypatch):
    plan, run = _plan(monkeypatch, tmp_path)
    student, teacher, labels = run["student"], run["teacher"], run["labels"]
    # a labels job scores with its teacher's base and max_length, in its own batches, forward only
    t = plan.node(teacher).settings
    assert job_gpu_mem_mb(plan, labels) == estimate_mb(model_dims(t["model"]), training=False,
                                                       batch_size=plan.node(labels).settings["batch_size"],
                                                       sequences=1, max_length=t["max_length"])
    s = plan.node(student).settings
    assert job_gpu_mem_mb(plan, student) == estimate_mb(model_dims(s["model"]), training=True,
                                                        batch_size=s["batch_size"], sequences=2,
                                                        max_length=s["max_length"])
    assert job_gpu_mem(plan, student) == job_gpu_mem_mb(plan, student) > 0
    assert job_gpu_mem(plan, student, largest_gpu_mb=1000) == 1000  # never more than the largest GPU
    assert job_gpu_mem(plan, run["data"]) == 0  # no model, no GPU
    plan, run = _plan(monkeypatch, tmp_path, device="cpu")
    assert [job_gpu_mem(plan, key) for key in run.values()] == [0] * len(run)  # device: cpu asks for no GPU
    plan, run = _plan(monkeypatch, tmp_path, gpus=2)
    assert job_gpu_mem(plan, run["student"]) == 2 * job_gpu_mem_mb(plan, run["student"])  # one process per GPU


# -- claims


@pytest.fixture
def live_pids():
    """Processes that stand for jobs holding claims (a claim lives as long as its process)."""
    procs = []

    def start(n):
        procs.extend(subprocess.Popen(["sleep", "60"]) for _ in range(n))
        return [p.pid for p in procs[-n:]]

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_claims_spread_then_stack_then_wait_for_room(tmp_path, live_pids):
    ledger, two = tmp_path / "ledger.json", [Gpu("0", 10000), Gpu("1", 10000)]  # 9,500 MB each usable
    a, b, c, d = live_pids(4)
    # the GPU with the most room left: spread first, then stack (ties: the first GPU)
    assert [claim(ledger, two, 4000, pid=pid) for pid in (a, b, c, d)] == [["0"], ["1"], ["0"], ["1"]]
    # 1,500 MB left on each: a 2,000 MB job waits until a job on either GPU ends
    got = []
    quiet = open(os.devnull, "w")
    waiting = threading.Thread(target=lambda: got.append(claim(ledger, two, 2000, poll_s=0.02, log=quiet)), daemon=True)
    waiting.start()
    time.sleep(0.3)
    assert got == [] and waiting.is_alive()
    os.kill(b, 9)  # b's claim on GPU 1 is dropped when the ledger is next read (no release needed; not yet reaped)
    waiting.join(10)
    assert got == [["1"]]
    held = {c["pid"]: (c["gpus"], c["mem_mb"]) for c in json.loads(ledger.read_text())}
    assert held == {a: (["0"], 4000), c: (["0"], 4000), d: (["1"], 4000), os.getpid(): (["1"], 2000)}


def test_data_parallel_and_oversized_claims(tmp_path, live_pids):
    ledger, gpus_ = tmp_path / "ledger.json", [Gpu("0", 10000), Gpu("1", 20000), Gpu("2", 10000)]
    a, b = live_pids(2)
    # larger than any GPU: the whole largest GPU (the estimate is an upper bound; CUDA says if it truly does not fit)
    assert claim(ledger, gpus_, 50_000, pid=a) == ["1"]
    assert json.loads(ledger.read_text())[-1]["mem_mb"] == 19000
    assert claim(ledger, gpus_, 3000, count=2, pid=b) == ["0", "2"]  # two different GPUs with room, the roomiest first
    release(ledger, a)
    assert claim(ledger, gpus_, 3000, count=2) == ["1", "0"]
    with pytest.raises(GpuInventoryError, match="needs 4 GPUs, but 3 are visible"):
        claim(ledger, gpus_, 100, count=4)


def test_jobs_take_their_gpu_before_torch_starts(tmp_path):
    """Three real job processes of a packed run (as the rules start them): two GPUs of 10 GB, 4 GB each."""
    env = {**os.environ, "AUGSBERT_GPU_INVENTORY": "0:10000,1:10000", "AUGSBERT_GPU_LEDGER": str(tmp_path / "l.json"),
           "AUGSBERT_JOB_GPU_CLAIM": "1:4000"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    code = ("import os, sys; from augsbert.scheduling.gpus import claim_for_job; claim_for_job(); "
            "print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True); sys.stdin.read()")
    jobs, given = [], []
    for _ in range(3):  # the next job starts once this one holds its GPU (as Snakemake starts them one by one)
        jobs.append(subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True))
        given.append(jobs[-1].stdout.readline().strip())
    assert given == ["0", "1", "0"]  # spread over both GPUs, the third stacked on the roomiest
    assert len(json.loads((tmp_path / "l.json").read_text())) == 3
    for job in jobs:
        job.stdin.close()
        assert job.wait() == 0
    assert json.loads((tmp_path / "l.json").read_text()) == []  # every job released its claim on exit


def test_claim_is_skipped_where_the_scheduler_gives_gpus(tmp_path):
    base = {"AUGSBERT_GPU_INVENTORY": "0:10000", "AUGSBERT_GPU_LEDGER": str(tmp_path / "l.json"),
            "AUGSBERT_JOB_GPUS": "1", "AUGSBERT_JOB_GPU_MEM_MB": "4000"}
    assert gpus.claim_for_job({**base, "SLURM_JOB_ID": "3"}) is None  # SLURM set CUDA_VISIBLE_DEVICES itself
    assert gpus.claim_for_job({**base, "LOCAL_RANK": "1"}) is None  # a torchrun worker: its launcher claimed
    assert gpus.claim_for_job({**base, "AUGSBERT_JOB_GPUS": "0"}) is None  # a job without a GPU
    assert gpus.claim_for_job({k: v for k, v in base.items() if k != "AUGSBERT_GPU_LEDGER"}) is None  # not packed
    assert not (tmp_path / "l.json").exists()


# -- the workflow


def _gpu_mem_of_jobs(out: str) -> dict[str, list[int]]:
    """gpu_mem_mb of each job of a dry run's listing, by rule."""
    found: dict[str, list[int]] = {}
    for rule, resources in re.findall(r"rule (\w+):\n(?:.*\n)*?\s+resources: (.*)", out):
        match = re.search(r"gpu_mem_mb=(\d+)", resources)
        found.setdefault(rule, []).append(int(match.group(1)) if match else -1)
    return found


@pytest.fixture(scope="module")
def demo_checkout(tmp_path_factory):
    workdir = checkout(tmp_path_factory.mktemp("packing"))
    keep_experiments(workdir, "demo_augsbert_cbe")
    return workdir


@pytest.mark.parametrize("inventory", ["0:24576", "0:24576,1:24576"])
def test_dry_run_packs_model_jobs_onto_the_gpus(demo_checkout, inventory):
    proc = snakemake(demo_checkout, "-n", "results/demo_augsbert_cbe.json",
                     env={"AUGSBERT_GPU_INVENTORY": inventory, "AUGSBERT_DEVICE": "auto"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    limit = int(re.search(r"model jobs share the GPUs by memory: .* gpu_mem_mb=(\d+)", out).group(1))
    assert limit == int(0.95 * 24576) * inventory.count(":")
    needs = _gpu_mem_of_jobs(out)
    assert needs["data"] == [0] and needs["collect_results"] == [-1]  # no model, no GPU memory
    model_jobs = sorted(n for rule, values in needs.items() if rule not in ("data", "collect_results") for n in values)
    assert all(0 < n <= int(0.95 * 24576) for n in model_jobs)
    # Snakemake starts jobs while their gpu_mem_mb fits in the limit: this many at once, at the least
    at_once = max(k for k in range(1, len(model_jobs) + 1) if sum(sorted(model_jobs, reverse=True)[:k]) <= limit)
    assert at_once >= (3 if inventory.count(":") == 1 else 6), (model_jobs, limit)
    # each job passes its claim to the command (augsbert.scheduling.gpus.claim_for_job)
    assert re.search(r" AUGSBERT_JOB_GPU_CLAIM=1:\d+ augsbert teacher", out)


def test_dry_run_without_packing(demo_checkout):
    for env, args in (({"AUGSBERT_GPU_INVENTORY": "none"}, ()),  # no GPU: one model job at a time, as before
                      ({"AUGSBERT_GPU_INVENTORY": "0:24576"}, ("--resources=gpu=1",)),  # the user's limit
                      ({"AUGSBERT_GPU_INVENTORY": "0:24576"}, ("--config", "device=cpu"))):
        proc = snakemake(demo_checkout, "-n", "results/demo_augsbert_cbe.json", *args, env=env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert ("share the GPUs" in out) == (args == ("--config", "device=cpu")), args
        if not args:  # issue 42: no GPU: no job shows a GPU token; the one-at-a-time limit is model_jobs
            assert "model_jobs=1" in out.split("rule teacher:")[1].split("Shell command")[0]
            assert not re.search(r"\bgpu(_mem_mb)?=|AUGSBERT_JOB_GPU", out), out
        if args[-1:] == ("device=cpu",):  # packing is on, but no job asks for a GPU or its memory
            assert set(re.findall(r"gpu=(\d+), gpu_mem_mb=(\d+)", out)) == {("0", "0")}


def test_the_claim_a_rule_writes_is_one_shell_word_and_no_rerun_trigger():
    """Issue 42: `AUGSBERT_JOB_GPU_CLAIM=<gpus>:<MB>` in a packed run, nothing elsewhere; a type of its own, which
    Snakemake's params rerun trigger leaves out (so packing or not never reruns a finished job)."""
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase as Persistence
    from snakemake.utils import format as snakemake_format

    assert snakemake_format("{c:q} augsbert", c=gpus.JobClaim(1, 4000)) == "AUGSBERT_JOB_GPU_CLAIM=1:4000 augsbert"
    assert snakemake_format("{c:q} augsbert", c=gpus.JobClaim()) == " augsbert"
    assert Persistence._serialize_param_builtin(None, gpus.JobClaim(1, 4000)) is UNREPRESENTABLE
