"""STS suite, topic probe and USEB evaluators on tiny hand-made files with hand-computed values."""

import json

import numpy as np
import pytest

from augsbert.data import DataError
from augsbert.evaluation import sts_suite as sts_module
from augsbert.evaluation.sts_suite import read_sts_file, sts_suite
from augsbert.evaluation.topic import linear_probe
from augsbert.evaluation.useb import askubuntu, cqadupstack, scidocs, twitterpara, useb_suite
from augsbert.evaluation.similarity import Encoder

# 2-d directions: cosine with "q" (= [1, 0]) falls from a to d
VECTORS = {"q": [1, 0], "a": [0.9, 0.1], "b": [0.5, 0.5], "c": [0.1, 0.9], "d": [-1, 0], "e": [0, 1]}


class FakeModel:
    """Stands in for a SentenceTransformer: fixed vectors, normalised on request."""

    def __init__(self):
        self.calls = 0

    def encode(self, texts, normalize_embeddings=True, **_):
        self.calls += 1
        x = np.array([VECTORS[t] for t in texts], dtype=np.float64)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def encoder():
    return Encoder(FakeModel(), batch_size=4)


def test_encoder_encodes_each_text_once():
    enc = encoder()
    enc(["a", "b", "a"])
    enc(["b", "c"])
    assert sorted(enc.cache) == ["a", "b", "c"] and enc.model.calls == 2
    assert enc.cosine([("q", "a"), ("q", "d")]) == pytest.approx([0.9 / np.hypot(0.9, 0.1), -1.0])


def test_sts_task_spearman_with_ties_undefined_and_failed_hub_task(tmp_path, monkeypatch):
    path = tmp_path / "sts12.tsv"
    path.write_text("sentence1\tsentence2\tscore\nw\tx\t1\ny\tz\t2\nu\tv\t4\ns\tt\t3\n")
    table = read_sts_file(path, "sts12")
    assert table["score"].tolist() == pytest.approx([0.2, 0.4, 0.8, 0.6])
    predicted = {("w", "x"): 0.2, ("y", "z"): 0.2, ("u", "v"): 0.9, ("s", "t"): 0.5}

    out = sts_suite(lambda pairs: np.array([predicted[p] for p in pairs]), {"sts12": str(path)})
    # ranks: predicted [1.5, 1.5, 4, 3], gold [1, 2, 4, 3] -> rho = 4.5 / sqrt(4.5 * 5)
    assert out["tasks"]["sts12"]["spearman"] == pytest.approx(100 * 4.5 / np.sqrt(22.5))
    assert out["tasks"]["sts12"]["n_pairs"] == 4
    assert out["sts_avg"] == pytest.approx(out["tasks"]["sts12"]["spearman"]) and out["sts_avg_tasks"] == ["sts12"]
    # a constant model has no correlation: skipped with the reason, not averaged
    flat = sts_suite(lambda pairs: np.zeros(len(pairs)), {"sts12": str(path)})
    assert flat["sts_avg"] is None and "undefined" in flat["skipped"]["sts12"]

    def fail(task):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(sts_module, "read_sts_hub", fail)
    with pytest.raises(DataError, match=r"STS task sts13: download of mteb/sts13-sts failed .*hub unreachable"):
        sts_suite(lambda pairs: np.zeros(len(pairs)), {"sts12": str(path), "sts13": "hub"})


def test_bad_local_sts_file_names_file_and_line(tmp_path):
    path = tmp_path / "sts13.tsv"
    path.write_text("sentence1\tsentence2\tscore\na\tb\t1\nc\td\tseven\n")
    with pytest.raises(DataError, match=r"sts13.tsv:3.*'seven' is not a number"):
        read_sts_file(path, "sts13")


def test_linear_probe_separates_separable_topics_and_is_deterministic():
    rng = np.random.default_rng(0)
    centres = np.eye(3) * 5
    x = np.concatenate([centres[i] + rng.normal(0, 0.3, (20, 3)) for i in range(3)])
    labels = [t for t in ("abortion", "cloning", "gun control") for _ in range(20)]
    a = linear_probe(x, labels, epochs=10, lr=1e-1, seed=3)
    assert a["topic_macro_f1"] == pytest.approx(100.0) and a["n_test"] == 12 and a["n_train"] == 48
    assert a == linear_probe(x, labels, epochs=10, lr=1e-1, seed=3)
    assert a["train_loss_per_epoch"][-1] < a["train_loss_per_epoch"][0]
    # noise labels: chance level, far from perfect
    shuffled = list(np.random.default_rng(1).permutation(labels))
    assert linear_probe(x, shuffled, epochs=10, lr=1e-1, seed=3)["topic_macro_f1"] < 70
    with pytest.raises(ValueError, match="at least 2 sentences per topic"):
        linear_probe(x[:21], labels[:21])


