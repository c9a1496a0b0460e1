"""The estimate before a run (issue 50): per job its steps and time on this machine, from the files' own row
counts before the data job has run (augsbert.scheduling.estimate, augsbert.stages.sizes.counted_sizes)."""

import math
import os
from pathlib import Path

import pytest

from augsbert.config.load import load_configs
from augsbert.face.cli import main
from augsbert.plan import Plan
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
    suite: {{suites: []}}
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
    assert sizes.text_tokens(plan, plan.node(runs["teacher"]["key"])) == pytest.approx(text)
    tokens = 2 * text + 3
    per_example = (estimate.TRAIN_S_PER_EXAMPLE + estimate.TRAIN_S_PER_TOKEN * tokens) * (1 + estimate.SMALL_BATCH / 16)
    per_pair = estimate.SCORE_S_PER_PAIR + estimate.SCORE_S_PER_TOKEN * tokens
    assert teacher.seconds == pytest.approx(estimate.START_S + size * (500 * 16 * per_example + (500 + 300) * per_pair))
    warm = estimate.job_estimate(plan, runs["teacher"]["key"], "cpu", warm=True)
    assert teacher.seconds - warm.seconds == pytest.approx(estimate.START_S - estimate.WARM_START_S)
    assert teacher.what == "500 steps of 16; scoring 800 dev/test pairs (500 dev x 1 pass + 300 test)"
    student = estimate.job_estimate(plan, runs["student"]["key"], "cpu")
    assert student.steps == 70 and student.what == ("70 steps of 16; scoring 800 dev/test pairs (500 dev x 1 pass + "
                                                    "300 test)")  # one pass of 12,050
    # a Bi-Encoder encodes each text alone: 2 x (text + 2) tokens; the labels are the teacher's (a pair model)
    student_node, labels_node = plan.node(runs["student"]["key"]), plan.node(runs["labels"]["key"])
    assert estimate.example_tokens(plan, student_node, text) == pytest.approx(2 * (text + 2))
    assert estimate.example_tokens(plan, labels_node, text) == pytest.approx(tokens)
    assert estimate.example_tokens(plan, labels_node, 400.0) == 512  # capped at the teacher's max_length
    gpu = estimate.job_estimate(plan, runs["teacher"]["key"], "gpu")
    assert gpu.seconds - estimate.START_S == pytest.approx((teacher.seconds - estimate.START_S) / estimate.GPU_SPEEDUP)
    one_order, runs = planned(own_data(tmp_path, "{arch: cbe, epochs: 1, batch_size: 16, symmetric: false}"))
    assert estimate.job_estimate(one_order, runs["teacher"]["key"], "cpu").steps == 250


@pytest.mark.parametrize("examples, batch, epochs, max_steps", [
    (294, 16, 1, 360), (294, 16, 1, 19), (294, 16, 1, 20), (320, 16, 1, 40), (5749, 16, 1, 300), (30, 16, 3, None),
    (495, 32, 1, 16), (496, 32, 1, 16)])
def test_the_dev_passes_estimated_are_the_passes_training_scores(examples, batch, epochs, max_steps):
    """Issue 64, 14: the estimate scored the dev split ⌈steps x batch / examples⌉ times, one more than training does
    where the batches do not divide the examples (294 pairs, batches of 16, 360 steps: 20 against 19). The count is
    now the ends of passes that augsbert.training.pairs.epoch_end (where BestEpoch scores dev) finds."""
    from types import SimpleNamespace

    from augsbert.training.pairs import epoch_end

    per_epoch = math.ceil(examples / batch)
    steps = max_steps or per_epoch * epochs
    args = SimpleNamespace(max_steps=max_steps or -1, gradient_accumulation_steps=1, num_train_epochs=epochs)
    loader = range(per_epoch)  # the Trainer's dataloader: one batch per step
    ends = [step for step in range(1, steps + 1)
            if epoch_end(args, SimpleNamespace(global_step=step, max_steps=steps), loader) is not None]
    assert estimate.dev_passes(examples, batch, epochs, max_steps) == len(ends)


