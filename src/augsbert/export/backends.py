"""`augsbert export --backend onnx|openvino [--quantize int8]`: the exported Bi-Encoder in another runtime's format,
made in the deploy environment, and its parity gate.

The backends' packages (optimum-intel, OpenVINO, NNCF; optimum-onnx) do not install beside this project's
sentence-transformers 6 / transformers 5.24: optimum-intel 2.2.0 accepts transformers < 5.6, optimum-onnx 0.1.0
transformers < 4.58. So the conversion runs in a second virtual environment, `.venv-deploy/` (`make deploy-env`:
the pinned set of requirements/deploy.txt, sentence-transformers 6.3.0 with transformers 5.5.4), as a standalone
script (augsbert.export.deploy_convert, run by its path: it imports nothing of augsbert). The export writes the
SentenceTransformer directory here as always, then the script adds the backend's files to it.

The backends are one registry, `REGISTRY` (as `STRATEGIES` is for active learning): one `Backend` each, with its
name, title, file layout, converter (the function of deploy_convert.py that writes its files), card text and
whether it is a rule's target (`BACKEND_WILDCARD`, the constraint of workflow/rules/export.smk). Everything else
reads it; the names the standalone scripts (deploy_convert.py, deploy_speed.py), the schema's
grids.<grid>.frontier.backends and docs/guide/compact.md write are tied to it by tests/test_backends.py. A new
backend is one entry here plus its converter.

- ONNX: `torch.onnx.export` of the Transformer (optimum's feature-extraction inputs and output) into
  onnx/model.onnx; `--quantize int8`: ONNX Runtime's dynamic int8 with the settings of optimum's configuration
  `--quantize-config` (default `avx512_vnni`; `avx2` for CPUs without AVX-512, `arm64`), onnx/model_qint8_<config>.onnx;
- OpenVINO: sentence-transformers' own export (optimum-intel) into openvino/openvino_model.xml; `--quantize int8`:
  `export_static_quantized_openvino_model` (static int8, NNCF), calibrated on up to 300 of the model's training
  sentences (the library's default calibration set, GLUE SST-2, is on the hub), openvino_model_qint8_quantized.xml.

Parity gate (`check_parity`): the exported file's embeddings of the first 100 distinct sentences of the model's
test split (filled up from its dev and train splits where the test split has fewer) against the PyTorch model's (computed here, in this environment), mean cosine >= 0.99, and the test
split's Spearman of the exported model beside the PyTorch model's; both go into the card and augsbert_export.json.
An export below the gate is refused with the figures unless `--accept-parity-loss`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..stages.runs import INPUT_DATA
from ..store.artifacts import read_json

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Backend:
    """One runtime an export can be read with."""

    name: str  # what --backend, the rules' {backend} and the frontier's rows call it
    title: str  # what the frontier's labels and the card call it
    folder: str | None = None  # where its files go in the export (None: the SentenceTransformer folder itself)
    file: str | None = None  # the file it reads, float32
    int8_file: str | None = None  # the file it reads, int8 (`{config}`: the ONNX quantisation configuration)
    converter: str | None = None  # the function of deploy_convert.py that writes its files (None: none needed)
    made_by: str = ""  # the card's "made by"
    int8: str = ""  # the card's "quantisation" ({quantize_config}, {calibration_sentences}: the record's)
    configs: tuple[str, ...] = ()  # the --quantize-config choices
    calibrated: bool = False  # its int8 is static: calibrated on the model's training sentences

    @property
    def exported(self) -> bool:
        """Made in the deploy environment (an `augsbert export --backend` choice and a rule's target)."""
        return self.converter is not None


ONNX_CONFIGS = ("avx512_vnni", "avx512", "avx2", "arm64")
REGISTRY: dict[str, Backend] = {b.name: b for b in (
    Backend("torch", "PyTorch"),
    Backend("onnx", "ONNX", folder="onnx", file="onnx/model.onnx", int8_file="onnx/model_qint8_{config}.onnx",
            converter="export_onnx",
            made_by="`torch.onnx.export` of the Transformer (optimum's feature-extraction inputs and output)",
            int8="dynamic int8 (ONNX Runtime's `quantize_dynamic`, the settings of optimum's configuration "
                 "`{quantize_config}`)",
            configs=ONNX_CONFIGS),
    Backend("openvino", "OpenVINO", folder="openvino", file="openvino/openvino_model.xml",
            int8_file="openvino/openvino_model_qint8_quantized.xml", converter="export_openvino",
            made_by="sentence-transformers' OpenVINO export (optimum-intel)",
            int8="static int8 (NNCF post-training quantisation, `export_static_quantized_openvino_model`, calibrated "
                 "on {calibration_sentences} sentences of its training data, no dev or test sentence)",
            calibrated=True),
)}
BACKENDS = tuple(REGISTRY)  # the schema's grids.<grid>.frontier.backends lists the exported ones (tested)
EXPORTED = tuple(name for name, backend in REGISTRY.items() if backend.exported)
BACKEND_TITLES = {name: backend.title for name, backend in REGISTRY.items()}
BACKEND_WILDCARD = "|".join(EXPORTED)  # workflow/rules/export.smk's {backend}
QUANTIZATIONS = ("int8",)
# NNCF's default calibration subset (nncf.quantize(subset_size=300), optimum-intel's OVQuantizationConfig(num_samples=
# 300)): enough for the per-tensor ranges of a static int8 model; the 25 training documents a Lee model had were not
# (its OpenVINO int8 file, gated at 0.997 on Lee, gave 0.988 mean / 0.975 min cosine on STS-B sentences: issue 65)
CALIBRATION_SENTENCES = 300
PARITY_SENTENCES = 100
PARITY_MIN_COSINE = 0.99  # the gate: mean cosine of the exported and the PyTorch embeddings of the sentences
DEPLOY_ENV = ".venv-deploy"
DEPLOY_PYTHON_VARIABLE = "AUGSBERT_DEPLOY_PYTHON"  # another deploy environment's python
SETUP = "make deploy-env"
CONVERTER = Path(__file__).with_name("deploy_convert.py")
# where `make deploy-env` puts the environment: the working directory (a checkout), or the checkout this package
# is installed from in editable mode (src/augsbert/face -> the repository root)
CHECKOUT = Path(__file__).resolve().parents[3]


# sentence-transformers 6 loads an ONNX model only through optimum-onnx (`backend="onnx"`), whose newest release
# (0.1.0) requires transformers < 4.58; the deploy environment holds transformers 5.5 and so no optimum-onnx. The
# card therefore loads the ONNX file with ONNX Runtime (onnx_runtime_lines), the code tests/test_deploy.py runs as
# written. The day an optimum-onnx release accepts the deploy environment's transformers, add it to
# requirements/deploy.txt: tests/test_deploy.py then loads the export through sentence-transformers and fails until
# this is True, the one change that makes the card show `SentenceTransformer(path, backend="onnx", ...)`.
ONNX_THROUGH_SENTENCE_TRANSFORMERS = False


class BackendError(RuntimeError):
    """A backend export that cannot run here (no deploy environment), failed, or missed the parity gate."""


def deploy_python() -> Path | None:
    """The deploy environment's Python: $AUGSBERT_DEPLOY_PYTHON, else .venv-deploy/ of the working directory or of
    the checkout this package runs from; None where there is none."""
    named = os.environ.get(DEPLOY_PYTHON_VARIABLE)
    if named:
        return Path(named) if Path(named).is_file() else None
    for root in dict.fromkeys([Path.cwd(), CHECKOUT]):
        python = root / DEPLOY_ENV / "bin" / "python"
        if python.is_file():
            return python
    return None


def backend_available(backend: str) -> str | None:
    """None when `backend` can be exported here (the deploy environment exists), else why not, in one line."""
    if deploy_python() is not None:
        return None
    named = os.environ.get(DEPLOY_PYTHON_VARIABLE)
    where = (f"{DEPLOY_PYTHON_VARIABLE}={named} is not a file" if named else
             f"no {DEPLOY_ENV}/bin/python in {Path.cwd()}" + (f" or {CHECKOUT}" if CHECKOUT != Path.cwd() else ""))
    return (f"--backend {backend} runs in the deploy environment, which is missing ({where}): create it with "
            f"`{SETUP}` in the augsbert checkout")


def backend_file(backend: str, quantize: str | None, config: str = ONNX_CONFIGS[0]) -> str:
    """The file (relative to the export) that `backend` reads for this quantisation."""
    entry = REGISTRY[backend]
    return (entry.int8_file or "").format(config=config) if quantize else entry.file or ""


def backend_load_line(path: str, backend: str, quantize: str | None, config: str = ONNX_CONFIGS[0]) -> str:
    """The Python line that loads the export with `backend` (the quantised file named where there are two)."""
    if backend == "torch":
        return f"SentenceTransformer({path!r})"
    kwargs = f', model_kwargs={{"file_name": "{backend_file(backend, quantize, config)}"}}' if quantize else ""
    return f"SentenceTransformer({path!r}, backend={backend!r}{kwargs})"


def check_request(backend: str, quantize: str | None, config: str) -> None:
    if backend not in EXPORTED:
        raise BackendError(f"--backend {backend!r}: one of {', '.join(BACKENDS)}")
    if quantize not in (None, *QUANTIZATIONS):
        raise BackendError(f"--quantize {quantize!r}: one of {', '.join(QUANTIZATIONS)}")
    if REGISTRY[backend].configs and config not in REGISTRY[backend].configs:
        raise BackendError(f"--quantize-config {config!r}: one of {', '.join(REGISTRY[backend].configs)}")


def spread(texts: list[str], count: int) -> list[str]:
    """`count` of `texts` evenly spaced over them, in their order (all where there are fewer): a split ordered by
    genre (STS-B's captions come first) is sampled across its genres, not cut after the first."""
    if len(texts) <= count:
        return list(texts)
    return [texts[(i * len(texts)) // count] for i in range(count)]


def parity_sentences(*splits, calibration: list[str] | tuple = ()) -> list[str]:
    """The gate's sentences: up to PARITY_SENTENCES distinct ones of the model's splits in the order given (test,
    dev, train: the test split's first; a small test split, Lee's 15 documents, is filled up from the others),
    each split's spread over it (`spread`), sentence1 and sentence2 of each pair in order; a sentence the int8
    calibration saw is never one (`calibration`); a split that is None is skipped."""
    seen = {" ".join(t.split()) for t in calibration}  # a sentence's identity (augsbert.data.tables.normalise_text)
    chosen: list[str] = []
    for split in splits:
        if split is None or len(chosen) >= PARITY_SENTENCES:
            continue
        texts = [t for pair in zip(split["sentence1"].tolist(), split["sentence2"].tolist()) for t in pair
                 if isinstance(t, str) and t.strip() and " ".join(t.split()) not in seen]
        fresh = [t for t in dict.fromkeys(texts) if t not in chosen]
        chosen += spread(fresh, PARITY_SENTENCES - len(chosen))
    return chosen


def run_conversion(folder: Path, backend: str, quantize: str | None, config: str, calibration: list[str],
                   sentences: list[str], reference, test: dict, threads: int | None = None) -> dict:
    """Run deploy_convert.py in the deploy environment on the SentenceTransformer directory `folder`; returns its
    record (the file written, the parity figures, the versions it ran with)."""
    import numpy as np

    check_request(backend, quantize, config)
    missing = backend_available(backend)
    if missing:
        raise BackendError(missing)
    python = deploy_python()
    # the job's threads where Snakemake set them (OMP_NUM_THREADS = the rule's threads), else up to 4 cores
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = threads or (int(omp) if omp.isdigit() and int(omp) > 0 else min(os.cpu_count() or 1, 4))
    # the deploy environment's own packages only: nothing of this environment's path, offline (local files)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONNOUSERSITE="1", TQDM_DISABLE="1",
               OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory(prefix="augsbert-deploy-") as tmp:
        np.save(Path(tmp) / "reference.npy", np.asarray(reference, dtype=np.float32))
        request = {"folder": str(Path(folder).resolve()), "backend": backend, "quantize": quantize, "config": config,
                   "calibration": calibration, "sentences": sentences,
                   "reference": str(Path(tmp) / "reference.npy"), "test": test, "threads": threads}
        (Path(tmp) / "request.json").write_text(json.dumps(request), encoding="utf-8")
        log.info("export: converting to %s%s in the deploy environment (%s)", backend,
                 f" {quantize}" if quantize else "", python)
        done = subprocess.run([str(python), str(CONVERTER), str(Path(tmp) / "request.json"),
                               str(Path(tmp) / "result.json")], env=env, capture_output=True, text=True)
        for line in done.stderr.splitlines()[-40:]:
            log.debug("deploy: %s", line)
        if done.returncode != 0 or not (Path(tmp) / "result.json").is_file():
            last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or [f"exit code {done.returncode}"]
            raise BackendError(f"--backend {backend}: the conversion in the deploy environment ({python}) failed: "
                               f"{last[0].strip()[:300]}{broken_fix(last[0])}")
        return json.loads((Path(tmp) / "result.json").read_text(encoding="utf-8"))


def broken_fix(line: str) -> str:
    """What to do when the conversion's last error line says a package of the deploy environment does not import (one
    removed or damaged since `make deploy-env`, which then builds the environment anew); else nothing."""
    if not line.strip().startswith(("ModuleNotFoundError", "ImportError")):
        return ""
    named = os.environ.get(DEPLOY_PYTHON_VARIABLE)
    if named:
        return (f"; the environment {DEPLOY_PYTHON_VARIABLE} names is missing a package: install requirements/"
                f"deploy.txt into it, or unset {DEPLOY_PYTHON_VARIABLE} and run `{SETUP}` in the augsbert checkout")
    return (f"; the deploy environment is missing a package: run `{SETUP}` in the augsbert checkout, which builds it "
            f"anew when its packages do not import (`{SETUP} FORCE=1` always does)")


def check_parity(record: dict, torch_spearman: float | None, accept: bool) -> dict:
    """The parity gate on a conversion's record: adds the PyTorch model's test Spearman and the verdict; raises a
    BackendError with the figures when the mean cosine is below PARITY_MIN_COSINE and `accept` is false."""
    parity = dict(record.get("parity") or {})
    if torch_spearman is not None:
        parity["torch_test_spearman"] = round(float(torch_spearman), 2)
    parity["gate"] = f"mean cosine >= {PARITY_MIN_COSINE}"
    mean = parity.get("mean_cosine")
    parity["passed"] = mean is not None and mean >= PARITY_MIN_COSINE
    if not parity["passed"]:
        figures = parity_text(parity)
        if not accept:
            raise BackendError(f"--backend {record.get('backend')}{' --quantize ' + record['quantize'] if record.get('quantize') else ''}"
                               f" refused by the parity gate ({parity['gate']}): {figures}; nothing was written. "
                               "Export it anyway with --accept-parity-loss, or try another --quantize-config / no "
                               "--quantize")
        parity["accepted_below_gate"] = True
        log.warning("export: below the parity gate, accepted (--accept-parity-loss): %s", figures)
    return {**record, "parity": parity}


def parity_text(parity: dict) -> str:
    """The parity figures in one line."""
    where = "test sentences"
    if parity.get("split_sentences"):  # where the gate's sentences came from, and that the calibration saw none
        where = "sentences (" + ", ".join(f"{split} {n}" for split, n in parity["split_sentences"].items() if n) + ")"
        if parity.get("calibration_sentences"):
            where += f", none of the {parity['calibration_sentences']} the int8 calibration saw"
    text = (f"cosine with the PyTorch model's embeddings of {parity.get('sentences')} {where}: mean "
            f"{parity.get('mean_cosine')}, min {parity.get('min_cosine')}")
    if parity.get("test_spearman") is not None:
        text += f"; test Spearman {parity['test_spearman']:.2f} on {parity.get('test_pairs')} pairs"
        if parity.get("torch_test_spearman") is not None:
            text += f" (PyTorch {parity['torch_test_spearman']:.2f})"
    return text


def parity_provenance(sentences: list[str], calibration: list[str], test, dev) -> dict:
    """Where the gate's `sentences` came from (test, dev, train: counts) and how many the calibration saw (0: the
    gate is held out)."""
    def texts(split) -> set[str]:
        return set() if split is None else {*split["sentence1"].tolist(), *split["sentence2"].tolist()}

    in_test, in_dev = texts(test), texts(dev)
    seen = {" ".join(t.split()) for t in calibration}
    counts = {"test": sum(t in in_test for t in sentences)}
    counts["dev"] = sum(t in in_dev and t not in in_test for t in sentences)
    counts["train"] = len(sentences) - counts["test"] - counts["dev"]
    return {"split_sentences": counts, "calibration_sentences": len(calibration),
            "calibration_overlap": sum(" ".join(t.split()) in seen for t in sentences)}


def calibration_sentences(artifact: Path) -> list[str]:
    """What a static int8 quantisation is calibrated on: CALIBRATION_SENTENCES of the sentences of the model's
    training data (its `data` input's train split, then its unlabelled texts where it has them: Lee's 25 train
    documents alone are too few), spread over them (`spread`), never a dev or test sentence (those are the parity
    gate's)."""
    from ..data.pool import target_pool  # heavy (pandas): `augsbert --help` imports this module

    data = (read_json(artifact / "spec.json").get("inputs") or {}).get(INPUT_DATA)
    if not data:
        return []
    unlabelled = any((Path(data) / name).is_file() for name in ("unlabeled.parquet", "unlabeled_pairs.parquet"))
    pool, _, _ = target_pool(data, "train+unlabeled" if unlabelled else "train", exclude_eval=True,
                             option="export --quantize int8")
    return spread(pool, CALIBRATION_SENTENCES)


def card_section(record: dict, path: str) -> str:
    """The model card's deployment section: backend, quantisation, the file read, the parity figures and the line
    that loads it."""
    quantize = record.get("quantize")
    entry = REGISTRY[record["backend"]]
    versions = record.get("versions") or {}
    parity = record.get("parity") or {}
    rows = [f"| backend | {record['backend']} (the PyTorch weights are in the folder too) |",
            f"| made by | {entry.made_by}"
            + (f"; {', '.join(f'{k} {v}' for k, v in versions.items())}" if versions else "") + " |",
            f"| quantisation | {entry.int8.format_map(Fields(record)) if quantize else 'none (float32)'} |",
            f"| file | `{record['file']}` |"]
    if parity:
        verdict = ("passed" if parity.get("passed") else
                   "below the gate, exported with --accept-parity-loss" if parity.get("accepted_below_gate") else "")
        rows.append(f"| parity ({parity.get('gate', '')}) | {parity_text(parity)}; {verdict} |")
    lines = ["## Deployment (augsbert export)", "", "| | |", "| --- | --- |", *rows, ""]
    if record["backend"] == "onnx" and not ONNX_THROUGH_SENTENCE_TRANSFORMERS:
        lines += onnx_runtime_lines(path, record)
    else:
        lines += ["```python", "from sentence_transformers import SentenceTransformer", "",
                  f"model = {backend_load_line(path, record['backend'], quantize, record.get('quantize_config', ONNX_CONFIGS[0]))}",
                  "```", ""]
    return "\n".join(lines)


class Fields(dict):
    """A record's fields for a card text (`str.format_map`): a field it lacks reads None, as `record.get` does."""

    def __missing__(self, key):
        return None


def onnx_runtime_lines(path: str, record: dict) -> list[str]:
    """The card's ONNX usage: ONNX Runtime on the file, the model's pooling in NumPy. sentence-transformers'
    `backend="onnx"` needs optimum-onnx, which requires transformers < 4.58, and sentence-transformers 5.x (the
    releases that run beside it) cannot read a folder sentence-transformers 6 saved (its modules' new paths)."""
    pooling, normalize = record.get("pooling") or "mean", record.get("normalize", False)
    pooled = {"mean": ["mask = features[\"attention_mask\"][..., None]",
                       "embeddings = (hidden * mask).sum(1) / mask.sum(1)  # mean pooling (1_Pooling/config.json)"],
              "cls": ["embeddings = hidden[:, 0]  # CLS pooling (1_Pooling/config.json)"]}
    steps = pooled.get(pooling, [f"embeddings = ...  # {pooling} pooling: see 1_Pooling/config.json"])
    return ["```python", "import numpy as np", "import onnxruntime", "from transformers import AutoTokenizer", "",
            f"tokenizer = AutoTokenizer.from_pretrained({path!r})",
            f"session = onnxruntime.InferenceSession({path + '/' + record['file']!r})",
            "names = {i.name for i in session.get_inputs()}",
            f"features = tokenizer(sentences, padding=True, truncation=True, max_length={record.get('max_seq_length')}, "
            "return_tensors=\"np\")",
            "hidden = session.run(None, {k: v for k, v in features.items() if k in names})[0]  # last_hidden_state",
            *steps,
            *(["embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)  # the Normalize module"]
              if normalize else []),
            "```", "",
            "Load it with ONNX Runtime, as above, not with `SentenceTransformer(path, backend=\"onnx\")`: "
            "sentence-transformers 6 loads ONNX only through optimum-onnx, whose newest release (0.1.0) needs "
            "transformers < 4.58, and the sentence-transformers releases that run there (5.x) cannot read a folder "
            "6.x saved. The file itself is the one optimum-onnx's `ORTModelForFeatureExtraction` reads "
            "(`subfolder=\"onnx\"`), which `backend=\"onnx\"` wraps.", ""]
