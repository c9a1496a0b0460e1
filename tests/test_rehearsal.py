"""`augsbert rehearse` (issue 46): the config overlay keeps every code path, stand-in models and data in each
loader's format, and the headline rehearsed end to end under .rehearsal/ without touching anything else."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal  # noqa: F401  (a test's params class names it in a string annotation)

import pytest

from conftest import REPO, plan_shipped, write_bws
from workflow_helpers import checkout, place_standins, snakemake


# ---- the config overlay ----------------------------------------------------------------------------------------

def _differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    elif a != b:
        yield path, a, b


def test_the_overlay_changes_amounts_only_in_every_shipped_experiment():
    """Every shipped experiment, rehearsed, differs from itself only in seeds and the capped amounts (epochs,
    max_steps, top_k, trials): no architecture, loss, strategy, objective, loader, score scale or suite changes."""
    from augsbert.config import rehearsal
    from augsbert.config.load import deep_merge, prepare_config, read_config, validated_experiment

    raw = read_config(REPO / "config" / "config.yaml")
    real = prepare_config(raw, lazy=True)
    rehearsed = prepare_config(deep_merge(raw, {"rehearse": True}), lazy=True)
    assert rehearsed["rehearse"] is True and rehearsed["data_dir"] == rehearsal.DATA_DIR
    assert rehearsed["seeds"] == real["seeds"][:1]
    changed = set()
    for name in real["experiments"]:
        a = validated_experiment(real, name)
        b = validated_experiment(rehearsed, name)
        for path, before, after in _differences(a, b):
            key = path.split(".")[-1]
            if key == "seeds":
                assert after == before[:1], (name, path)
            elif before is None and path == "pretrain.max_steps":  # null: the preset's steps, cut as a number
                assert after == rehearsal.MAX_STEPS
            elif path == "student.positive_threshold":  # MNRL's positives: every stand-in-scored pair
                assert after == 0.0
            elif path == "student.layers":  # 3 of MiniLM's 6 -> 1 of the stand-in's 2: still a reduction
                assert (before, after) == (3, 1), (name, path, before, after)
            elif path == "student.matryoshka_dims":  # scaled so the largest is the stand-in's 16 dimensions
                assert (before, after) == ([384, 128, 64], [16, 5, 3]), (name, path, before, after)
            else:
                assert key in rehearsal.CAPS, (name, path, before, after)
                assert after == rehearsal.CAPS[key](before) and after <= before, (name, path, before, after)
            changed.add(key)
    assert {"epochs", "max_steps", "top_k", "seeds"} <= changed
    # idempotent: an experiment validated twice is cut once
    again = copy.deepcopy(rehearsed["experiments"]["bws_cbe"])
    assert rehearsal.overlay_experiment(again) == rehearsed["experiments"]["bws_cbe"]


def test_model_references_take_the_stand_in_of_their_kind():
    from augsbert.store.model_refs import model_references, standin_kind

    config = {"defaults": {"base_model": "minilm-l6"},
              "experiments": {"a": {"base_model": "FacebookAI/roberta-base",
                                    "teacher": {"pretrained": "cross-encoder/ms-marco-MiniLM-L-6-v2"},
                                    "queries": {"generator": "BeIR/query-gen-msmarco-t5-base-v1"},
                                    "negatives": {"retrievers": ["bm25", "sentence-transformers/msmarco-MiniLM-L-6-v3"]},
                                    "candidates": {"semantic_model": "finetuned"}},
                              "b": {"teacher": {"pretrained": "trained"}, "queries": {"generator": "inverse_cloze"},
                                    "base_model": "bert-base-uncased"}}}
    assert model_references(config) == {
        "minilm-l6": "bert-st", "FacebookAI/roberta-base": "roberta-hf",
        "cross-encoder/ms-marco-MiniLM-L-6-v2": "bert-cross", "BeIR/query-gen-msmarco-t5-base-v1": "t5",
        "sentence-transformers/msmarco-MiniLM-L-6-v3": "bert-st", "bert-base-uncased": "bert-hf"}
    assert standin_kind("princeton-nlp/unsup-simcse-roberta-base") == "roberta-hf"
    assert standin_kind("sentence-transformers/nli-roberta-base-v2") == "roberta-st"



# the options the hand list run/rehearse.py held before the stages declared them (issue 48): each stage whose params
# have one still makes a job kind of it
FORMER_KIND_OPTIONS = ("arch", "loss", "objective", "strategy", "strategies", "loader", "format", "score_scale",
                       "variant", "similarity", "activation", "mode", "combine", "symmetric", "pooling", "selection",
                       "rounds", "use_gold_labels", "relabel_gold", "ensemble", "cross_encoder_scale", "init",
                       "matryoshka_dims", "source")


def test_job_kinds_come_from_the_stages_declarations(monkeypatch):
    """A job kind's options are its stage's declared choices (its params' bool and Literal fields) and its
    `Stage.kind_options`: a new stage's kinds are rehearsed with no edit of run/."""
    import dataclasses
    from types import SimpleNamespace

    from augsbert.run.rehearse import job_kind, kind_options
    from augsbert.params import Params
    from augsbert.stages import REGISTRY
    from augsbert.stages.base import Stage

    # options a params class inherits from its section's options class but its planned specs never carry
    # (trans_encoder and active_select: `rounds` plans the chain of nodes; each node is one round; teacher: each
    # `ensemble` member is a teacher node of its own)
    never_in_specs = {"trans_encoder": {"rounds"}, "teacher": {"ensemble"}, "active_select": {"rounds"}}
    for name, stage in REGISTRY.items():
        fields = {f.name for f in dataclasses.fields(stage.params)} if stage.params else set()
        assert fields & set(FORMER_KIND_OPTIONS) - never_in_specs.get(name, set()) <= set(kind_options(name)), name
    assert kind_options("data") == ("on_bad_rows", "loader") and kind_options("margins") == ("score_scale",)
    assert kind_options("zero_shot") == () and kind_options("teacher_ensemble") == ("combine",)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class NewParams(Params):
        flavour: Literal["sweet", "sour"]
        strict: bool | None = None
        recipe: str
        size: int

    new = Stage("new_stage", 1, "a stage added later", "augsbert.jobs.data:run", params=NewParams,
                kind_options=("recipe",))
    monkeypatch.setitem(REGISTRY, "new_stage", new)
    assert kind_options("new_stage") == ("flavour", "strict", "recipe")
    node = SimpleNamespace(stage="new_stage", settings={"flavour": "sour", "strict": True, "recipe": "x", "size": 3,
                                                        "model": "minilm-l6"})
    assert job_kind(node, {"minilm-l6": "bert-st"}) == "new_stage flavour=sour strict=True recipe=x model=bert-st"

# ---- stand-in data ---------------------------------------------------------------------------------------------

def test_cut_keeps_the_header_and_spreads_the_rows():
    from augsbert.data.standins import cut_lines

    data = b"h\n" + b"".join(b"%d\n" % i for i in range(10))
    assert cut_lines(data, 4) == b"h\n0\n2\n5\n7\n"
    assert cut_lines(b"h\n1\n2", 5) == b"h\n1\n2\n"


def test_a_beir_cut_keeps_what_its_qrels_name(tmp_path):
    from augsbert.data.standins import cut_beir, write_beir

    write_beir(tmp_path / "full", passages=900, queries=120)
    cut_beir(tmp_path / "full", tmp_path / "cut")
    ids = lambda path: {json.loads(line)["_id"] for line in path.read_text().splitlines()}
    corpus, queries = ids(tmp_path / "cut" / "corpus.jsonl"), ids(tmp_path / "cut" / "queries.jsonl")
    assert len(corpus) == 300
    for split in ("train", "dev", "test"):
        lines = (tmp_path / "cut" / "qrels" / f"{split}.tsv").read_text().splitlines()
        assert lines[0] == "query-id\tcorpus-id\tscore" and 1 <= len(lines) - 1 <= 40
        for line in lines[1:]:
            query, passage, _ = line.split("\t")
            assert query in queries and passage in corpus


@pytest.mark.parametrize("loader, options", [
    ("bws_cross_topic", {}), ("bws_in_topic", {}), ("stsb", {"unlabeled": "useb/titles.txt"}),
    ("beir", {"path": "beir/scifact"}), ("spanish_sts", {}),
    ("bws_in_topic", {"topic_corpus": {"format": "ukp_sentential", "path": "ukp_sentential"}}),
    ("stsb", {"topic_corpus": {"format": "newsgroups", "path": "20news_home", "group_level": "parent"}}),
    ("parallel_rows", {"languages": ["de", "zh"]}),
    ("parallel_file", {"path": "parallel/train.tsv", "test": "parallel/test.csv", "columns": {"language": "lang"}}),
    ("parallel_file", {"path": "parallel/train.csv", "language": "fr"}),
])
def test_stand_in_files_load_through_their_loader(tmp_path, loader, options):
    """Absent files are written in the loader's exact format: the loader reads them into splits."""
    from augsbert.config.load import prepare_config
    from augsbert.data.loaders import LOADERS
    from augsbert.data.readers import RowReport
    from augsbert.data.standins import prepare_datasets
    from augsbert.data.topic_corpora import read_topic_corpus

    config = prepare_config({"datasets": {"x": {"loader": loader, **options}}, "experiments": {}, "rehearse": True})
    done = prepare_datasets(config, tmp_path / "real", tmp_path / "cut")
    assert done["x"].startswith("stand-in files"), done
    definition, report = config["datasets"]["x"], RowReport("x", "error")
    LOADERS[loader].inputs("x", definition, tmp_path / "cut")  # as the data job: every file there
    prepared = LOADERS[loader].load("x", definition, tmp_path / "cut", report)
    if definition.get("topic_corpus"):
        prepared.unlabeled, _ = read_topic_corpus("x", definition["topic_corpus"], tmp_path / "cut", report)
    report.settle()
    assert not report.issues
    if loader == "beir":
        assert len(prepared.beir.corpus) == 200 and {"train", "dev", "test"} <= set(prepared.beir.qrels)
    elif loader == "parallel_file":  # no pair splits: parallel sentences, a held-out part where `test` is named
        assert set(prepared.parallel["split"]) == {"train", *(["test"] if definition.get("test") else [])}
        # a held-out sentence never trains: a test file repeating the train file's sentences left none to train on
        table = prepared.parallel
        held = table[table["split"] != "train"]
        train = table[table["split"] == "train"]
        assert not (set(train["source"]) | set(train["target"])) & (set(held["source"]) | set(held["target"]))
    else:
        assert all(len(prepared.splits[split]) >= 10 for split in ("train", "dev", "test")), prepared.splits
    if definition.get("unlabeled") or definition.get("topic_corpus"):
        assert len(prepared.unlabeled) >= 10


def test_present_files_are_cut_from_the_users_bytes(tmp_path):
    from augsbert.config.load import prepare_config
    from augsbert.data.standins import CUT_ROWS, prepare_datasets

    real = write_bws(tmp_path / "real" / "bws" / "BWS_Argument_Similarity_Corpus.csv")
    config = prepare_config({"datasets": {"x": {"loader": "bws_cross_topic"}}, "experiments": {}})
    assert prepare_datasets(config, tmp_path / "real", tmp_path / "cut") == {"x": f"cut from {real}"}
    cut = (tmp_path / "cut" / "bws" / "BWS_Argument_Similarity_Corpus.csv").read_text().splitlines()
    lines = real.read_text().splitlines()
    assert cut[0] == lines[0] and len(cut) == 1 + CUT_ROWS and set(cut) <= set(lines)


# ---- the headline, end to end ----------------------------------------------------------------------------------

def _files(root: Path) -> dict[str, str]:
    """sha256 of every file below `root`, but those of the rehearsal's own root."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file() and ".rehearsal" not in p.relative_to(root).parts}


def _rehearse(project: Path, *targets: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu", "AUGSBERT_PRINT_TABLES": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "augsbert", "rehearse", *targets], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900)


def test_the_headline_rehearses_every_job_and_a_renamed_column_stops_its_data_job(tmp_path, standins):
    project = checkout(tmp_path / "project")
    place_standins(project, standins)
    bws = write_bws(project / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv")
    # a real artifact with its manifest, a real results file and log: a rehearsal must leave them as they are
    real = project / "artifacts" / "data" / "bws_cross_topic-0123456789"
    real.mkdir(parents=True)
    (real / "manifest.json").write_text('{"files": {}}\n')
    (project / "results").mkdir()
    (project / "results" / "bws_cbe.json").write_text("{}\n")
    (project / "logs").mkdir()
    (project / "logs" / "x.log").write_text("real\n")
    before = _files(project)

    done = _rehearse(project, "results/bws_cbe.json")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("10 jobs of 9 kinds rehearsed in "), done.stdout
    assert all(line.startswith("OK ") for line in lines[:-1]) and len(lines) == 10, done.stdout
    assert any(line.startswith("OK      teacher ") and " arch=cbe " in line for line in lines)
    results = json.loads((project / ".rehearsal" / "results" / "bws_cbe.json").read_text())
    assert set(results["models"]) == {"zero_shot", "lower_bound", "teacher", "student"}
    assert _files(project) == before  # nothing written outside .rehearsal/ (the real manifests included)
    # nor a folder: Snakemake's run log, opened in the project before the Snakefile moves to the root, is moved
    # there by the Snakefile (an empty .snakemake/log/ was left); so too for a plain `snakemake` rehearsal
    assert not (project / ".snakemake").exists()
    plain = snakemake(project, "--cores", "1", "--config", "rehearse=true", "--", "results/bws_cbe.json")
    assert plain.returncode == 0 and "Nothing to be done" in plain.stderr, plain.stderr[-2000:]
    assert not (project / ".snakemake").exists() and _files(project) == before
    logs = sorted((project / ".rehearsal" / ".snakemake" / "log").glob("*.snakemake.log"))
    assert len(logs) == 2 and "Nothing to be done" in logs[-1].read_text()

    text = bws.read_text()
    bws.write_text(text.replace("id,argument1,", "id,arg_one,", 1))
    failed = _rehearse(project, "results/bws_cbe.json")
    assert failed.returncode == 1
    data_line = next(line for line in failed.stdout.splitlines()
                     if " data " in line and " loader=bws_cross_topic" in line)
    assert data_line.startswith("failed ") and "log: .rehearsal/logs/data/" in data_line
    log = project / data_line.split("log: ")[1]
    assert "data/raw/bws/BWS_Argument_Similarity_Corpus.csv:1: header lacks column(s) ['argument1']" \
        in log.read_text()
    assert failed.stdout.splitlines()[-1].startswith("10 jobs of 9 kinds rehearsed in ")



def test_a_missing_nli_triples_file_stops_the_plan_of_a_target_that_needs_it(tmp_path):
    """Found by rehearsing the rcl grid: its NLI triples (pretrain.triples) were checked only by the job. Now
    Snakemake's DAG of a target with such a job stops with the path (the stage's raw_inputs), while the key still
    plans (other targets' plans are not touched)."""
    from augsbert.errors import MissingDataError
    from augsbert.data.standins import prepare_files

    plan = plan_shipped({"data_dir": str(tmp_path)}, plan=())
    runs = plan.experiment("rcl.rcl_1.stsb").runs
    keys = [key for roles in runs.values() for key in roles.values()
            if plan.node(key).stage in ("pretrain", "rcl_entropy") and plan.node(key).settings.get("triples")]
    assert {plan.node(key).stage for key in keys} == {"pretrain", "rcl_entropy"}
    for key in keys:
        with pytest.raises(MissingDataError, match=r"all-nli-triplet\.parquet: no such file \(pretrain\.triples"):
            plan.raw_inputs(key)
    assert prepare_files(["nli/all-nli-triplet.parquet"], tmp_path / "none", tmp_path) == {
        "nli/all-nli-triplet.parquet": "stand-in file"}
    for key in keys:
        assert plan.raw_inputs(key) == [str(tmp_path / "nli" / "all-nli-triplet.parquet")]


# ---- every job kind of the shipped configs (issue 46 item 2) ---------------------------------------------------

def test_every_shipped_job_kind_is_rehearsed(tmp_path, standins):
    """Every grid and every experiment outside grids (every shipped experiment): one job of each job kind and
    what it reads, on stand-ins (no data present: stand-in files in each loader's format). The counts are the
    ones docs/guide/rehearsal.md states."""
    from augsbert.config.load import load_configs

    project = checkout(tmp_path / "project")
    place_standins(project, standins)
    names = list(load_configs([REPO / "config" / "config.yaml"], lazy=True)["experiments"])
    done = _rehearse(project, "--every-kind", *[f"results/{name}.json" for name in names])
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("every kind: "))
    kinds, experiments, jobs = (int(word) for word in header.split() if word.isdigit())
    assert experiments == len(names)
    rows = [line for line in lines if line[:7] in ("OK     ", "failed ", "not run")]
    assert len(rows) == kinds and lines[-1].startswith(f"{jobs} jobs of {kinds} kinds rehearsed in ")
    bad = {line.split(" (")[0][8:] for line in rows if not line.startswith("OK ")}
    assert not bad, "\n".join(rows)
    docs = " ".join((REPO / "docs" / "guide" / "rehearsal.md").read_text().split())
    assert f"{len(names)} experiments" in docs and f"hold {kinds} job kinds" in docs, header
    assert f"are {jobs} jobs" in docs, header


