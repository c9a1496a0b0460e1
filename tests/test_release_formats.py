"""STS-suite files as their owners release them (SentEval STS12-16, STS benchmark, SICK.txt) and SNLI /
MultiNLI jsonl as supervised-SimCSE triples: hand-made files, hand-computed values, errors with file and line."""

import json
import logging

import numpy as np
import pytest
import yaml
from scipy import stats

from augsbert.config.load import ConfigError, deep_merge, prepare_config
from augsbert.data import DataError
from augsbert.data.nli import read_nli_triples, triples_format
from augsbert.data.suite_files import detect_format, locate_task
from augsbert.evaluation.sts_suite import read_sts_file, sts_suite
from augsbert.plan import Plan
from augsbert.training.pretrain_rows import read_triples
from conftest import REPO, plan_shipped


def plan_for(**override):
    return plan_shipped(override, grids=False)


def senteval_sts12(root):
    """SentEval's layout: two subsets; the second gold line of MSRpar is empty (an unscored pair)."""
    year = root / "sts_suite" / "STS" / "STS12-en-test"
    year.mkdir(parents=True)
    (year / "STS.input.MSRpar.txt").write_text("a b\tc d\ne f\tg h\ni j\tk l\n")
    (year / "STS.gs.MSRpar.txt").write_text("4.0\n\n1.5\n")
    (year / "STS.input.surprise.OnWN.txt").write_text("m n\to p\nq r\ts t\n")
    (year / "STS.gs.surprise.OnWN.txt").write_text("5\n0.25\n")
    return year


def test_senteval_year_pools_its_subsets_and_skips_unscored_pairs(tmp_path):
    year = senteval_sts12(tmp_path)
    table = read_sts_file(year, "sts12", "senteval")
    assert list(zip(table["sentence1"], table["sentence2"])) == [("a b", "c d"), ("i j", "k l"), ("m n", "o p"),
                                                                  ("q r", "s t")]
    assert table["score"].tolist() == pytest.approx([0.8, 0.3, 1.0, 0.05])
    assert table["subset"].tolist() == ["MSRpar", "MSRpar", "surprise.OnWN", "surprise.OnWN"]
    predicted = {("a b", "c d"): 0.9, ("i j", "k l"): 0.1, ("m n", "o p"): 0.5, ("q r", "s t"): 0.2}
    out = sts_suite(lambda pairs: np.array([predicted[p] for p in pairs]), {"sts12": str(year)},
                    {"sts12": "senteval"})
    # one Spearman over all four scored pairs: gold ranks [3, 2, 4, 1], predicted ranks [4, 1, 3, 2]
    expected = stats.spearmanr([0.9, 0.1, 0.5, 0.2], [4.0, 1.5, 5, 0.25]).statistic * 100
    assert out["tasks"]["sts12"]["spearman"] == pytest.approx(expected) == pytest.approx(60.0)
    assert out["tasks"]["sts12"]["n_pairs"] == 4 and out["tasks"]["sts12"]["format"] == "senteval"
    assert out["tasks"]["sts12"]["subsets"]["MSRpar"]["spearman"] == pytest.approx(100.0)
    assert out["tasks"]["sts12"]["subsets"]["surprise.OnWN"]["n_pairs"] == 2


def test_sts16_names_and_extra_input_fields(tmp_path):
    year = tmp_path / "STS16-en-test"
    year.mkdir()
    # the original 2016 release has source columns after the two sentences; SentEval's copy does not
    (year / "STS2016.input.answer-answer.txt").write_text("u v\tw x\tsrc-a\tsrc-b\ny z\tz y\tsrc-c\tsrc-d\n")
    (year / "STS2016.gs.answer-answer.txt").write_text("2\n3\n")
    assert detect_format(year) == "senteval"
    table = read_sts_file(year, "sts16", "senteval")
    assert table[["sentence1", "sentence2"]].values.tolist() == [["u v", "w x"], ["y z", "z y"]]
    assert table["score"].tolist() == pytest.approx([0.4, 0.6])


def test_senteval_errors_name_the_files_and_line(tmp_path):
    year = senteval_sts12(tmp_path)
    (year / "STS.gs.MSRpar.txt").write_text("4.0\n\n")
    with pytest.raises(DataError, match=r"STS.input.MSRpar.txt has 3 line\(s\) but STS.gs.MSRpar.txt has 2"):
        read_sts_file(year, "sts12", "senteval")
    (year / "STS.gs.MSRpar.txt").write_text("4.0\n\nfour\n")
    with pytest.raises(DataError, match=r"STS.gs.MSRpar.txt:3: score 'four' is not a number"):
        read_sts_file(year, "sts12", "senteval")
    (year / "STS.gs.MSRpar.txt").write_text("4.0\n\n7\n")
    with pytest.raises(DataError, match=r"STS.input.MSRpar.txt:3: score 7 outside the declared range"):
        read_sts_file(year, "sts12", "senteval")


