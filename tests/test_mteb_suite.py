"""The `mteb` suite: planning (local task data, hub, skipped, the missing-package message) always; a real MTEB
run on a tiny local STS task when the optional extra is installed (its score = a Spearman computed here)."""

import importlib.util
import json
import sys

import pytest
import yaml

from augsbert.config.load import ConfigError, deep_merge, prepare_config
from augsbert.data import DataError, suite_files
from augsbert.evaluation import mteb_suite as mteb_module
from augsbert.plan import Plan
from conftest import REPO, plan_shipped

PAIRS = [("a dog runs in the park", "a dog is running outside", 4.8), ("a cat sleeps", "the stock market fell", 0.2),
         ("it rains today", "the weather is wet", 3.5), ("he plays the piano", "he plays the guitar", 2.6),
         ("bread and cheese", "a storm is coming", 0.0), ("the team won", "the match was won by the team", 4.4)]


def plan_for(tmp_path, mteb: dict, **evaluation):
    plan = plan_shipped({"data_dir": str(tmp_path), "defaults": {"suite": {
        "suites": ["mteb"], "mteb": mteb, **evaluation}}}, grids=False)
    return plan, plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]


def write_sts_task(directory):
    directory.mkdir(parents=True)
    (directory / "test.jsonl").write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n"
                                                  for a, b, s in PAIRS))


def test_missing_package_is_one_message_naming_the_extra(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mteb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"suite.suites has `mteb`, but the mteb package is not installed; "
                                          r"install the extra: pip install 'augsbert\[mteb\]'"):
        plan_for(tmp_path, {"tasks": ["STS12"]})
    monkeypatch.setitem(sys.modules, "mteb", None)  # what `import mteb` meets without the package
    with pytest.raises(mteb_module.MtebMissingError, match=r"pip install 'augsbert\[mteb\]'"):
        mteb_module.require_mteb()


def test_plan_takes_local_task_data_then_the_hub_and_keys_the_version(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_files, "mteb_version", lambda: "2.99.0")  # planning never imports mteb
    with pytest.raises(ConfigError, match=r"suite.mteb.tasks is empty"):
        plan_for(tmp_path, {})
    write_sts_task(tmp_path / "mteb" / "STS12")
    write_sts_task(tmp_path / "elsewhere" / "sick")
    plan, key = plan_for(tmp_path, {"tasks": ["STS12", "SICK-R", "STS13"], "local": {"SICK-R": "elsewhere/sick"}})
    params = plan.node(key).settings
    assert params["mteb"] == {"STS12": str(tmp_path / "mteb" / "STS12"), "SICK-R": str(tmp_path / "elsewhere" / "sick"),
                              "STS13": "hub"}
    assert params["mteb_version"] == "2.99.0" and params["digests"]["mteb:STS13"] == "hub"
    assert params["digests"]["mteb:STS12"].startswith("tree:")
    assert plan.raw_inputs(key) == sorted([params["mteb"]["STS12"], params["mteb"]["SICK-R"]])
    # the data enter the key by content, the mteb version too
    (tmp_path / "mteb" / "STS12" / "test.jsonl").write_text(json.dumps({"sentence1": "a", "sentence2": "b",
                                                                         "score": 1}) + "\n")
    _, changed = plan_for(tmp_path, {"tasks": ["STS12", "SICK-R", "STS13"], "local": {"SICK-R": "elsewhere/sick"}})
    monkeypatch.setattr(suite_files, "mteb_version", lambda: "2.99.1")
    _, upgraded = plan_for(tmp_path, {"tasks": ["STS12", "SICK-R", "STS13"], "local": {"SICK-R": "elsewhere/sick"}})
    assert len({key, changed, upgraded}) == 3
    # offline without a copy: listed as skipped, not run
    plan, key = plan_for(tmp_path, {"tasks": ["STS12", "STS13"], "hub": False})
    params = plan.node(key).settings
    assert params["mteb"] == {"STS12": str(tmp_path / "mteb" / "STS12")}
    assert params["skipped"] == {"mteb:STS13": f"no directory {tmp_path / 'mteb' / 'STS13'} "
                                               "(and suite.mteb.hub is false)"}


def test_mteb_sts_task_on_local_files_scores_the_cosine_spearman(tmp_path, tiny_model, monkeypatch):
    pytest.importorskip("mteb", reason="the optional extra augsbert[mteb] is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # local data only: a hub request would fail the test
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    from sentence_transformers import SentenceTransformer

    from augsbert.evaluation.similarity import Encoder, correlations
    from augsbert.jobs import suite
    from augsbert.reporting import results

    write_sts_task(tmp_path / "mteb" / "STS12")
    params = {"sts": {}, "useb": {}, "skipped": {}, "batch_size": 4, "max_length": 32, "model": tiny_model,
              "mteb": {"STS12": str(tmp_path / "mteb" / "STS12")}}
    metrics = suite.run({"params": params, "inputs": {"data": str(tmp_path)}}, tmp_path / "out", device="cpu")
    # the score MTEB computed on the six local pairs = the Spearman of cosine against gold, computed here
    model = SentenceTransformer(tiny_model, device="cpu")
    expected = correlations(Encoder(model).cosine([(a, b) for a, b, _ in PAIRS]), [s for *_, s in PAIRS])["spearman"]
    task = metrics["mteb"]["tasks"]["STS12"]
    assert task["main_metric"] == "cosine_spearman" and task["main_score"] == pytest.approx(expected, abs=1e-6)
    assert metrics["summary"]["mteb_STS12"] == metrics["summary"]["mteb_avg"] == task["main_score"]
    assert task["source"] == str(tmp_path / "mteb" / "STS12") and task["scores"]["test"][0]["hf_subset"] == "default"
    stored = json.loads((tmp_path / "out" / "mteb" / "STS12.json").read_text())  # MTEB's own result file
    assert stored["task_name"] == "STS12" and stored["scores"]["test"][0]["main_score"] == pytest.approx(
        expected / 100, abs=1e-6)
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["summary"]["mteb_STS12"] == pytest.approx(
        expected)
    # the results file takes the suite summary into every seed and the mean over seeds
    entry = results._model_entry("zero_shot", {"42": {"spearman": 50.0, "pearson": 50.0, "n_pairs": 6,
                                                      **metrics["summary"]}}, metrics["skipped"], {})
    assert entry["summary"]["mteb_STS12"]["mean"] == pytest.approx(round(expected, 4))
    # an unknown task name stops the job with the name
    with pytest.raises(DataError, match=r"'NoSuchTask' is not an MTEB task"):
        mteb_module.load_task("NoSuchTask")
