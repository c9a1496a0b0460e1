"""`augsbert export --backend onnx|openvino [--quantize int8]`: the exported Bi-Encoder in another runtime's format.

Through sentence-transformers' own functions only (its "Speeding up Inference" page): the model is loaded with
`SentenceTransformer(folder, backend=...)` (Optimum exports it), saved beside the PyTorch weights
(`onnx/model.onnx`, `openvino/openvino_model.xml`), and with `--quantize int8`:

- ONNX: `export_dynamic_quantized_onnx_model` (dynamic int8: weights quantised, activations per batch; no
  calibration data) with one of ONNX Runtime's configurations (`--quantize-config`, default `avx512_vnni`,
  the library's benchmark choice; `avx2` for CPUs without AVX-512, `arm64` for ARM), written to
  `onnx/model_qint8_<config>.onnx`;
- OpenVINO: `export_static_quantized_openvino_model` (static int8, NNCF post-training quantisation), calibrated
  on the model's own training sentences (the library's default calibration set is GLUE SST-2 from the hub,
  which an offline run cannot read), written to `openvino/openvino_model_qint8_quantized.xml`.

The PyTorch weights stay in the folder, so it loads with every backend; the card and `augsbert_export.json` say
which file each backend reads and the line that loads it (`backend_load_line`).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZATIONS = ("int8",)
ONNX_CONFIGS = ("avx512_vnni", "avx512", "avx2", "arm64")
CALIBRATION_SENTENCES = 300  # as the library's default OVQuantizationConfig(num_samples=300)
# What to do where a backend's packages are missing. Not `pip install 'sentence-transformers[onnx]'` into .venv:
# optimum-onnx and optimum-intel require older transformers (and so sentence-transformers) than this project's,
# and pip would downgrade both (docs/guide/compact.md "Packages"; issue 56)
INSTALL = {backend: (f"its packages ({packages}) require older transformers and sentence-transformers than augsbert's "
                     "environment, and installing them into .venv would downgrade both: export with --backend "
                     f"{backend} from the separate environment that make deploy-env builds (docs/guide/export.md)")
           for backend, packages in (("onnx", "optimum-onnx, onnxruntime"), ("openvino", "optimum-intel, openvino"))}


class BackendError(RuntimeError):
    """A backend export that cannot run here (its packages missing) or failed."""


def backend_available(backend: str) -> str | None:
    """None when `backend` can be exported here, else why not (the import that fails and what to install)."""
    try:
        if backend == "onnx":
            import onnxruntime  # noqa: F401
            from optimum.onnxruntime import ORTModelForFeatureExtraction  # noqa: F401
        elif backend == "openvino":
            from optimum.intel.openvino import OVModelForFeatureExtraction  # noqa: F401
    except Exception as err:  # ImportError, or an Optimum built for another transformers (its own ImportError)
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}; {INSTALL[backend]}"
    return None


def backend_file(backend: str, quantize: str | None, config: str = ONNX_CONFIGS[0]) -> str:
    """The file (relative to the export) that `backend` reads for this quantisation."""
    if backend == "onnx":
        return f"onnx/model_qint8_{config}.onnx" if quantize else "onnx/model.onnx"
    return "openvino/openvino_model_qint8_quantized.xml" if quantize else "openvino/openvino_model.xml"


def backend_load_line(path: str, backend: str, quantize: str | None, config: str = ONNX_CONFIGS[0]) -> str:
    """The Python line that loads the export with `backend` (the quantised file named where there are two)."""
    if backend == "torch":
        return f"SentenceTransformer({path!r})"
    kwargs = f', model_kwargs={{"file_name": "{backend_file(backend, quantize, config)}"}}' if quantize else ""
    return f"SentenceTransformer({path!r}, backend={backend!r}{kwargs})"


def export_backend(folder: Path, backend: str, quantize: str | None = None, config: str = ONNX_CONFIGS[0],
                   calibration: list[str] | None = None) -> dict:
    """Add `backend`'s files (quantised with `quantize`) to the SentenceTransformer directory `folder`; returns
    what the card and the provenance record say of it."""
    from sentence_transformers import SentenceTransformer

    if backend not in BACKENDS[1:]:
        raise BackendError(f"--backend {backend!r}: one of {', '.join(BACKENDS)}")
    if quantize not in (None, *QUANTIZATIONS):
        raise BackendError(f"--quantize {quantize!r}: one of {', '.join(QUANTIZATIONS)}")
    if backend == "onnx" and config not in ONNX_CONFIGS:
        raise BackendError(f"--quantize-config {config!r}: one of {', '.join(ONNX_CONFIGS)}")
    missing = backend_available(backend)
    if missing:
        raise BackendError(f"--backend {backend} needs packages this environment lacks ({missing})")
    model = SentenceTransformer(str(folder), backend=backend, device="cpu", local_files_only=True,
                                model_kwargs={"export": True})
    model.save_pretrained(str(folder))  # the backend's files beside the PyTorch weights
    if quantize and backend == "onnx":
        from sentence_transformers import export_dynamic_quantized_onnx_model

        export_dynamic_quantized_onnx_model(model, config, str(folder), file_suffix=f"qint8_{config}")
    elif quantize:
        _openvino_int8(model, folder, calibration or [])
    written = backend_file(backend, quantize, config)
    if not (folder / written).is_file():
        raise BackendError(f"sentence-transformers wrote no {written} in {folder}")
    log.info("export: %s%s model %s", backend, f" {quantize}" if quantize else "", written)
    return {"backend": backend, "quantize": quantize, "file": written,
            **({"quantize_config": config} if quantize and backend == "onnx" else {}),
            **({"calibration_sentences": min(len(calibration or []), CALIBRATION_SENTENCES)}
               if quantize and backend == "openvino" else {})}


def _openvino_int8(model, folder: Path, calibration: list[str]) -> None:
    """Static int8 OpenVINO model calibrated on up to 300 of `calibration`, read as a local dataset (a folder
    holding train.csv, which `datasets.load_dataset` reads without the hub)."""
    import pandas as pd
    from optimum.intel import OVQuantizationConfig
    from sentence_transformers import export_static_quantized_openvino_model

    sentences = list(dict.fromkeys(s for s in calibration if s.strip()))[:CALIBRATION_SENTENCES]
    if not sentences:
        raise BackendError("--backend openvino --quantize int8 calibrates on the model's training sentences, "
                           "and none were found")
    with tempfile.TemporaryDirectory() as tmp:
        pd.DataFrame({"sentence": sentences}).to_csv(Path(tmp) / "train.csv", index=False)
        export_static_quantized_openvino_model(
            model, OVQuantizationConfig(num_samples=len(sentences)), str(folder), dataset_name=tmp,
            dataset_config_name="default", dataset_split="train", column_name="sentence",
            file_suffix="qint8_quantized")


def training_sentences(artifact: Path) -> list[str]:
    """The sentences of the model's training split (its `data` input), for an int8 calibration."""
    from ..data.pool import read_split
    from ..store.artifacts import read_json

    from ..stages.runs import INPUT_DATA

    data = (read_json(artifact / "spec.json").get("inputs") or {}).get(INPUT_DATA)
    if not data:
        return []
    train = read_split(data, "train")
    return [*train["sentence1"].tolist(), *train["sentence2"].tolist()]


def card_section(record: dict, path: str) -> str:
    """The model card's deployment section: backend, quantisation, the file read and the line that loads it."""
    quantize = record.get("quantize")
    how = {"onnx": "dynamic int8 (ONNX Runtime, `export_dynamic_quantized_onnx_model`, configuration "
                   f"`{record.get('quantize_config')}`)",
           "openvino": "static int8 (NNCF post-training quantisation, `export_static_quantized_openvino_model`, "
                       f"calibrated on {record.get('calibration_sentences')} training sentences)"}
    lines = ["## Deployment (augsbert export)", "",
             "| | |", "| --- | --- |",
             f"| backend | {record['backend']} (the PyTorch weights are in the folder too) |",
             f"| quantisation | {how[record['backend']] if quantize else 'none (float32)'} |",
             f"| file | `{record['file']}` |", "",
             "```python", "from sentence_transformers import SentenceTransformer", "",
             f"model = {backend_load_line(path, record['backend'], quantize, record.get('quantize_config', ONNX_CONFIGS[0]))}",
             "```", ""]
    return "\n".join(lines)