def write_askubuntu(root):
    root.mkdir(parents=True)
    titles = {"1": "q", "2": "q", "3": "q", "11": "a", "12": "b", "13": "c", "14": "d"}
    (root / "text_tokenized.txt").write_text("".join(f"{i}\t{t}\tbody of {i}\n" for i, t in titles.items()))
    (root / "test.txt").write_text(
        "1\t12 14\t11 12 13 14\t4 3 2 1\n"  # relevant b (rank 2) and d (rank 4): AP = (1/2 + 2/4) / 2
        "2\t11\t14 13 12 11\t1 2 3 4\n"  # relevant a, ranked first by cosine: AP = 1
        "3\t99\t11 12 13 14\t4 3 2 1\n")  # its positive is not a candidate: skipped


def test_askubuntu_map_over_reranked_candidates(tmp_path):
    with pytest.raises(DataError, match="text_tokenized.txt: missing"):
        askubuntu(encoder(), tmp_path / "absent")
    write_askubuntu(tmp_path / "au")
    out = askubuntu(encoder(), tmp_path / "au")
    assert out["askubuntu_map"] == pytest.approx(75.0) and out["queries"] == 2 and out["skipped_queries"] == 1


def test_askubuntu_unknown_id_is_reported_with_line(tmp_path):
    write_askubuntu(tmp_path / "au")
    with open(tmp_path / "au" / "test.txt", "a") as fh:
        fh.write("1\t12\t11 77 13 14\t4 3 2 1\n")
    with pytest.raises(DataError, match=r"test.txt:4: id\(s\) \['77'\]"):
        askubuntu(encoder(), tmp_path / "au")


def test_cqadupstack_map_at_k_cuts_the_ranking(tmp_path):
    root = tmp_path / "cqa"
    root.mkdir()
    corpus = {"gis": {"q1": "q", "p1": "a", "p2": "b", "p3": "c"}, "tex": {"q2": "q", "p4": "d", "p5": "a"}}
    split = {"test": {"gis": {"q1": ["p2"]}, "tex": {"q2": ["p5"]}}, "valid": {}}
    (root / "corpus.json").write_text(json.dumps(corpus))
    (root / "retrieval_split.json").write_text(json.dumps(split))
    out = cqadupstack(encoder(), root)
    # gis: p2 at rank 2 -> 50; tex: p5 first -> 100; mean over forums 75
    assert out["per_forum"] == {"gis": pytest.approx(50.0), "tex": pytest.approx(100.0)}
    assert out["cqadupstack_map@100"] == pytest.approx(75.0)
    at1 = cqadupstack(encoder(), root, k=1)  # p2 is cut off: AP 0 for gis
    assert at1["per_forum"]["gis"] == 0.0 and at1["cqadupstack_map@1"] == pytest.approx(50.0)


def test_twitterpara_ap_drops_undecided_pairs(tmp_path):
    root = tmp_path / "tw"
    root.mkdir()
    (root / "Twitter_URL_Corpus_test.txt").write_text(
        "q\ta\t(5, 6)\thttp://x\nq\tc\t(3, 6)\thttp://x\nq\td\t(0, 6)\thttp://x\n")
    (root / "test.data").write_text(
        "1\tt\tq\ta\t4\ttag\ttag\n1\tt\tq\tb\t1\ttag\ttag\n1\tt\tq\tc\t5\ttag\ttag\n1\tt\tq\te\t3\ttag\ttag\n")
    (root / "test.label").write_text("")
    out = twitterpara(encoder(), root)
    # TURL: the positive outranks the negative -> 100. PIT: scores a (pos) > b (neg) > c (pos):
    # AP = (1/1 + 2/3) / 2; the label-3 pairs are dropped
    assert out["turl_ap"] == pytest.approx(100.0) and out["turl_pairs"] == 2
    assert out["pit_ap"] == pytest.approx(100 * (1 + 2 / 3) / 2) and out["pit_pairs"] == 3
    assert out["twitterpara_ap"] == pytest.approx((100 + 100 * (1 + 2 / 3) / 2) / 2)


def test_scidocs_map_counts_untitled_relevant_papers_as_misses(tmp_path):
    root = tmp_path / "sd"
    root.mkdir()
    data = {"corpus": {"q1": {"title": "q"}, "c1": {"title": "a"}, "c2": {"title": "b"}, "c3": {"title": None},
                       "c4": {"title": "d"}, "q2": {"title": ""}},
            "test": {"cite": {"q1": {"c1": 1, "c2": 0, "c3": 1, "c4": 0}, "q2": {"c1": 1}},
                     "coview": {"q1": {"c1": 0, "c2": 0, "c4": 1}}}}
    (root / "data.json").write_text(json.dumps(data))
    out = scidocs(encoder(), root)
    # cite: c1 first, c3 (relevant, untitled) never ranked -> AP = 1/2; q2 has no title: skipped
    # coview: c4 last of three -> AP = 1/3
    assert out["per_task"] == {"cite": pytest.approx(50.0), "coview": pytest.approx(100 / 3)}
    assert out["scidocs_map"] == pytest.approx((50 + 100 / 3) / 2)


def test_useb_suite_summary_and_average(tmp_path):
    write_askubuntu(tmp_path / "askubuntu")
    out = useb_suite(encoder(), {"askubuntu": str(tmp_path / "askubuntu")})
    assert out["summary"] == {"askubuntu_map": pytest.approx(75.0), "useb_avg": pytest.approx(75.0)}
    assert out["useb_avg_tasks"] == ["askubuntu"]