SICK = ("pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
        "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set\n"
        "1\tA dog runs\tA dog is running\tENTAILMENT\t4.9\tA_entails_B\tB_entails_A\tx\tx\tFLICKR\tFLICKR\tTRAIN\n"
        "2\tA man sings\tA man eats\tNEUTRAL\t2.1\tA_neutral_B\tB_neutral_A\tx\tx\tFLICKR\tFLICKR\tTEST\n"
        "3\tA cat sleeps\tNo cat sleeps\tCONTRADICTION\t3.6\tA_contradicts_B\tB_contradicts_A\tx\tx\tSICK\tSICK\tTEST\n"
        "4\tKids play\tChildren play\tENTAILMENT\t4.7\tA_entails_B\tB_entails_A\tx\tx\tSICK\tSICK\tTRIAL\n")


def test_sick_txt_is_its_test_rows_and_formats_are_told_by_name_or_header(tmp_path):
    suite = tmp_path / "sts_suite"
    suite.mkdir()
    (suite / "SICK.txt").write_text(SICK)
    assert locate_task(suite, tmp_path, "sickr") == (str(suite / "SICK.txt"), "sick")
    table = read_sts_file(suite / "SICK.txt", "sickr", "sick")
    assert table[["sentence1", "sentence2"]].values.tolist() == [["A man sings", "A man eats"],
                                                                  ["A cat sleeps", "No cat sleeps"]]
    assert table["score"].tolist() == pytest.approx([2.1 / 5, 3.6 / 5])
    # SentEval's split file has no SemEval_set: all of its rows
    split = tmp_path / "SICK_test_annotated.txt"
    split.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                     "6\tA\tB\t4.5\tENTAILMENT\n7\tC\tD\t1.0\tNEUTRAL\n")
    assert len(read_sts_file(split, "sickr", detect_format(split))) == 2
    # by header when the name does not tell; an explicit format when neither does
    renamed = tmp_path / "relatedness.tsv"
    renamed.write_text(SICK)
    assert detect_format(renamed) == "sick"
    odd = tmp_path / "pairs.txt"
    odd.write_text("genre\tfile\tyear\tid\tscore\tsentence1x\n")
    with pytest.raises(DataError, match=r"pairs.txt: cannot tell the STS file format .*`format`"):
        detect_format(odd)
    odd.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n")
    assert detect_format(odd, "stsbenchmark") == "stsbenchmark"
    assert read_sts_file(odd, "stsb", "stsbenchmark")["score"].tolist() == [1.0]


def test_plan_finds_release_layouts_and_keys_their_format(tmp_path):
    senteval_sts12(tmp_path)
    (tmp_path / "sts_suite" / "SICK.txt").write_text(SICK)
    (tmp_path / "elsewhere.txt").write_text("a\tb\n")
    plan = plan_for(data_dir=str(tmp_path))
    params = plan.node(plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]).settings
    assert params["sts"] == {"sts12": str(tmp_path / "sts_suite" / "STS" / "STS12-en-test"),
                             "sickr": str(tmp_path / "sts_suite" / "SICK.txt")}
    assert params["sts_format"] == {"sts12": "senteval", "sickr": "sick"}
    # the project's TSV wins over a release layout of the same task (taken by its name: a bad header would
    # stop only the suite job, with file and line)
    (tmp_path / "sts_suite" / "sts12.tsv").write_text("sentence\tsentence2\tscore\na\tb\t1\n")
    plan = plan_for(data_dir=str(tmp_path))
    params = plan.node(plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]).settings
    assert params["sts"]["sts12"].endswith("sts12.tsv") and params["sts_format"] == {"sickr": "sick"}
    with pytest.raises(DataError, match=r"sts12.tsv:1: header lacks column\(s\) \['sentence1'\]"):
        read_sts_file(params["sts"]["sts12"], "sts12")
    # a file the name and header do not identify: the dry run names the key to set
    with pytest.raises(ConfigError, match=r"suite.sts_files.sts13: .*elsewhere.txt: cannot tell"):
        plan_for(data_dir=str(tmp_path), defaults={"suite": {"sts_files": {"sts13": "elsewhere.txt"}}})
    plan = plan_for(data_dir=str(tmp_path), defaults={"suite": {"sts_files": {
        "sts13": {"path": "elsewhere.txt", "format": "tsv"}, "sts14": "absent.tsv"}}})
    params = plan.node(plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]).settings
    assert params["sts"]["sts13"] == str(tmp_path / "elsewhere.txt")
    assert params["skipped"]["sts14"] == f"no file {tmp_path / 'absent.tsv'} (and suite.sts_hub is false)"


def nli_record(premise, hypothesis, label, genre=None):
    record = {"annotator_labels": [label], "captionID": "1", "gold_label": label, "pairID": "1",
              "sentence1": premise, "sentence1_binary_parse": "( x )", "sentence2": hypothesis}
    if genre:
        record["genre"] = genre
    return json.dumps(record) + "\n"


