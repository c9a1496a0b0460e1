"""Every loader on fixture files the tests write, including malformed rows."""

import csv
import json
import re

import numpy as np
import pandas as pd
import pytest

from augsbert.config.schema import load_schema
from augsbert.config.load import validate_with_defaults
from augsbert.data import DataError, MissingDataError, RowReport, get_loader
from augsbert.data.loaders import apportion, group_sizes
from augsbert.data.tables import duplicate_report, raw_frame, validate_pairs
from conftest import BWS_TOPICS, write_bws, write_jsonl, write_spanish, write_stsb_sbert, write_stsb_semeval


def options(loader, **extra):
    """A dataset definition with the schema's defaults filled in, as the plan passes it."""
    cfg = {"datasets": {"x": {"loader": loader, **extra}}}
    validate_with_defaults(cfg, load_schema())
    return cfg["datasets"]["x"]


def load(loader, data_dir, policy="error", **extra):
    opts = options(loader, **extra)
    report = RowReport("x", policy)
    prepared = get_loader(loader).load("x", opts, data_dir, report)
    report.settle()
    return prepared, report


# ------------------------------------------------------------------ tables
def test_validate_pairs_normalises_rescales_and_reports():
    rows = [
        ("f.csv", 2, "  a \t b ", "c", "2.5"),
        ("f.csv", 3, "", "c", "1"),
        ("f.csv", 4, "a", None, "1"),
        ("f.csv", 5, "a", "b", "abc"),
        ("f.csv", 6, "a", "b", "nan"),
        ("f.csv", 7, "a", "b", "5.5"),
        ("f.csv", 8, "x", "y", "5"),
    ]
    report = RowReport("x", "skip")
    table = validate_pairs(raw_frame(rows, ["sentence1", "sentence2", "score"]), report, (0, 5))
    assert table.to_dict("records") == [
        {"sentence1": "a b", "sentence2": "c", "score": 0.5},
        {"sentence1": "x", "sentence2": "y", "score": 1.0},
    ]
    assert [str(i) for i in report.issues] == [
        "f.csv:3: empty or missing text in sentence1",
        "f.csv:4: empty or missing text in sentence2",
        "f.csv:5: score 'abc' is not a number",
        "f.csv:6: score 'nan' is not a number",
        "f.csv:7: score 5.5 outside the declared range [0, 5]",
    ]


def test_report_error_policy_names_file_and_line():
    report = RowReport("mydata", "error")
    report.add("a.csv", 7, "score 'x' is not a number")
    with pytest.raises(DataError, match=r"a\.csv:7: score 'x' is not a number[\s\S]*on_bad_rows: skip"):
        report.settle()


def test_duplicate_report_counts_either_order():
    t = lambda pairs: pd.DataFrame({"sentence1": [p[0] for p in pairs], "sentence2": [p[1] for p in pairs],
                                    "score": 0.5})
    rep = duplicate_report({"train": t([("a", "b"), ("b", "a"), ("c", "d")]), "test": t([("d", "c"), ("e", "f")])})
    assert rep == {"within_split": {"train": 1, "test": 0}, "across_splits": {"train/test": 1}}


# ------------------------------------------------------------------ STS-B
def test_stsb_semeval_format(data_dir):
    write_stsb_semeval(data_dir / "stsb")
    prepared, report = load("stsb", data_dir)
    assert {k: len(v) for k, v in prepared.splits.items()} == {"train": 6, "dev": 6, "test": 6}
    test = prepared.splits["test"]
    assert test["score"].tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert test["sentence1"][0] == 'A man "plays" the test flute 0.'  # quotes kept literally
    assert prepared.info["format"] == "semeval"


def test_stsb_semeval_bad_field_count_and_score(data_dir):
    root = write_stsb_semeval(data_dir / "stsb")
    path = root / "sts-dev.csv"
    lines = path.read_text().splitlines()
    lines[2] = "\t".join(["g", "f", "y", "id", "2.0", "only one sentence"])
    lines[4] = "\t".join(["g", "f", "y", "id", "six", "s1", "s2"])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load("stsb", data_dir)
    assert f"{path}:3: expected 7-9 fields, found 6" in str(err.value)
    assert f"{path}:5: score 'six' is not a number" in str(err.value)
    prepared, report = load("stsb", data_dir, policy="skip")
    assert len(prepared.splits["dev"]) == 4 and len(report.issues) == 2
    assert report.counts() == {str(path): 2}