def test_a_static_student_is_priced_as_a_table_not_as_transformer_steps(tmp_path):
    """Issue 65: each static student's epoch was priced as Transformer steps (cpu_compact: 2,516 steps at 18 min 52 s;
    measured: 0.090 CPU s a step of the 30,522 x 256 table, 0.045 s on 2 idle cores). Its job is the distillation,
    its steps over the table (once per rate of a sweep), and its scoring."""
    config = own_data(tmp_path)
    text = Path(config).read_text()
    (tmp_path / "static.yaml").write_text(text.replace("max_steps: 70}", "max_steps: 70, arch: static, "
                                                       "static_lr_sweep: [0.01, 0.02]}"))
    plan, runs = planned(str(tmp_path / "static.yaml"))
    job = estimate.job_estimate(plan, runs["student"]["key"], "cpu")
    step_s = estimate.STATIC_S_PER_STEP_PER_VALUE * 30522 * 256  # MiniLM's vocabulary x static_dims 256
    assert step_s == pytest.approx(0.045) and job.step_s == pytest.approx(step_s)
    assert job.steps == 3 * 70  # static_lr (0.005) and the sweep's two rates, each the student's 70 steps
    size = estimate.model_params("minilm-l6") / estimate.REFERENCE_PARAMS
    distill = 30522 * estimate.STATIC_DISTILL_S_PER_TOKEN * size
    passes = 3 * math.ceil(70 * 16 / 12050)
    assert job.seconds == pytest.approx(estimate.START_S + distill + 210 * step_s
                                        + estimate.STATIC_S_PER_PAIR * (500 * passes + 300))
    assert job.what == "210 steps of 16 over a 30,522-token table (3 learning rates); distilling 30,522 tokens"
    transformer = estimate.job_estimate(plan, runs["lower_bound"]["key"], "cpu")
    assert transformer.step_s > 5 * job.step_s  # a Transformer step of 16 pairs (the lower bound's)
    short = tmp_path / "short.yaml"
    short.write_text((tmp_path / "static.yaml").read_text().replace("0.02]}", "0.02], static_lr_sweep_steps: 20}"))
    plan, runs = planned(str(short))
    assert estimate.job_estimate(plan, runs["student"]["key"], "cpu").steps == 3 * 20 + 70  # then the chosen rate