def test_snli_jsonl_becomes_simcse_triples(tmp_path, caplog):
    snli = tmp_path / "snli_1.0_train.jsonl"
    snli.write_text(
        nli_record("A man plays guitar.", "A man makes music.", "entailment")
        + nli_record("A man plays guitar.", "A man is  asleep.", "contradiction")
        + nli_record("A man plays guitar.", "A man plays a song he wrote.", "neutral")
        + nli_record("A man plays guitar.", "Someone plays an instrument.", "entailment")  # not the first: unused
        + nli_record("Two dogs run.", "Animals move.", "entailment")  # no contradiction: no triple
        + nli_record("A girl reads.", "A girl sleeps.", "-")  # annotators disagreed: skipped
        + nli_record("A girl reads.", "A girl looks at a book.", "entailment")
        + "\n"
        + nli_record("A girl reads.", "Nobody reads.", "contradiction"))
    assert triples_format(snli) == "nli"
    with caplog.at_level(logging.INFO, logger="augsbert.data.nli"):
        triples = read_triples(snli)
    assert triples == [("A man plays guitar.", "A man makes music.", "A man is asleep."),
                       ("A girl reads.", "A girl looks at a book.", "Nobody reads.")]
    assert ("8 records (4 entailment, 1 neutral, 2 contradiction, 1 without gold label, skipped); 3 premises "
            "with an entailment or contradiction, 2 triples") in caplog.text
    # MultiNLI by its first record (any name); a list of files is read in order; the triples format still works
    mnli = tmp_path / "mnli_part.jsonl"
    mnli.write_text(nli_record("Prices rose.", "Prices went up.", "entailment", "slate")
                    + nli_record("Prices rose.", "Prices fell.", "contradiction", "slate"))
    plain = tmp_path / "nli.tsv"
    plain.write_text("anchor\tpositive\tnegative\nA\tB\tC\n")
    assert read_triples([str(snli), str(mnli), str(plain)])[2:] == [("Prices rose.", "Prices went up.", "Prices fell."),
                                                                    ("A", "B", "C")]
    # an explicit format for a file whose name and first record do not tell
    odd = tmp_path / "nli.data"
    odd.write_text(mnli.read_text())
    assert triples_format(odd) == "triples" and read_triples(odd, "nli") == [("Prices rose.", "Prices went up.",
                                                                              "Prices fell.")]


def test_nli_errors_name_file_line_and_key(tmp_path):
    path = tmp_path / "multinli_1.0_train.jsonl"
    path.write_text(nli_record("P.", "H.", "entailment") + json.dumps({"sentence1": "P.", "sentence2": "Q."}) + "\n"
                    + nli_record("P.", "R.", "contradicts"))
    with pytest.raises(DataError) as err:
        read_nli_triples(path)
    assert "multinli_1.0_train.jsonl:2: the object lacks key(s) ['gold_label']" in str(err.value)
    assert "multinli_1.0_train.jsonl:3: key 'gold_label' holds 'contradicts'" in str(err.value)
    path.write_text(nli_record("P.", "H.", "entailment") + nli_record("P.", " ", "contradiction"))
    with pytest.raises(DataError, match=r"multinli_1.0_train.jsonl:2: key 'sentence2' is empty"):
        read_nli_triples(path)
    path.write_text(nli_record("P.", "H.", "entailment"))
    with pytest.raises(DataError, match=r"no premise has both an entailment and a contradiction"):
        read_nli_triples(path)


def test_plan_keys_a_list_of_nli_files_and_an_explicit_format(tmp_path):
    (tmp_path / "snli_1.0_train.jsonl").write_text(nli_record("P.", "H.", "entailment"))
    exp = {"pretrain": {"objective": "simcse_sup", "triples": "snli_1.0_train.jsonl"}}
    one = plan_for(data_dir=str(tmp_path), experiments={"demo_simcse": exp})
    node = one.node(one.experiment("demo_simcse").runs[42]["pretrained"])
    assert node.settings["triples"] == str(tmp_path / "snli_1.0_train.jsonl") and "triples_format" not in node.settings
    auto = plan_for(data_dir=str(tmp_path), experiments={"demo_simcse": {
        "pretrain": {**exp["pretrain"], "triples_format": "auto"}}})
    assert auto.experiment("demo_simcse").runs[42]["pretrained"] == node.key  # auto is the absent option
    both = plan_for(data_dir=str(tmp_path), experiments={"demo_simcse": {"pretrain": {
        "objective": "simcse_sup", "triples": ["snli_1.0_train.jsonl", "multinli_1.0_train.jsonl"],
        "triples_format": "nli"}}})
    node = both.node(both.experiment("demo_simcse").runs[42]["pretrained"])
    assert node.settings["triples"] == [str(tmp_path / "snli_1.0_train.jsonl"),
                                        str(tmp_path / "multinli_1.0_train.jsonl")]
    assert node.params["triples_digest"][1] == "missing" and node.params["triples_format"] == "nli"