def test_stsb_sbert_format(data_dir):
    write_stsb_sbert(data_dir / "stsb")
    prepared, _ = load("stsb", data_dir)
    assert {k: len(v) for k, v in prepared.splits.items()} == {"train": 5, "dev": 3, "test": 4}
    assert prepared.splits["test"]["score"].tolist() == pytest.approx([0, 0.2, 0.4, 0.6])
    assert prepared.splits["train"]["sentence1"][1] == '"Quote" train a 1'


def test_stsb_missing_file_message(data_dir):
    with pytest.raises(MissingDataError) as err:
        get_loader("stsb").inputs("stsb", options("stsb"), data_dir)
    msg = str(err.value)
    assert str(data_dir / "stsb" / "stsbenchmark.tsv.gz") in msg
    assert "Stsbenchmark.tar.gz" in msg and "where to put it" in msg


def test_stsb_partial_semeval_names_the_missing_split(data_dir):
    root = write_stsb_semeval(data_dir / "stsb")
    (root / "sts-dev.csv").unlink()
    with pytest.raises(MissingDataError, match="sts-dev.csv"):
        get_loader("stsb").inputs("stsb", options("stsb"), data_dir)


def test_stsb_download_mode_needs_no_files(data_dir):
    assert get_loader("stsb").inputs("stsb", options("stsb", download=True), data_dir) == []


