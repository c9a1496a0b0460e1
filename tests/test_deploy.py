"""The deploy environment's export (issue 58): `augsbert export --backend onnx|openvino` runs
augsbert/export/deploy_convert.py in .venv-deploy/ (`make deploy-env`), and a parity gate stands before the export.

The tests that convert need the deploy environment: they run wherever it exists (a checkout after
`make deploy-env`, or AUGSBERT_DEPLOY_PYTHON naming one) and skip with the reason elsewhere."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from augsbert.export import backends
from augsbert.export.backends import (BackendError, backend_available, card_section, check_parity, deploy_python,
                                    parity_sentences)

CONVERTER = backends.CONVERTER
DEPLOY = deploy_python()
needs_deploy = pytest.mark.skipif(DEPLOY is None, reason=f"no deploy environment: {backend_available('onnx')}")


def test_the_deploy_environment_pins_the_main_environment_s_sentence_transformers():
    """Issue 64, 14: the main environment resolved sentence-transformers 6.3.0 and the deploy environment pinned
    6.2.0, so loading an export there warned that the model was made with a newer version. The pin follows the
    main environment where the deploy set allows it (6.3.0 asks transformers >= 5.0, < 6: the set's 5.5.4)."""
    from importlib.metadata import version

    pins = dict(line.split("==") for line in (Path(__file__).parents[1] / "requirements" / "deploy.txt").read_text()
                .splitlines() if "==" in line and not line.startswith("#"))
    assert pins["sentence-transformers"] == version("sentence-transformers")


@pytest.mark.parametrize("script", [CONVERTER, CONVERTER.with_name("deploy_speed.py")], ids=lambda p: p.name)
def test_the_deploy_scripts_import_nothing_of_augsbert(script):
    """Run by the deploy environment's Python by their path (the converter; the frontier's timing, also by this
    environment's): no import of augsbert (whose modules need the main environment's versions), no relative
    import; their module level imports only the standard library."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [n for n in imported if n.split(".")[0] == "augsbert"]
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    top = [alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
    top += [node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert set(top) <= set(sys.stdlib_module_names) | {"__future__"}, top
    # loaded as the deploy environment loads it (by path), nothing of augsbert enters sys.modules
    code = ("import runpy, sys; runpy.run_path(sys.argv[1], run_name='deploy_convert'); "
            "print([m for m in sys.modules if m.split('.')[0] == 'augsbert'])")
    done = subprocess.run([sys.executable, "-c", code, str(script)], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "[]"


def test_the_converter_names_the_files_the_card_names():
    import runpy

    converter = runpy.run_path(str(CONVERTER), run_name="deploy_convert")
    for backend in ("onnx", "openvino"):
        for quantize in (None, "int8"):
            for config in backends.ONNX_CONFIGS:
                assert converter["backend_file"](backend, quantize, config) == \
                    backends.backend_file(backend, quantize, config)
    assert set(converter["ONNX_QUANTIZATION"]) == set(backends.ONNX_CONFIGS)


def test_a_missing_deploy_environment_is_one_line_naming_make_deploy_env(monkeypatch, tmp_path):
    monkeypatch.setenv(backends.DEPLOY_PYTHON_VARIABLE, str(tmp_path / "nothere" / "python"))
    message = backend_available("openvino")
    assert message == (f"--backend openvino runs in the deploy environment, which is missing "
                       f"(AUGSBERT_DEPLOY_PYTHON={tmp_path / 'nothere' / 'python'} is not a file): create it with "
                       "`make deploy-env` in the augsbert checkout")
    with pytest.raises(BackendError, match="make deploy-env"):
        backends.run_conversion(tmp_path, "openvino", "int8", "avx512_vnni", [], ["a"], np.ones((1, 2)), {})


def test_the_parity_gate_refuses_below_it_with_the_figures_unless_accepted():
    record = {"backend": "onnx", "quantize": "int8", "file": "onnx/model_qint8_avx2.onnx",
              "parity": {"sentences": 100, "min_cosine": 0.951, "mean_cosine": 0.9899, "test_pairs": 1379,
                         "test_spearman": 80.5}}
    with pytest.raises(BackendError) as refused:
        check_parity(record, 82.034, accept=False)
    assert str(refused.value) == (
        "--backend onnx --quantize int8 refused by the parity gate (mean cosine >= 0.99): cosine with the PyTorch "
        "model's embeddings of 100 test sentences: mean 0.9899, min 0.951; test Spearman 80.50 on 1379 pairs "
        "(PyTorch 82.03); nothing was written. Export it anyway with --accept-parity-loss, or try another "
        "--quantize-config / no --quantize")
    accepted = check_parity(record, 82.034, accept=True)["parity"]
    assert accepted["passed"] is False and accepted["accepted_below_gate"] is True
    assert accepted["torch_test_spearman"] == 82.03
    passed = check_parity({**record, "parity": {**record["parity"], "mean_cosine": 0.99}}, None, accept=False)
    assert passed["parity"]["passed"] is True and "accepted_below_gate" not in passed["parity"]
    with pytest.raises(BackendError, match="parity gate"):  # a conversion that measured nothing passes nothing
        check_parity({**record, "parity": {}}, None, accept=False)


def test_parity_sentences_are_100_spread_over_the_test_split_then_dev_then_train_none_calibrated():
    """Issue 65 item 6: the gate's sentences were the first 100 of the test split, filled up from dev and train,
    the calibration's own training sentences among them. Now each split is sampled across it (a split ordered
    by genre is not cut after its first) and no sentence the calibration saw is one."""
    import pandas as pd

    from augsbert.export.backends import spread

    assert spread([f"s{i}" for i in range(10)], 4) == ["s0", "s2", "s5", "s7"]
    assert spread(["a", "b"], 4) == ["a", "b"]
    test = pd.DataFrame({"sentence1": [f"s{i}" for i in range(80)], "sentence2": [f"s{i + 1}" for i in range(80)]})
    dev = pd.DataFrame({"sentence1": ["s3", "d1"], "sentence2": ["d2", " "]})
    train = pd.DataFrame({"sentence1": [f"t{i}" for i in range(50)], "sentence2": [f"u{i}" for i in range(50)]})
    calibration = [f"t{i}" for i in range(50)]  # every sentence1 of train
    assert parity_sentences(test, dev, train, calibration=calibration) == [
        *[f"s{i}" for i in range(81)], "d2", "d1", *spread([f"u{i}" for i in range(50)], 17)]
    assert parity_sentences(test, dev, train)[83:] == spread([t for i in range(50) for t in (f"t{i}", f"u{i}")], 17)
    long = pd.DataFrame({"sentence1": [f"a{i}" for i in range(200)], "sentence2": [f"b{i}" for i in range(200)]})
    chosen = parity_sentences(long, None)
    assert len(chosen) == 100 and chosen[:3] == ["a0", "a2", "a4"] and chosen[-1] == "a198"  # every 4th of 400


def test_calibration_is_300_training_sentences_never_a_dev_or_test_one(tmp_path):
    """Static int8 calibration: CALIBRATION_SENTENCES spread over the train split and the unlabelled texts (Lee's
    25 training documents alone were the 25 it had), never a dev or test sentence; the gate's provenance says
    where its sentences came from and that the calibration saw none."""
    import pandas as pd

    from augsbert.export.backends import CALIBRATION_SENTENCES, calibration_sentences, parity_provenance

    data = tmp_path / "data"
    data.mkdir()
    pairs = lambda prefix, n: pd.DataFrame({"sentence1": [f"{prefix} {i} a" for i in range(n)],  # noqa: E731
                                            "sentence2": [f"{prefix} {i} b" for i in range(n)], "score": 0.5})
    train, dev, test = pairs("train", 100), pairs("dev", 20), pairs("test", 30)
    train.loc[0, "sentence1"] = "test 0 a"  # a test sentence among the train pairs: never calibrated on
    for name, frame in (("train", train), ("dev", dev), ("test", test)):
        frame.to_parquet(data / f"{name}.parquet")
    pd.DataFrame({"text": [f"unlabelled {i}" for i in range(250)]}).to_parquet(data / "unlabeled.parquet")
    artifact = tmp_path / "student"
    artifact.mkdir()
    (artifact / "spec.json").write_text(json.dumps({"inputs": {"data": str(data)}}))
    calibration = calibration_sentences(artifact)
    pool = sorted({*train["sentence1"], *train["sentence2"], *[f"unlabelled {i}" for i in range(250)]} - {"test 0 a"})
    assert len(pool) == 449 and calibration == [pool[(i * 449) // 300] for i in range(300)]
    assert len(calibration) == CALIBRATION_SENTENCES
    assert not set(calibration) & {*dev["sentence1"], *dev["sentence2"], *test["sentence1"], *test["sentence2"]}
    assert any(t.startswith("unlabelled") for t in calibration) and any(t.startswith("train") for t in calibration)
    sentences = parity_sentences(test, dev, train, calibration=calibration)
    assert len(sentences) == 100 and parity_provenance(sentences, calibration, test, dev) == {
        "split_sentences": {"test": 60, "dev": 40, "train": 0}, "calibration_sentences": 300,
        "calibration_overlap": 0}


def test_card_section_states_the_parity_and_the_loading_line():
    record = {"backend": "openvino", "quantize": "int8", "calibration_sentences": 300,
              "file": "openvino/openvino_model_qint8_quantized.xml", "versions": {"openvino": "2026.4.1"},
              "parity": {"sentences": 100, "min_cosine": 0.991, "mean_cosine": 0.998, "test_pairs": 9,
                         "test_spearman": 60.0, "torch_test_spearman": 60.25, "gate": "mean cosine >= 0.99",
                         "passed": True}}
    text = card_section(record, "models/x")
    assert ("| parity (mean cosine >= 0.99) | cosine with the PyTorch model's embeddings of 100 test sentences: "
            "mean 0.998, min 0.991; test Spearman 60.00 on 9 pairs (PyTorch 60.25); passed |") in text
    assert "openvino 2026.4.1" in text and "calibrated on 300 sentences of its training data, no dev or test" in text
    held_out = {**record["parity"], "split_sentences": {"test": 60, "dev": 40, "train": 0},
                "calibration_sentences": 300, "calibration_overlap": 0}
    assert ("embeddings of 100 sentences (test 60, dev 40), none of the 300 the int8 calibration saw: mean 0.998, "
            "min 0.991; test Spearman 60.00") in card_section({**record, "parity": held_out}, "models/x")
    assert ("SentenceTransformer('models/x', backend='openvino', "
            'model_kwargs={"file_name": "openvino/openvino_model_qint8_quantized.xml"})') in text


# ---- in the deploy environment ---------------------------------------------------------------------------------

def _texts() -> list[str]:
    from conftest import theme_pairs

    return [t for pair in theme_pairs(50, 5)[["sentence1", "sentence2"]].to_numpy() for t in pair]


@needs_deploy
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_int8_conversion_of_the_tiny_model_keeps_its_embeddings(tmp_path, tiny_model, backend):
    """Parity >= 0.99 on 100 sentences, measured by the deploy environment on the file it wrote; the PyTorch
    reference is computed here, in the main environment."""
    import shutil

    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "export"
    shutil.copytree(tiny_model, folder)
    texts = _texts()
    reference = SentenceTransformer(str(folder), device="cpu").encode(texts)
    record = backends.run_conversion(folder, backend, "int8", "avx2", texts, texts, reference, {}, threads=1)
    assert (folder / record["file"]).is_file() and record["file"] == backends.backend_file(backend, "int8", "avx2")
    assert record["parity"]["sentences"] == 100 and record["parity"]["mean_cosine"] >= 0.99
    assert check_parity(record, None, accept=False)["parity"]["passed"]
    assert record["versions"]["transformers"].startswith("5.5.")
    # the card's usage lines, run as written in the deploy environment, give the exported model's embeddings
    embedded = np.array(_run_card_code(card_section(record, str(folder)), texts[:8]))
    assert embedded.shape == reference[:8].shape
    unit = reference[:8] / np.linalg.norm(reference[:8], axis=1, keepdims=True)
    assert ((embedded / np.linalg.norm(embedded, axis=1, keepdims=True)) * unit).sum(1).mean() >= 0.99


def _run_card_code(card: str, sentences: list[str]):
    """The card's python block with `sentences` given, run by the deploy environment's Python; its embeddings."""
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    if "SentenceTransformer(" in code:
        code += "embeddings = model.encode(sentences)\n"
    script = f"import json\nsentences = {sentences!r}\n{code}\nprint(json.dumps(embeddings.tolist()))\n"
    done = subprocess.run([str(DEPLOY), "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_deploy
def test_export_of_a_student_passes_the_gate_and_loads_in_the_deploy_environment(experiment, tmp_path):
    from augsbert.export.export import export

    import pandas as pd

    from conftest import theme_pairs

    data = Path("artifacts/data/lee-0000000000")  # the fixture's data holds train pairs only: a test split too
    theme_pairs(80, 7).to_parquet(data / "test.parquet")
    out = tmp_path / "deploy" / "student"
    record = export(experiment, "student", out, backend="openvino", quantize="int8")
    deployment = record["deployment"]
    assert deployment["parity"]["passed"] and deployment["parity"]["torch_test_spearman"] is not None
    # calibrated on the training sentences (8 distinct), gated on 100 test ones it did not see
    calibration = set(pd.read_parquet(data / "train.parquet")[["sentence1", "sentence2"]].to_numpy().ravel())
    assert deployment["calibration_sentences"] == len(calibration) == 8
    assert deployment["parity"]["split_sentences"] == {"test": 100, "dev": 0, "train": 0}
    assert deployment["parity"]["calibration_overlap"] == 0 and deployment["parity"]["sentences"] == 100
    assert json.loads((out / "augsbert_export.json").read_text())["deployment"]["parity"] == deployment["parity"]
    assert "| parity (mean cosine >= 0.99) |" in (out / "README.md").read_text()
    code = ("import sys; from sentence_transformers import SentenceTransformer; m = SentenceTransformer(sys.argv[1], "
            "backend='openvino', model_kwargs={'file_name': sys.argv[2]}); print(m.encode(['a dog', 'a cat']).shape)")
    done = subprocess.run([str(DEPLOY), "-c", code, str(out), deployment["file"]], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].startswith("(2, ")


from test_export import experiment, finished_experiment  # noqa: E402,F401  (the exported experiment's fixtures)


# ---- ONNX through sentence-transformers: one switch, and a test that says when to flip it ------------------------

ONNX_RECORD = {"backend": "onnx", "quantize": "int8", "quantize_config": "avx2", "max_seq_length": 64,
               "pooling": "mean", "normalize": True, "file": "onnx/model_qint8_avx2.onnx"}


def test_the_onnx_card_loads_with_onnx_runtime_and_one_switch_changes_that(monkeypatch):
    """Issue 65 item 5: the card shows the ONNX Runtime code (run as written by the deploy tests) and says why not
    `backend="onnx"`; the day optimum-onnx allows it, backends.ONNX_THROUGH_SENTENCE_TRANSFORMERS is the change."""
    text = card_section(ONNX_RECORD, "models/x")
    assert "session = onnxruntime.InferenceSession('models/x/onnx/model_qint8_avx2.onnx')" in text
    assert ("not with `SentenceTransformer(path, backend=\"onnx\")`: sentence-transformers 6 loads ONNX only "
            "through optimum-onnx, whose newest release (0.1.0) needs transformers < 4.58") in text
    monkeypatch.setattr(backends, "ONNX_THROUGH_SENTENCE_TRANSFORMERS", True)
    switched = card_section(ONNX_RECORD, "models/x")
    assert ("model = SentenceTransformer('models/x', backend='onnx', "
            'model_kwargs={"file_name": "onnx/model_qint8_avx2.onnx"})') in switched
    assert "onnxruntime" not in switched


def _optimum_onnx() -> dict:
    """What the deploy environment holds of optimum-onnx: its version, its transformers requirement, whether
    ORTModelForFeatureExtraction imports, and the environment's transformers."""
    code = ("import json, importlib.metadata as m\n"
            "found = {'transformers': m.version('transformers')}\n"
            "try:\n"
            "    found['version'] = m.version('optimum-onnx')\n"
            "    found['requires'] = [r for r in m.requires('optimum-onnx') or [] if r.startswith('transformers')]\n"
            "    from optimum.onnxruntime import ORTModelForFeatureExtraction\n"
            "    found['imports'] = True\n"
            "except Exception as err:\n"
            "    found['error'] = f'{type(err).__name__}: {err}'.splitlines()[0]\n"
            "print(json.dumps(found))\n")
    done = subprocess.run([str(DEPLOY), "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_deploy
def test_onnx_loads_through_sentence_transformers_once_optimum_onnx_allows_it(tmp_path, tiny_model):
    """Skips while the deploy environment has no optimum-onnx that imports beside its transformers (today: 0.1.0,
    the newest, requires transformers < 4.58). Once one is added to requirements/deploy.txt it loads the ONNX export
    with `SentenceTransformer(path, backend="onnx")`, checks it against ONNX Runtime, and fails until the card
    shows that line (backends.ONNX_THROUGH_SENTENCE_TRANSFORMERS = True)."""
    import shutil

    from sentence_transformers import SentenceTransformer

    found = _optimum_onnx()
    if not found.get("imports"):
        pytest.skip(f"the deploy environment (transformers {found['transformers']}) has no optimum-onnx that "
                    f"imports ({found.get('version', 'not installed')}: {found.get('error')}): sentence-transformers "
                    "loads ONNX only through it, and its newest release, 0.1.0, requires transformers < 4.58; when "
                    "one accepts the deploy environment's transformers, add it to requirements/deploy.txt")
    folder = tmp_path / "export"
    shutil.copytree(tiny_model, folder)
    texts = _texts()
    reference = SentenceTransformer(str(folder), device="cpu").encode(texts)
    record = backends.run_conversion(folder, "onnx", "int8", "avx2", [], texts, reference, {}, threads=1)
    direct = np.array(_run_card_code(backends.card_section({**record, "backend": "onnx"}, str(folder)), texts[:8]))
    code = ("import json, sys; from sentence_transformers import SentenceTransformer\n"
            "m = SentenceTransformer(sys.argv[1], backend='onnx', model_kwargs={'file_name': sys.argv[2]})\n"
            "print(json.dumps(m.encode(json.loads(sys.argv[3])).tolist()))\n")
    done = subprocess.run([str(DEPLOY), "-c", code, str(folder), record["file"], json.dumps(texts[:8])],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    through = np.array(json.loads(done.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(through, direct, atol=1e-4)
    assert backends.ONNX_THROUGH_SENTENCE_TRANSFORMERS, (
        f"optimum-onnx {found['version']} loads the ONNX export through sentence-transformers: set "
        "augsbert.export.backends.ONNX_THROUGH_SENTENCE_TRANSFORMERS = True (the card then shows backend='onnx')")


@needs_deploy
def test_the_frontier_times_pytorch_onnx_and_openvino_rows_in_one_deploy_process(tmp_path, tiny_model):
    """A frontier with exported rows is timed by the deploy environment's Python, every row in that one process
    (augsbert.export.frontier.time_rows, deploy_speed.py); the size of an int8 row is what its backend reads."""
    import shutil

    from sentence_transformers import SentenceTransformer

    from augsbert.export.frontier import time_rows

    texts = _texts()
    reference = SentenceTransformer(tiny_model, device="cpu").encode(texts)
    exports = {}
    for backend in ("onnx", "openvino"):
        folder = tmp_path / backend
        shutil.copytree(tiny_model, folder)
        exports[backend] = backends.run_conversion(folder, backend, "int8", "avx2", texts, texts, reference, {},
                                                   threads=1)["file"]
    rows = [{"name": "c/full", "path": tiny_model, "backend": "torch", "file": None, "texts": "c"},
            *[{"name": f"c/full_{b}_int8", "path": str(tmp_path / b), "backend": b, "file": f, "texts": "c"}
              for b, f in exports.items()]]
    speed = time_rows(rows, {"c": texts[:40]}, {"threads": 1, "repeat": 1, "batch_size": 16})
    assert Path(speed["python"]).parent.parent.name == DEPLOY.parent.parent.name and speed["threads"] == 1
    assert [r["name"] for r in speed["rows"]] == ["c/full", "c/full_onnx_int8", "c/full_openvino_int8"]
    assert all(r["sentences_per_s"] > 0 and r["sentences"] == 40 for r in speed["rows"])
    weights = (Path(tiny_model) / "model.safetensors").stat().st_size / 1e6
    torch_mb, onnx_mb, openvino_mb = (r["size_mb"] for r in speed["rows"])
    assert torch_mb > weights and onnx_mb < torch_mb and openvino_mb < torch_mb  # no PyTorch weights counted


def _bare_environment(folder: Path) -> Path:
    """A stand-in for a broken deploy environment: a virtual environment without a single package."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder / "bin" / "python"


def test_x10_a_broken_deploy_environment_names_the_fix(monkeypatch, tmp_path):
    """Issue 64 X10: a deploy environment missing a package failed with `ModuleNotFoundError: No module named 'numpy'`
    and no fix; the message names `make deploy-env` (which builds such an environment anew: the next test)."""
    monkeypatch.delenv(backends.DEPLOY_PYTHON_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    python = _bare_environment(tmp_path / ".venv-deploy")
    with pytest.raises(BackendError) as err:
        backends.run_conversion(tmp_path, "onnx", None, "avx512_vnni", [], ["a"], np.ones((1, 2)), {})
    assert str(err.value) == (
        f"--backend onnx: the conversion in the deploy environment ({python}) failed: "
        "ModuleNotFoundError: No module named 'numpy'; the deploy environment is missing a package: run `make "
        "deploy-env` in the augsbert checkout, which builds it anew when its packages do not import (`make deploy-env "
        "FORCE=1` always does)")
    monkeypatch.setenv(backends.DEPLOY_PYTHON_VARIABLE, str(python))  # another environment, named: it is yours
    with pytest.raises(BackendError, match="; the environment AUGSBERT_DEPLOY_PYTHON names is missing a package: "
                                           "install requirements/deploy.txt into it, or unset AUGSBERT_DEPLOY_PYTHON"):
        backends.run_conversion(tmp_path, "onnx", None, "avx512_vnni", [], ["a"], np.ones((1, 2)), {})


def test_x10_make_deploy_env_builds_anew_an_environment_that_does_not_import_its_packages(tmp_path):
    """Issue 64 X10: `make deploy-env` did nothing while `.venv-deploy/.installed` was newer than
    requirements/deploy.txt, so the obvious fix did not repair a broken environment. It checks the imports (the
    stand-in: a bare environment) and builds a failing one anew, as it does any with FORCE=1; one that imports them
    is left as it is. `make -n`: what it would run, nothing downloaded."""
    import os
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no make")
    makefile = Path(__file__).parents[1] / "Makefile"
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "deploy.txt").write_text("numpy==2.4.6\n")
    os.utime(tmp_path / "requirements" / "deploy.txt", (1e9, 1e9))  # older than the environment
    _bare_environment(tmp_path / "env")
    (tmp_path / "env" / ".installed").touch()

    def make(*variables: str) -> str:
        # a make of its own, not a sub-make of CI's `make test` (which would prefix its lines with make[1]:)
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        done = subprocess.run(["make", "-n", "-f", str(makefile), "deploy-env", "DEPLOY_VENV=env", *variables],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = make()
    assert out.splitlines()[:2] == ["env: it does not import its packages (ModuleNotFoundError: No module named "
                                    "'sentence_transformers'); removing it and building it anew", "rm -rf env"], out
    assert "env/bin/python -m pip install --no-deps -r requirements/deploy.txt" in out and "touch env/.installed" in out
    assert make("DEPLOY_IMPORTS=import json").strip() == "make: Nothing to be done for 'deploy-env'."
    forced = make("DEPLOY_IMPORTS=import json", "FORCE=1")
    assert forced.splitlines()[:2] == ["env: FORCE=1; removing it and building it anew", "rm -rf env"], forced
    assert (tmp_path / "env" / ".installed").is_file()  # `make -n` ran nothing
