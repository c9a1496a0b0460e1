"""The estimate before a run (issue 50): per job its steps and time on this machine, from the files' own row
counts before the data job has run (augsbert.scheduling.estimate, augsbert.stages.sizes.counted_sizes)."""

import math

import pytest

from augsbert.config.load import load_configs
from augsbert.face.cli import main
from augsbert.planning.plan import Plan
from augsbert.scheduling import estimate
from augsbert.stages import sizes
from conftest import REPO


def own_data(tmp_path, teacher="{arch: cbe, epochs: 1, batch_size: 16}", sizes=(4000, 500, 300, 50)):
    """A generated 4K-pair dataset of one's own (the own-data page's layout) and its experiment."""
    for split, n in zip(("train", "dev", "test"), sizes):
        rows = [f"sentence {split} {i} a,other sentence {i} b,{i % 6}" for i in range(n)]
        (tmp_path / f"{split}.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    (tmp_path / "unlabeled.txt").write_text("".join(f"an unlabeled sentence {i}\n" for i in range(sizes[3])))
    (tmp_path / "my.yaml").write_text(f"""
device: cpu
datasets:
  mine:
    loader: pairs_file
    train: {tmp_path}/train.csv
    dev: {tmp_path}/dev.csv
    test: {tmp_path}/test.csv
    unlabeled: {tmp_path}/unlabeled.txt
    score_range: [0, 5]
experiments:
  mine_augsbert:
    dataset: mine
    models: [lower_bound, teacher, student]
    teacher: {teacher}
    student: {{epochs: 2, batch_size: 16, max_steps: 70}}
    candidates: {{strategies: [bm25], pool: train+unlabeled, top_k: 1}}
    evaluation: {{suites: []}}
""")
    return str(tmp_path / "my.yaml")


def planned(config):
    plan = Plan(load_configs([config], lazy=True))
    return plan, plan.experiment_spec("mine_augsbert")["runs"]["42"]


def test_a_datasets_rows_are_counted_before_its_data_job(tmp_path):
    plan, runs = planned(own_data(tmp_path))
    from augsbert.stages.sizes import data_sizes, split_sizes

    data = plan.node(runs["data"]["key"])
    assert split_sizes(data) == {"train": 4000, "dev": 500, "test": 300, "unlabeled": 50}
    assert data_sizes(data) == {"train": 4000, "unlabeled": 50}  # the jobs' runtime sizes read them too


def test_steps_and_seconds_of_each_job(tmp_path):
    plan, runs = planned(own_data(tmp_path))
    size = estimate.model_params("minilm-l6") / estimate.REFERENCE_PARAMS
    assert 0.9 < size < 1.1  # the packaged model is the reference
    teacher = estimate.job_estimate(plan, runs["teacher"]["key"], "cpu")
    assert teacher.steps == math.ceil(2 * 4000 / 16) == 500  # symmetric: both orders of each pair
    # the texts: 'sentence train 12 a' / 'other sentence 12 b' -> the train file's bytes per row, less the score
    # field, over 2 texts; a CBE reads both as one sequence (+3 special tokens), capped at max_length (512)
    rows = (tmp_path / "train.csv").read_text().splitlines()[1:]
    text = ((tmp_path / "train.csv").stat().st_size / len(rows) - sizes.SCORE_FIELD_CHARS) / 2 / 4.0
    assert estimate.text_tokens(plan, plan.node(runs["teacher"]["key"])) == pytest.approx(text)
    tokens = 2 * text + 3
    per_example = (estimate.TRAIN_S_PER_EXAMPLE + estimate.TRAIN_S_PER_TOKEN * tokens) * (1 + estimate.SMALL_BATCH / 16)
    per_pair = estimate.SCORE_S_PER_PAIR + estimate.SCORE_S_PER_TOKEN * tokens
    assert teacher.seconds == pytest.approx(estimate.START_S + size * (500 * 16 * per_example + (500 + 300) * per_pair))
    warm = estimate.job_estimate(plan, runs["teacher"]["key"], "cpu", warm=True)
    assert teacher.seconds - warm.seconds == pytest.approx(estimate.START_S - estimate.WARM_START_S)
    assert teacher.what == "500 steps of 16; scoring 800 dev/test pairs"
    student = estimate.job_estimate(plan, runs["student"]["key"], "cpu")
    assert student.steps == 70 and student.what == "70 steps of 16; scoring 800 dev/test pairs"  # one pass of 12,050
    # a Bi-Encoder encodes each text alone: 2 x (text + 2) tokens; the labels are the teacher's (a pair model)
    student_node, labels_node = plan.node(runs["student"]["key"]), plan.node(runs["labels"]["key"])
    assert estimate.example_tokens(plan, student_node, text) == pytest.approx(2 * (text + 2))
    assert estimate.example_tokens(plan, labels_node, text) == pytest.approx(tokens)
    assert estimate.example_tokens(plan, labels_node, 400.0) == 512  # capped at the teacher's max_length
    gpu = estimate.job_estimate(plan, runs["teacher"]["key"], "gpu")
    assert gpu.seconds - estimate.START_S == pytest.approx((teacher.seconds - estimate.START_S) / estimate.GPU_SPEEDUP)
    one_order, runs = planned(own_data(tmp_path, "{arch: cbe, epochs: 1, batch_size: 16, symmetric: false}"))
    assert estimate.job_estimate(one_order, runs["teacher"]["key"], "cpu").steps == 250


def test_plan_estimate_prints_each_job_and_the_total(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("AUGSBERT_WARM", raising=False)  # a local run's jobs start warm: so does the estimate
    assert main(["plan", "--config", own_data(tmp_path), "--experiment", "mine_augsbert", "--estimate"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("augsbert: estimate for"):].splitlines()
    assert block[0] == ("augsbert: estimate for 6 job(s) on this CPU, warm job starts (model size x pairs x "
                        "tokens, not a calibration):")
    assert [line.split()[0] for line in block[1:]] == ["data", "candidates", "teacher", "labels", "lower_bound",
                                                       "student", "total"]
    assert "500 steps of 16" in block[3] and "scoring 12,050 pairs" in block[4]  # 8,050 silver + 4,000 gold
    plan, runs = planned(str(tmp_path / "my.yaml"))
    total = sum(estimate.job_estimate(plan, run["key"], "cpu").seconds for run in runs.values())
    assert block[-1].split()[1:3] == estimate.clock(total).split()[:2]