def test_plan_estimate_prints_each_job_and_the_total(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("AUGSBERT_WARM", raising=False)  # a local run's jobs start warm: so does the estimate
    assert main(["plan", "--config", own_data(tmp_path), "--experiment", "mine_augsbert", "--estimate"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("augsbert: estimate for"):].splitlines()
    assert block[0] == ("augsbert: estimate for 6 job(s) on this CPU, warm job starts (model size x pairs x "
                        "tokens, not a calibration):")
    assert [line.split()[0] for line in block[1:8]] == ["data", "candidates", "teacher", "labels", "lower_bound",
                                                        "student", "total"]
    assert block[8].startswith("augsbert: the figures are for ")  # what it assumes, and the load now (issue 56)
    assert "500 steps of 16" in block[3] and "scoring 12,050 pairs" in block[4]  # 8,050 silver + 4,000 gold
    plan, runs = planned(str(tmp_path / "my.yaml"))
    total = sum(estimate.job_estimate(plan, run["key"], "cpu").seconds for run in runs.values())
    assert block[7].split()[1:3] == estimate.clock(total).split()[:2]


# ------------------------------------------------------------------ text lengths computed (issue 54)
def test_text_lengths_are_computed_from_the_loader_source_then_from_the_prepared_data(tmp_path, monkeypatch):
    from conftest import write_stsb_semeval

    write_stsb_semeval(tmp_path / "stsb", rows_per_split=2)
    (tmp_path / "u.txt").write_text("One. Two words.\nThree\n")
    (tmp_path / "my.yaml").write_text(f"""
datasets:
  mine: {{loader: stsb, path: {tmp_path}/stsb, unlabeled: {tmp_path}/u.txt}}
experiments:
  e: {{dataset: mine, models: [lower_bound], suite: {{suites: []}}}}
""")
    monkeypatch.chdir(tmp_path)  # no artifact built here
    plan = Plan(load_configs([str(REPO / "config" / "config.yaml"), str(tmp_path / "my.yaml")], lazy=True))
    data = plan.node(plan.experiment_spec("e")["runs"]["42"]["data"]["key"])
    texts = ['A man "plays" the train flute 0.', 'A man "plays" the train flute 1.', "Someone plays a train instrument 0.",
             "Someone plays a train instrument 1."]
    assert sizes.text_chars(data) == pytest.approx({"pairs": sum(map(len, texts)) / 4, "corpus": (15 + 5) / 2,
                                                    "sentence": (4 + 10 + 5) / 3})  # One. / Two words. / Three
    (tmp_path / "u.txt").write_text("Four five six seven\n")  # another size: computed again, not the cached figure
    assert sizes.text_chars(data)["corpus"] == 19
    assert sizes.text_tokens(plan, data, "corpus") == 19 / sizes.CHARS_PER_TOKEN
    # once the data job ran: its own tables (train pairs, unlabeled texts)
    import pandas as pd

    folder = tmp_path / data.path
    folder.mkdir(parents=True)
    pd.DataFrame({"sentence1": ["ab", "abcd"], "sentence2": ["abcdef", "a"], "score": [1.0, 2.0]}).to_parquet(
        folder / "train.parquet")
    pd.DataFrame({"text": ["Xy. Zzz zz.", "Qqq"]}).to_parquet(folder / "unlabeled.parquet")
    (folder / "metrics.json").write_text('{"sizes": {"train": 2, "dev": 0, "test": 0, "unlabeled": 2}}')
    assert sizes.text_chars(data) == pytest.approx({"pairs": 13 / 4, "corpus": 7.0, "sentence": (3 + 7 + 3) / 3})  # Xy. / Zzz zz. / Qqq


def test_a_loader_without_its_files_gets_the_default_length(tmp_path, monkeypatch):
    (tmp_path / "my.yaml").write_text(f"""
datasets:
  gone: {{loader: stsb, path: {tmp_path}/nowhere}}
experiments:
  e: {{dataset: gone, models: [lower_bound], suite: {{suites: []}}}}
""")
    monkeypatch.chdir(tmp_path)
    plan = Plan(load_configs([str(REPO / "config" / "config.yaml"), str(tmp_path / "my.yaml")], lazy=True))
    data = plan.node(plan.experiment_spec("e")["runs"]["42"]["data"]["key"])
    assert sizes.text_chars(data) == {}
    assert sizes.text_tokens(plan, data) == sizes.DEFAULT_TEXT_CHARS / sizes.CHARS_PER_TOKEN


def test_a_run_that_stops_for_a_person_estimates_the_whole_experiment_once(tmp_path, monkeypatch):
    """Issue 64, 12: a run of `annotator: file` plans (and so estimated) only up to the round it stops at, so each
    stop estimated the next leg alone. Its estimate adds one line for the whole experiment: every round after the
    stop planned as if its file were filled, the jobs already built left out."""
    from collections import Counter

    monkeypatch.chdir(tmp_path)  # no artifact and no round file here
    plan = Plan(load_configs([str(REPO / "config" / "config.yaml")], lazy=True))
    spec = plan.experiment_spec("demo_active_file")
    run = estimate.with_upstream(plan, [r["key"] for roles in spec["runs"].values() for r in roles.values()])
    assert Counter(plan.node(k).stage for k in run) == {"data": 1, "gold_subset": 1, "teacher": 3, "active_select": 1,
                                                        "active_label": 1, "active_rounds": 1}  # up to round 1's stop
    # (the teachers: the all-gold one, round 0's and the untrained one, the curve's 0-label point)
    whole = Plan(plan.config)
    whole.every_round = True
    spec = whole.experiment_spec("demo_active_file")
    keys = estimate.with_upstream(whole, [r["key"] for roles in spec["runs"].values() for r in roles.values()])
    assert Counter(whole.node(k).stage for k in keys) == {"data": 1, "gold_subset": 1, "teacher": 4,
                                                          "active_select": 2, "active_label": 2, "active_rounds": 1}
    seconds = sum(e.seconds for e in estimate.estimate_jobs(whole, keys, "cpu", True))
    line = ("augsbert: this run stops where a person labels a round; the whole of the experiment from here, every "
            f"round included: 11 job(s), {estimate.clock(seconds)} on this CPU (idle cores, as above; the time the "
            "person takes is not counted) (demo_active_file: a person labels round 1, round 2)")
    assert estimate.whole_experiment_line(plan, ["demo_active_file"], "cpu", True) == line
    text = estimate.estimate_text(plan, run, ["demo_active_file"], "cpu", warm=True, load=(0.0, 2))
    assert text.splitlines()[-1] == line
    assert estimate.whole_experiment_line(plan, ["demo_zeroshot"], "cpu", True) is None  # no person: no line

    # round 1 filled, the first jobs built: round 2 is awaited, and what is built is not estimated again
    folder = tmp_path / "annotate" / "demo_active_file"
    folder.mkdir(parents=True)
    (folder / "round_1.csv").write_text("pair_id,sentence1,sentence2,score,scale\n" +
                                        "".join(f"{k},a {k},b {k},{k % 6},0 to 5\n" for k in range(6)))
    later = Plan(plan.config)
    labelled = later.experiment_spec("demo_active_file")["runs"]["42"]["active_label_1"]["key"]
    built = estimate.with_upstream(later, [labelled])
    assert Counter(later.node(k).stage for k in built) == {"data": 1, "gold_subset": 1, "teacher": 1,
                                                           "active_select": 1, "active_label": 1}
    for key in built:
        Path(later.node(key).path).mkdir(parents=True)
    # 6: round 2 and after, and the untrained teacher (the curve's 0-label point; no round feeds it, so not built)
    assert estimate.whole_experiment_line(later, ["demo_active_file"], "cpu", True).endswith(
        "6 job(s), " + estimate.clock(seconds - sum(e.seconds for e in estimate.estimate_jobs(
            later, built, "cpu", True))) + " on this CPU (idle cores, as above; the time the person takes is not "
        "counted) (demo_active_file: a person labels round 2)")


def test_gold_subset_counts_are_the_kept_share():
    from augsbert.data.pool import subset_rows

    for n, fraction in ((300, 0.1), (7, 0.5), (10, 0.01), (3, 1.0), (1379, 0.333)):
        assert sizes.kept_pairs(n, fraction) == len(subset_rows(n, fraction, 42))


# ------------------------------------------------------------------ GPL's chain priced by what it computes (issue 54)
def test_demo_gpl_jobs_are_priced_by_what_they_compute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no artifact built here
    plan = Plan(load_configs([str(REPO / "config" / "config.yaml")], lazy=True))
    runs = plan.experiment_spec("demo_gpl")["runs"]["42"]
    job = {role: estimate.job_estimate(plan, run["key"], "cpu", warm=True) for role, run in runs.items()}
    start = estimate.WARM_START_S
    # the teacher learns the gold subset: round(0.1 x 300) = 30 Lee train pairs, both orders, batches of 16
    assert sizes.split_sizes(plan.node(runs["gold_subset"]["key"]), plan) == {"train": 30, "dev": 45, "test": 105,
                                                                             "unlabeled": 300}
    assert job["teacher"].steps == 4 and job["teacher"].what == ("4 steps of 16; scoring 150 dev/test pairs (45 dev x "
                                                                 "1 pass + 105 test)")
    # queries: one inverse-cloze sentence per Lee background document, no model
    assert job["queries"].what == "300 passages x 1 (inverse cloze, no model)"
    assert job["queries"].seconds == pytest.approx(1.0 + 300 * 1e-5)
    chars = sizes.text_chars(plan.node(runs["data"]["key"]))
    passage, query = min(128, chars["corpus"] / 4 + 2), min(128, chars["sentence"] / 4 + 2)
    # negatives: BM25 and MiniLM over 300 queries x 300 passages (MiniLM encodes both), an exact search each
    size = estimate.model_params("minilm-l6") / estimate.REFERENCE_PARAMS
    search = 300 * 300 * estimate.SEARCH_S_PER_PAIR
    assert job["negatives"].seconds == pytest.approx(
        start + 2 * search + size * 300 * (estimate.encode_cost(passage) + estimate.encode_cost(query)))
    # margins: each query's positive and its one drawn negative (18 steps x 16 <= 300 rows: one draw per row)
    assert job["margins"].what == "scoring 600 (query, passage) pairs"
    pair = min(128, chars["sentence"] / 4 + chars["corpus"] / 4 + 3)
    assert job["margins"].seconds == pytest.approx(start + size * 600 * estimate.pair_cost(pair))
    # the student: 18 steps of 16 (query, positive, negative) tuples, each text alone, then Lee's 105 test pairs
    assert job["gpl"].steps == 18
    tokens = query + 2 * passage
    per_example = (estimate.TRAIN_S_PER_EXAMPLE + estimate.TRAIN_S_PER_TOKEN * tokens) * (1 + estimate.SMALL_BATCH / 16)
    test = 2 * min(128, chars["pairs"] / 4 + 2)
    assert job["gpl"].seconds == pytest.approx(start + size * (18 * 16 * per_example + 105 * estimate.pair_cost(test)))


def test_draws_and_t5_sizes_match_the_code_they_price():
    from transformers import T5Config, T5ForConditionalGeneration

    from augsbert.stages import margins
    from augsbert.training import gpl_data

    assert gpl_data.draws_per_row is margins.draws_per_row  # the job draws by what the estimate counts
    for rows, draws, per_row in ((300, {"max_steps": 18, "batch_size": 16}, 1),
                                 (10, {"max_steps": 7, "batch_size": 4}, 3), (5, {"epochs": 3, "batch_size": 2}, 3)):
        assert margins.draws_per_row(rows, draws) == per_row
    config = {"vocab_size": 50, "d_model": 16, "d_kv": 8, "num_heads": 2, "d_ff": 24, "num_layers": 2,
              "num_decoder_layers": 3}
    model = T5ForConditionalGeneration(T5Config(**config))
    # the weights a generation multiplies by: every matrix but the relative position biases (no layer norms)
    matrices = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and "relative_attention" not in name)
    assert estimate.t5_params(config) == matrices
    encoder = sum(p.numel() for name, p in model.named_parameters()
                  if name.startswith("encoder.block") and p.dim() == 2 and "relative_attention" not in name)
    assert estimate.t5_encoder_params(config) == encoder


def test_t5_queries_are_priced_by_passages_queries_and_tokens(tmp_path, monkeypatch):
    generator = tmp_path / "t5"
    generator.mkdir()
    config = {"vocab_size": 32128, "d_model": 512, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": 6}
    import json

    (generator / "config.json").write_text(json.dumps({"model_type": "t5", "is_encoder_decoder": True, **config}))
    (tmp_path / "my.yaml").write_text(f"""
experiments:
  t5gpl:
    dataset: lee
    models: [gpl]
    teacher: {{pretrained: minilm-l6}}
    queries: {{generator: {generator}, queries_per_passage: 3, max_length: 20, input_max_length: 64, shards: 2}}
    negatives: {{retrievers: [bm25], range_max: 10}}
    student: {{loss: margin_mse, max_steps: 5}}
    suite: {{suites: []}}
""")
    monkeypatch.chdir(tmp_path)
    plan = Plan(load_configs([str(REPO / "config" / "config.yaml"), str(tmp_path / "my.yaml")], lazy=True))
    queries = plan.node(plan.experiment_spec("t5gpl")["runs"]["42"]["queries"]["key"])
    shard = plan.node(dict(queries.inputs)["shard_0"])
    job = estimate.job_estimate(plan, shard.key, "cpu")
    # 300 Lee background documents over 2 shards; each passage's first 64 tokens encoded, 3 x 20 tokens decoded
    assert job.what == "150 passages x 3 queries, up to 20 tokens each"
    encoder = 150 * 64 * estimate.GENERATE_S_PER_INPUT_TOKEN * 6 * (4 * 512**2 + 2 * 512 * 2048) / (
        12 * (4 * 768**2 + 2 * 768 * 3072))
    decoder = 150 * 3 * 20 * estimate.GENERATE_S_PER_TOKEN * estimate.t5_params(config) / estimate.t5_params(
        estimate.T5_BASE)
    assert job.seconds == pytest.approx(estimate.START_S + encoder + decoder)
    merge = estimate.job_estimate(plan, queries.key, "cpu")
    assert merge.what == "300 passages x 3 (merging the shards' queries)" and merge.seconds < 3


# ------------------------------------------------------------------ what the estimate assumes (issue 56, case 13)
def test_the_estimate_says_its_assumption_and_load_and_warns_beyond_a_week(tmp_path):
    """`epochs: 100000` printed 77,289,301 h without a word; on loaded cores the estimate was 8.4x short and said
    nothing of the load. It now says what it assumes (idle cores), the load read when it is made and the likely
    factor, and warns of a job beyond a week and a run beyond 3 days, naming the setting that drives it."""
    plan, runs = planned(own_data(tmp_path, "{arch: cbe, epochs: 100000, batch_size: 16}"))
    text = estimate.estimate_text(plan, [run["key"] for run in runs.values()], ["mine_augsbert"], "cpu",
                                  load=(9.8, 2))
    lines = text.splitlines()
    teacher = estimate.job_estimate(plan, runs["teacher"]["key"], "cpu")
    assert teacher.seconds > estimate.JOB_WARN_S and teacher.steps == 500 * 100000
    total = sum(estimate.job_estimate(plan, run["key"], "cpu").seconds for run in runs.values())
    assert lines[8] == (f"augsbert: the figures are for 2 idle core(s); the load now is 9.8 (1-min load average, 2 "
                        f"core(s)): expect about 5.9x, {estimate.clock(total * 5.9)} in all, or more (each job's "
                        "progress line re-estimates from its measured steps)")
    assert lines[9].startswith(f"augsbert: warning: teacher is estimated at {estimate.clock(teacher.seconds)} (")
    assert lines[9].endswith(" days, more than 7.0 days): teacher.epochs: 100,000 x 500 steps of 16 per epoch "
                             "(8,000 pairs) drives it; check that setting (a cap: the section's max_steps, fewer "
                             "epochs)")
    assert lines[10].startswith("augsbert: warning: the run is estimated at ") and lines[10].endswith(
        f"the longest job, teacher ({estimate.clock(teacher.seconds)}), grows with teacher.epochs: 100,000 x 500 "
        "steps of 16 per epoch (8,000 pairs)")
    assert "," in estimate.clock(teacher.seconds).split()[0]  # hours with thousands separators
    capped, runs = planned(own_data(tmp_path, "{arch: cbe, epochs: 1, batch_size: 16}"))
    quiet = estimate.estimate_text(capped, [run["key"] for run in runs.values()], ["mine_augsbert"], "cpu",
                                   load=(0.0, 2))
    assert "warning" not in quiet and "expect about 1.0x" in quiet
    assert estimate.load_factor(9.8, 2) == pytest.approx(5.9) and estimate.load_factor(-1, 2) == 1.0


def test_a_grid_dry_run_estimates_the_teacher_its_readers_plan(monkeypatch):
    """A grid's dry-run estimate listed 6 jobs and left out the teacher Snakemake planned: a teacher planned by
    its readers (`models` without `teacher`) is no role of the runs. The estimate now takes every node the
    runs are built from."""
    from augsbert.face.cli import print_estimate, run_experiments

    monkeypatch.chdir(REPO)
    config = load_configs(None, lazy=True)
    plan = Plan(config)
    experiments = run_experiments(config, "demo_compact")
    text = print_estimate(plan, experiments)
    roles = [line.split()[0] for line in text.splitlines()[1:] if line.startswith("  ")]
    assert "teacher" in roles  # the labels' teacher, planned by its readers
    keys = {run["key"] for e in experiments for r in plan.experiment_spec(e)["runs"].values() for run in r.values()}
    teachers = {k for k in estimate.with_upstream(plan, keys) if plan.node(k).stage == "teacher"} - keys
    assert len(teachers) == 1 and f"estimate for {len(keys) + 1} job(s)" in text and roles[-1] == "total"


def test_a_run_hands_each_job_its_estimate(tmp_path, monkeypatch):
    """The run's estimate per job, written before the first job where the job's progress line reads it."""
    from augsbert.scheduling import progress

    plan, runs = planned(own_data(tmp_path))
    monkeypatch.delenv(estimate.ESTIMATE_FILE_ENV, raising=False)
    keys = [run["key"] for run in runs.values()]
    text = estimate.estimate_for_run(plan, keys, ["mine_augsbert"], "cpu", True, tmp_path / "run")
    path = Path(os.environ[estimate.ESTIMATE_FILE_ENV])
    assert path.parent == tmp_path / "run" and "augsbert: the figures are for " in text
    teacher = estimate.job_estimate(plan, runs["teacher"]["key"], "cpu", warm=True)
    record = progress.job_estimate(runs["teacher"]["key"])
    assert record["steps"] == 500 and record["step_s"] == pytest.approx(teacher.step_s, rel=1e-5)
    # a training step of the teacher: the batch's examples at their per-example cost (the estimate's own parts)
    assert teacher.step_s * 500 < teacher.seconds - estimate.WARM_START_S < teacher.step_s * 500 + 60
    assert progress.job_estimate("nothere-0000000000") == {}
    estimate.forget_run_estimates()
    assert not path.exists() and estimate.ESTIMATE_FILE_ENV not in os.environ
    assert progress.job_estimate(runs["teacher"]["key"]) == {}  # no run's file: no estimate
