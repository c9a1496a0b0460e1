"""The deploy environment's export (issue 58): `augsbert export --backend onnx|openvino` runs
augsbert/face/deploy_convert.py in .venv-deploy/ (`make deploy-env`), and a parity gate stands before the export.

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

from augsbert.face import backends
from augsbert.face.backends import (BackendError, backend_available, card_section, check_parity, deploy_python,
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


def test_the_converter_imports_nothing_of_augsbert():
    """Run by the deploy environment's Python by its path: no import of augsbert (whose modules need the main
    environment's versions), no relative import; its module level imports only the standard library."""
    tree = ast.parse(CONVERTER.read_text(encoding="utf-8"))
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
    done = subprocess.run([sys.executable, "-c", code, str(CONVERTER)], capture_output=True, text=True, check=True,
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


def test_parity_sentences_are_the_first_100_distinct_of_the_test_split_then_dev_then_train():
    import pandas as pd

    test = pd.DataFrame({"sentence1": [f"s{i}" for i in range(80)], "sentence2": [f"s{i + 1}" for i in range(80)]})
    dev = pd.DataFrame({"sentence1": ["s3", "d1"], "sentence2": ["d2", " "]})
    train = pd.DataFrame({"sentence1": [f"t{i}" for i in range(50)], "sentence2": [f"u{i}" for i in range(50)]})
    assert parity_sentences(test, dev, train) == [*[f"s{i}" for i in range(81)], "d2", "d1",
                                                  *[t for i in range(9) for t in (f"t{i}", f"u{i}")][:17]]
    test = pd.DataFrame({"sentence1": [f"a{i}" for i in range(80)], "sentence2": [f"b{i}" for i in range(80)]})
    assert parity_sentences(test, None)[:4] == ["a0", "b0", "a1", "b1"] and len(parity_sentences(test)) == 100


def test_card_section_states_the_parity_and_the_loading_line():
    record = {"backend": "openvino", "quantize": "int8", "calibration_sentences": 300,
              "file": "openvino/openvino_model_qint8_quantized.xml", "versions": {"openvino": "2026.4.1"},
              "parity": {"sentences": 100, "min_cosine": 0.991, "mean_cosine": 0.998, "test_pairs": 9,
                         "test_spearman": 60.0, "torch_test_spearman": 60.25, "gate": "mean cosine >= 0.99",
                         "passed": True}}
    text = card_section(record, "models/x")
    assert ("| parity (mean cosine >= 0.99) | cosine with the PyTorch model's embeddings of 100 test sentences: "
            "mean 0.998, min 0.991; test Spearman 60.00 on 9 pairs (PyTorch 60.25); passed |") in text
    assert "openvino 2026.4.1" in text and "calibrated on 300 training sentences" in text
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
    from augsbert.face.export import export

    out = tmp_path / "deploy" / "student"
    record = export(experiment, "student", out, backend="openvino", quantize="int8")
    deployment = record["deployment"]
    assert deployment["parity"]["passed"] and deployment["parity"]["torch_test_spearman"] is not None
    assert json.loads((out / "augsbert_export.json").read_text())["deployment"]["parity"] == deployment["parity"]
    assert "| parity (mean cosine >= 0.99) |" in (out / "README.md").read_text()
    code = ("import sys; from sentence_transformers import SentenceTransformer; m = SentenceTransformer(sys.argv[1], "
            "backend='openvino', model_kwargs={'file_name': sys.argv[2]}); print(m.encode(['a dog', 'a cat']).shape)")
    done = subprocess.run([str(DEPLOY), "-c", code, str(out), deployment["file"]], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].startswith("(2, ")


from test_export import experiment, finished_experiment  # noqa: E402,F401  (the exported experiment's fixtures)


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
        done = subprocess.run(["make", "-n", "-f", str(makefile), "deploy-env", "DEPLOY_VENV=env", *variables],
                              cwd=tmp_path, capture_output=True, text=True)
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