# ---- Snakemake's own DAG of everything shipped (issue 47) -------------------------------------------------------

@pytest.mark.workflow
def test_snakemake_plans_every_shipped_experiment_and_grid_on_stand_in_data(tmp_path, standins):
    """The package's plan is not Snakemake's DAG (a key the rules' wildcards refuse planned in the package and
    failed under Snakemake: MissingInputException). With stand-in data in every loader's format (a rehearsal's
    root), Snakemake itself plans every shipped experiment's results file and every grid's table."""
    from augsbert.config.load import load_configs
    from workflow_helpers import job_stats

    config = load_configs([REPO / "config" / "config.yaml"], lazy=True)
    targets = [*(f"results/{name}.json" for name in config["experiments"]),
               *(f"results/tables/{grid}.md" for grid in config["grids"])]
    project = checkout(tmp_path / "project")
    place_standins(project, standins)
    proc = snakemake(project, "-n", "--config", "rehearse=true", "--", *targets)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    jobs = job_stats(proc.stdout + proc.stderr)
    assert jobs["collect_results"] == len(config["experiments"]) and jobs["grid_table"] == len(config["grids"]), jobs


def test_a_stand_in_is_never_written_where_an_absolute_dataset_path_points(tmp_path):
    """An incomplete dataset named by an absolute path: its stand-in writer would have written into the user's
    own folder (pathlib drops the scratch folder before an absolute path), over their real files."""
    from augsbert.data.standins import prepare_datasets

    real = tmp_path / "mine" / "stsbenchmark"
    real.mkdir(parents=True)
    (real / "sts-train.csv").write_text("REAL TRAIN\n")  # sts-dev.csv and sts-test.csv missing
    before = {p.name: p.read_bytes() for p in real.iterdir()}
    done = prepare_datasets({"datasets": {"stsb": {"loader": "stsb", "path": str(real)}}}, tmp_path / "data",
                            tmp_path / "root")
    assert done["stsb"].startswith(f"absent, read in place (a path outside the data folder: {real};"), done
    assert {p.name: p.read_bytes() for p in real.iterdir()} == before
    assert not (tmp_path / "root").exists()