# ------------------------------------------------------------------ BWS
def test_bws_cross_topic_split_sizes(data_dir):
    write_bws(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv")
    prepared, _ = load("bws_cross_topic", data_dir)
    sizes = {k: len(v) for k, v in prepared.splits.items()}
    assert sizes == {"train": 2125, "dev": 425, "test": 850}
    assert set(prepared.splits["dev"]["topic"]) == {"Death penalty"}
    assert set(prepared.splits["test"]["topic"]) == {"Gun control", "School uniforms"}
    assert set(prepared.splits["train"]["topic"]) == {
        "Cloning", "Abortion", "Minimum wage", "Marijuana legalization", "Nuclear energy"}
    first = prepared.splits["train"].iloc[0]
    assert first["sentence1"] == 'Abortion argument 0, says "A"'  # stray whitespace removed, quotes kept
    assert first["id"] == "p00001"


def test_bws_in_topic_split_sizes(data_dir):
    write_bws(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv")
    prepared, _ = load("bws_in_topic", data_dir)
    splits = prepared.splits
    assert {k: len(v) for k, v in splits.items()} == {"train": 2125, "dev": 425, "test": 850}
    for topic in BWS_TOPICS:
        n = [int((splits[s]["topic"] == topic).sum()) for s in ("train", "dev", "test")]
        assert 265 <= n[0] <= 266 and 53 <= n[1] <= 54 and 106 <= n[2] <= 107 and sum(n) == 425
    ids = [set(splits[s]["id"]) for s in ("train", "dev", "test")]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    again, _ = load("bws_in_topic", data_dir)
    assert again.splits["test"]["id"].tolist() == splits["test"]["id"].tolist()
    other, _ = load("bws_in_topic", data_dir, split_seed=7)
    assert other.splits["test"]["id"].tolist() != splits["test"]["id"].tolist()


def test_bws_in_topic_split_is_independent_of_file_order(data_dir):
    path = write_bws(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=30)
    opts = dict(split_sizes=[150, 30, 60])
    first, _ = load("bws_in_topic", data_dir, **opts)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")
    second, _ = load("bws_in_topic", data_dir, **opts)
    assert sorted(first.splits["test"]["id"]) == sorted(second.splits["test"]["id"])


def test_apportion_exact_totals():
    sizes = apportion({t: 425 for t in BWS_TOPICS}, [2125, 425, 850])
    assert [sum(s[k] for s in sizes.values()) for k in range(3)] == [2125, 425, 850]
    assert sorted(tuple(s) for s in sizes.values()) == sorted(
        [(265, 53, 107)] * 2 + [(265, 54, 106)] + [(266, 53, 106)] * 5)
    with pytest.raises(DataError, match="add up"):
        apportion({"a": 10}, [5, 5, 5])


def test_bws_unknown_topic_and_bad_rows(data_dir):
    path = write_bws(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=5)
    with pytest.raises(DataError, match=r"test_topics names topic\(s\) \['Guns'\]"):
        load("bws_cross_topic", data_dir, test_topics=["Guns"])
    with open(path, "a", newline="") as handle:
        csv.writer(handle).writerow(["p9", "a", "b", "Cloning", "high"])
        csv.writer(handle).writerow(["p10", "a", "b", "Cloning"])
    with pytest.raises(DataError) as err:
        load("bws_cross_topic", data_dir)
    assert f"{path}:42: score 'high' is not a number" in str(err.value)
    assert f"{path}:43: expected 5 fields, found 4" in str(err.value)


def test_bws_missing_file(data_dir):
    with pytest.raises(MissingDataError) as err:
        get_loader("bws_cross_topic").inputs("bws_cross_topic", options("bws_cross_topic"), data_dir)
    assert str(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv") in str(err.value)
    assert "TUdatalib" in str(err.value)


# ------------------------------------------------------------------ Spanish STS
def test_spanish_sts(data_dir):
    train = {f"tr{i}": [str(x % 5) for x in range(40)] for i in range(2)}
    test = {"te": ["5", "2.5", "0", ""]}  # empty score: unscored pair, not evaluated
    write_spanish(data_dir / "es", {**train, **test})
    prepared, _ = load("spanish_sts", data_dir, path="es", train_files=list(train), test_files=["te"], dev_size=20)
    sizes = {k: len(v) for k, v in prepared.splits.items()}
    assert sizes == {"train": 60, "dev": 20, "test": 3}
    assert prepared.splits["test"]["score"].tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert prepared.splits["train"]["score"].max() == pytest.approx(1.0)  # 4 / 4
    assert prepared.info["unscored_pairs"] == 1


def test_spanish_sts_line_count_mismatch(data_dir):
    write_spanish(data_dir / "es", {"a": ["1", "2"], "b": ["1"]})
    (data_dir / "es" / "a-score.txt").write_text("1\n")
    with pytest.raises(DataError, match=r"a-input.txt has 2 lines but .*a-score.txt has 1"):
        load("spanish_sts", data_dir, path="es", train_files=["a"], test_files=["b"], dev_size=1)


# ------------------------------------------------------------------ Lee
def test_lee_document_disjoint_split():
    prepared, _ = load("lee", None)
    sizes = {k: len(v) for k, v in prepared.splits.items()}
    assert sizes == {"train": 300, "dev": 45, "test": 105}  # 25/10/15 documents
    groups = prepared.info["documents"]
    assert sorted(groups["train"] + groups["dev"] + groups["test"]) == list(range(50))
    texts = {s: set(t["sentence1"]) | set(t["sentence2"]) for s, t in prepared.splits.items()}
    assert not (texts["train"] & texts["test"] or texts["train"] & texts["dev"] or texts["dev"] & texts["test"])
    assert len(prepared.unlabeled) == 300
    # scores are the upper triangle of the human rating matrix
    import importlib.resources as r
    sims = np.loadtxt(str(r.files("gensim").joinpath("test", "test_data", "similarities0-1.txt")))
    i, j = groups["test"][0], groups["test"][1]
    assert prepared.splits["test"]["score"].iloc[0] == pytest.approx(sims[min(i, j), max(i, j)])


def test_group_sizes_add_up():
    assert group_sizes(50, [0.5, 0.2, 0.3]) == [25, 10, 15]
    assert sum(group_sizes(7, [1, 1, 1])) == 7


# ------------------------------------------------------------------ generic files
def _pairs_records():
    return [{"q": f"first {i}", "d": f"second {i}", "label": i, "t": "A" if i % 2 else "B"} for i in range(6)]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet", "csv.gz"])
def test_pairs_file_formats(data_dir, fmt):
    frame = pd.DataFrame(_pairs_records())
    path = data_dir / f"pairs.{fmt}"
    if fmt.startswith("csv"):
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif fmt == "jsonl":
        write_jsonl(path, _pairs_records())
    else:
        frame.to_parquet(path)
    prepared, _ = load("pairs_file", data_dir, train=path.name, test=path.name, score_range=[0, 5],
                       columns={"sentence1": "q", "sentence2": "d", "score": "label", "topic": "t"})
    test = prepared.splits["test"]
    assert set(prepared.splits) == {"train", "test"}
    assert test["score"].tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert test["sentence1"][2] == "first 2" and test["topic"][1] == "A"


def test_pairs_file_headerless_and_out_of_range(data_dir):
    (data_dir / "p.tsv").write_text("a\tb\t3\nc\td\t9\ne\tf\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="p.tsv", test="p.tsv", header=False, score_range=[0, 5],
             columns={"sentence1": "0", "sentence2": "1", "score": "2"})
    msg = str(err.value)
    assert f"{data_dir / 'p.tsv'}:2: score 9 outside the declared range [0, 5]" in msg
    assert f"{data_dir / 'p.tsv'}:3: expected 3 fields, found 2" in msg


def test_pairs_file_missing_column_and_bad_json(data_dir):
    (data_dir / "p.csv").write_text("sentence_1,b,score\nx,y,1\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="p.csv", test="p.csv")
    # a header of this kind of file (it shares 'score'): the names found are listed, with the close one
    assert str(err.value) == (f"{data_dir / 'p.csv'}:1: header lacks column(s) ['sentence1', 'sentence2']; "
                              "found: 'sentence_1', 'b', 'score'; did you mean 'sentence_1' for 'sentence1'?")
    (data_dir / "p.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{oops\n')
    prepared, report = load("pairs_file", data_dir, policy="skip", train="p.jsonl", test="p.jsonl")
    assert len(prepared.splits["test"]) == 1
    assert [str(i).split(": ", 1)[0].rsplit(":", 1)[1] for i in report.issues] == ["2", "2"]


def test_header_error_names_the_columns_found_only_for_a_header_of_this_kind(data_dir):
    (data_dir / "train.csv").write_text("sentence1,sentence2,score\nx,y,1\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="train.csv", test="train.csv", columns={"score": "relatedness_score"})
    assert str(err.value) == (f"{data_dir / 'train.csv'}:1: header lacks column(s) ['relatedness_score']; "
                              "found: 'sentence1', 'sentence2', 'score'")
    # the first line of an unrelated file shares no name and none is close: only the count, never its content
    (data_dir / "other.csv").write_text("ghp_SECRET0123,token\nx,y\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="other.csv", test="other.csv")
    assert str(err.value) == (f"{data_dir / 'other.csv'}:1: header lacks column(s) ['sentence1', 'sentence2', "
                              "'score'] (found 2 column(s))")


def test_text_file_and_unlabeled_option(data_dir):
    (data_dir / "corpus.txt").write_text("first  sentence\n\n  second\n")
    prepared, _ = load("text_file", data_dir, path="corpus.txt")
    assert prepared.splits == {} and prepared.unlabeled["text"].tolist() == ["first sentence", "second"]
    write_stsb_sbert(data_dir / "stsb")
    prepared, _ = load("stsb", data_dir, unlabeled="corpus.txt")
    assert len(prepared.unlabeled) == 2
    with pytest.raises(MissingDataError, match="nope.txt"):
        get_loader("stsb").inputs("stsb", options("stsb", unlabeled="nope.txt"), data_dir)


def test_utf8_bom_and_unicode_line_separators(data_dir):
    path = write_bws(data_dir / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=5)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    prepared, _ = load("bws_cross_topic", data_dir)
    assert len(prepared.splits["train"]) == 25
    root = write_spanish(data_dir / "es", {"tr": ["1", "2", "3"], "te": ["4", "5"]})
    (root / "tr-input.txt").write_text("a\u2028b\tc\nd\te\nf\tg\n", encoding="utf-8")
    prepared, _ = load("spanish_sts", data_dir, path="es", train_files=["tr"], test_files=["te"], dev_size=1)
    assert len(prepared.splits["train"]) + len(prepared.splits["dev"]) == 3


def test_empty_split_is_an_error(tmp_path):
    from augsbert.jobs import data as data_job

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.csv").write_text("sentence1,sentence2,score\na,b,0.5\n")
    (raw / "test.csv").write_text("sentence1,sentence2,score\na,b,7\n")
    spec = {"stage": "data", "key": "x", "inputs": {},
            "params": {"dataset": "mine", "data_dir": str(raw), **options("pairs_file", train="train.csv",
                                                                          test="test.csv", on_bad_rows="skip")}}
    with pytest.raises(DataError, match="the test split is empty after skipping 1 bad row"):
        data_job.run(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_jsonl_values_of_the_wrong_type_are_bad_rows(data_dir):
    write_jsonl(data_dir / "p.jsonl", [
        {"sentence1": "a", "sentence2": "b", "score": 0.5},
        {"sentence1": ["a", "b"], "sentence2": "b", "score": 0.5},
        {"sentence1": "a", "sentence2": {"t": "b"}, "score": 0.5},
        {"sentence1": "a", "sentence2": "b", "score": True},
        {"sentence1": "a", "sentence2": "b", "score": "0.25"},
        {"sentence1": 7, "sentence2": "b", "score": 1},
        {"sentence1": "a", "sentence2": "b", "scor": 1},
    ])
    prepared, report = load("pairs_file", data_dir, policy="skip", train="p.jsonl", test="p.jsonl")
    path = data_dir / "p.jsonl"
    assert [str(i) for i in report.issues[:4]] == [
        f"{path}:2: key 'sentence1' holds an array, expected a string",
        f"{path}:3: key 'sentence2' holds an object, expected a string",
        f"{path}:4: key 'score' holds a boolean (true), expected a number",
        f"{path}:7: the object lacks key(s) ['score']; found: 'sentence1', 'sentence2', 'scor'; did you mean 'scor' for "
        "'score'?",
    ]
    assert prepared.splits["test"]["sentence1"].tolist() == ["a", "a", "7"]
    assert prepared.splits["test"]["score"].tolist() == [0.5, 0.25, 1.0]


def test_parquet_columns_of_the_wrong_type_and_files_that_are_not_parquet(data_dir):
    pd.DataFrame({"sentence1": ["a"], "sentence2": ["b"], "score": [True]}).to_parquet(data_dir / "p.parquet")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="p.parquet", test="p.parquet")
    assert str(err.value) == f"{data_dir / 'p.parquet'}: column 'score' holds values of type bool, expected numbers"
    pd.DataFrame({"sentence1": [["a"]], "sentence2": ["b"], "score": [1.0]}).to_parquet(data_dir / "p.parquet")
    with pytest.raises(DataError, match=r"column 'sentence1' holds values of type list<element: string>, expected "
                                        r"strings"):
        load("pairs_file", data_dir, train="p.parquet", test="p.parquet")
    (data_dir / "q.parquet").write_text("sentence1,sentence2,score\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="q.parquet", test="q.parquet")
    assert str(err.value) == f"{data_dir / 'q.parquet'}: not a parquet file (or a damaged one)"


def test_a_file_that_is_not_gzip(data_dir):
    (data_dir / "p.csv.gz").write_text("sentence1,sentence2,score\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="p.csv.gz", test="p.csv.gz")
    assert str(err.value) == f"{data_dir / 'p.csv.gz'}: not a valid gzip file (the name ends in .gz)"


def test_a_nul_byte_in_text_is_refused_naming_file_and_line(data_dir):
    """Issue 26 case 7: NUL bytes were kept in the text. A text file holding one is refused whole (a UTF-16 file
    decodes as "valid" UTF-8 with a NUL after every ASCII character); a NUL character in a parquet string or a JSON
    `\\u0000` escape is a bad row. Seen failing before: all loaded without an error, NULs in the sentences."""
    (data_dir / "p.csv").write_text("sentence1,sentence2,score\na,b,1\n\"c\nc\x00\",d,1\n")
    with pytest.raises(DataError) as err:
        load("pairs_file", data_dir, train="p.csv", test="p.csv")
    assert str(err.value) == (f"{data_dir / 'p.csv'}:4: a NUL byte (\\x00) in the text: a UTF-16 or binary file? "
                              "convert the file to utf-8 text")
    (data_dir / "u.tsv").write_bytes("sentence1\tsentence2\tscore\na\tb\t1\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=re.escape(f"{data_dir / 'u.tsv'}:1: a NUL byte (\\x00) in the text")):
        load("pairs_file", data_dir, train="u.tsv", test="u.tsv")
    (data_dir / "corpus.txt").write_text("first\nsecond\nthi\x00rd\n")
    with pytest.raises(DataError, match=re.escape(f"{data_dir / 'corpus.txt'}:3: a NUL byte (\\x00) in the text")):
        load("text_file", data_dir, path="corpus.txt")
    (data_dir / "p.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n'
                                      '{"sentence1": "a\\u0000", "sentence2": "b", "score": 1}\n')
    prepared, report = load("pairs_file", data_dir, policy="skip", train="p.jsonl", test="p.jsonl")
    assert [str(i) for i in report.issues] == [f"{data_dir / 'p.jsonl'}:2: key 'sentence1' holds a NUL character "
                                               "(\\u0000)"] * 2
    assert prepared.splits["test"]["sentence1"].tolist() == ["a"]
    pd.DataFrame({"sentence1": ["a", "b\x00"], "sentence2": ["c", "d"], "score": [1.0, 1.0]}).to_parquet(
        data_dir / "p.parquet")
    prepared, report = load("pairs_file", data_dir, policy="skip", train="p.parquet", test="p.parquet")
    assert str(report.issues[0]) == f"{data_dir / 'p.parquet'}:row 2: a NUL character (\\x00) in sentence1"
    assert prepared.splits["test"]["sentence1"].tolist() == ["a"]


def test_a_data_path_at_a_directory_or_a_device_says_so_and_is_never_read(data_dir):
    """Issue 26 case 7: a directory or /dev/zero given as a data file was reported as a "missing file" (and a
    reader opening /dev/zero or a pipe would read or wait forever). Seen failing before: "missing file"."""
    import os

    from augsbert.store.fingerprints import DigestCache

    (data_dir / "folder.csv").mkdir()
    (data_dir / "zero.csv").symlink_to("/dev/zero")
    os.mkfifo(data_dir / "pipe.csv")
    (data_dir / "t.csv").write_text("sentence1,sentence2,score\na,b,1\n")
    what = "  what it is: a pairs file of your own (csv, tsv, jsonl or parquet)"
    for name, kind in (("folder.csv", "is a directory, not a file"),
                       ("zero.csv", "is not a regular file (a character device)"),
                       ("pipe.csv", "is not a regular file (a named pipe)")):
        expected = (f"dataset 'x': {data_dir / name} {kind}; point `datasets.x.train` (or `data_dir`) at the data "
                    f"file\n{what}")
        with pytest.raises(MissingDataError) as err:  # planning (the workflow's raw inputs)
            get_loader("pairs_file").inputs("x", options("pairs_file", train=name, test="t.csv"), data_dir)
        assert str(err.value) == expected
        with pytest.raises(DataError) as err:  # a reader given it directly
            load("pairs_file", data_dir, train=name, test="t.csv")
        assert str(err.value) == f"{data_dir / name} {kind}; give the path of a data file"
    with pytest.raises(DataError, match="^/dev/zero is not a regular file; a data file is hashed by its content$"):
        DigestCache(data_dir / "cache.json").file("/dev/zero")


def test_m1_only_a_corpus_that_cannot_ship_says_licence(data_dir):
    """Issue 56 M1: every missing file said "The corpus cannot ship with augsbert (licence)", a user's own pairs
    file too (its own message: tests/test_errors.py); now only the BWS corpus (README) says so."""
    for loader, licensed in (("stsb", False), ("bws_cross_topic", True)):
        with pytest.raises(MissingDataError) as err:
            get_loader(loader).inputs(loader, options(loader), data_dir)
        last = str(err.value).splitlines()[-1]
        assert last == ("  The corpus cannot ship with augsbert (licence); it is read from the data directory."
                        if licensed else "  augsbert does not ship the corpus; it is read from the data directory.")
