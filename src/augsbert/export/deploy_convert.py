"""A Bi-Encoder's ONNX / OpenVINO files, made in the deploy environment (`make deploy-env`: .venv-deploy/, the
pinned set of requirements/deploy.txt), and their parity with the PyTorch model.

`augsbert export --backend onnx|openvino` runs this file as a script with the deploy environment's Python
(augsbert.export.backends.run_conversion): that environment holds sentence-transformers 6 with transformers 5.5, the
newest release optimum-intel accepts, beside optimum-intel, OpenVINO, NNCF and ONNX Runtime, none of which
installs beside the main environment's transformers. So this file imports nothing of augsbert (and nothing the
main environment has that this one lacks): only the standard library at import, the deploy environment's packages
inside the functions. tests/test_deploy.py checks that it imports no augsbert module.

    python deploy_convert.py REQUEST.json RESULT.json

REQUEST.json: {"folder": a SentenceTransformer directory (written by the export), "backend": "onnx" | "openvino",
"quantize": null | "int8", "config": ONNX Runtime's int8 configuration (avx512_vnni, avx512, avx2, arm64),
"calibration": [sentences] (OpenVINO int8), "sentences": [the parity sentences], "reference": a .npy file of the
PyTorch model's embeddings of them, "test": {"sentence1": [...], "sentence2": [...], "score": [...]}, "threads"}.

- OpenVINO: sentence-transformers' own functions (the model loaded with `backend="openvino"`, optimum-intel's export,
  saved as openvino/openvino_model.xml; int8: `export_static_quantized_openvino_model`, NNCF post-training static
  quantisation calibrated on the given sentences, read as a local csv dataset).
- ONNX: sentence-transformers loads an ONNX model through optimum-onnx, whose newest release (0.1.0) requires
  transformers < 4.58 and fails to import under transformers 5 (`get_parameter_dtype`); so the Transformer is
  exported by `torch.onnx.export` (the dynamo exporter: transformers 5's attention masks do not trace with the old
  one), with the inputs and output optimum's feature-extraction export has (input_ids, attention_mask
  [, token_type_ids] -> last_hidden_state), into onnx/model.onnx, and quantised by ONNX Runtime's
  `quantize_dynamic` with the settings of optimum's `AutoQuantizationConfig.<config>(is_static=False)` (what
  sentence-transformers' `export_dynamic_quantized_onnx_model` uses: weights int8 (uint8 for avx2), per channel,
  full range) into onnx/model_qint8_<config>.onnx. Here it is run by ONNX Runtime directly, its last hidden
  state through the model's own pooling modules; optimum-onnx's ORTModelForFeatureExtraction (what
  sentence-transformers' `backend="onnx"` wraps) reads the same file.

Parity: the exported model's embeddings of `sentences` against the reference (cosine, each sentence), and its
Spearman x 100 of cosine and gold on the test pairs. RESULT.json gets the record augsbert's card and
augsbert_export.json carry.
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
import time
from pathlib import Path

ONNX_QUANTIZATION = {  # optimum's AutoQuantizationConfig.<name>(is_static=False): weight type, per channel, 7-bit
    "avx512_vnni": ("QInt8", True, False), "avx512": ("QInt8", True, False),
    "avx2": ("QUInt8", True, False), "arm64": ("QInt8", True, False)}
CALIBRATION_SENTENCES = 300  # as the library's default OVQuantizationConfig(num_samples=300)
OPSET = 17


def backend_file(backend: str, quantize: str | None, config: str) -> str:
    """The file (relative to the export) that `backend` reads (as augsbert.export.backends.backend_file)."""
    if backend == "onnx":
        return f"onnx/model_qint8_{config}.onnx" if quantize else "onnx/model.onnx"
    return "openvino/openvino_model_qint8_quantized.xml" if quantize else "openvino/openvino_model.xml"


def export_openvino(folder: Path, quantize: str | None, calibration: list[str]) -> dict:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), backend="openvino", device="cpu", local_files_only=True,
                                model_kwargs={"export": True})
    model.save_pretrained(str(folder))  # openvino/openvino_model.xml beside the PyTorch weights
    record: dict = {}
    if quantize:
        from optimum.intel import OVQuantizationConfig
        from sentence_transformers import export_static_quantized_openvino_model

        sentences = list(dict.fromkeys(s for s in calibration if s.strip()))[:CALIBRATION_SENTENCES]
        if not sentences:
            raise SystemExit("--backend openvino --quantize int8 calibrates on the model's training sentences, and "
                             "none were given")
        with tempfile.TemporaryDirectory() as tmp:  # a local dataset folder: datasets reads it without the hub
            with open(Path(tmp) / "train.csv", "w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["sentence"])
                writer.writerows([s] for s in sentences)
            export_static_quantized_openvino_model(
                model, OVQuantizationConfig(num_samples=len(sentences)), str(folder), dataset_name=tmp,
                dataset_config_name="default", dataset_split="train", column_name="sentence",
                file_suffix="qint8_quantized")
        record["calibration_sentences"] = len(sentences)
    return record


def onnx_inputs(model) -> list[str]:
    """The tokenizer outputs the Transformer takes (input_ids, attention_mask, token_type_ids where it has one)."""
    import inspect

    features = model.preprocess(["a"])
    accepted = inspect.signature(model[0].auto_model.forward).parameters
    return [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in features
            and name in accepted]


def export_onnx(folder: Path, quantize: str | None, config: str) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    encoder = model[0].auto_model.eval()
    names = onnx_inputs(model)

    class LastHiddenState(torch.nn.Module):  # the feature-extraction graph: named inputs -> last_hidden_state
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return self.inner(**{n: given[n] for n in names}).last_hidden_state

    example = model.preprocess(["a short sentence", "and a somewhat longer one, to give the sequence a length"])
    batch, length = torch.export.Dim("batch_size"), torch.export.Dim("sequence_length")
    (folder / "onnx").mkdir(exist_ok=True)
    target = folder / "onnx" / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(LastHiddenState(encoder), tuple(example[n] for n in names), str(target), dynamo=True,
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_shapes={n: {0: batch, 1: length} for n in names},
                          opset_version=OPSET, external_data=False)
    pooling = [m for m in list(model)[1:] if hasattr(m, "get_pooling_mode_str")]
    record: dict = {"opset": OPSET, "max_seq_length": model.max_seq_length,  # what the card's ONNX Runtime lines need
                    "pooling": pooling[0].get_pooling_mode_str() if pooling else None,
                    "normalize": any(type(m).__name__ == "Normalize" for m in list(model)[1:])}
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        weight_type, per_channel, reduce_range = ONNX_QUANTIZATION[config]
        quantize_dynamic(str(target), str(folder / backend_file("onnx", quantize, config)),
                         weight_type=getattr(QuantType, weight_type), per_channel=per_channel,
                         reduce_range=reduce_range)
        record["quantize_config"] = config
    return record


class OnnxEncoder:
    """The exported ONNX file run by ONNX Runtime, its last hidden state through the model's own modules after the
    Transformer (pooling, normalisation): what `SentenceTransformer(path, backend="onnx")` computes."""

    def __init__(self, folder: Path, file_name: str, threads: int):
        import onnxruntime
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        self.names = onnx_inputs(self.model)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(str(folder / file_name), options,
                                                    providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str], batch_size: int = 64):
        import numpy as np
        import torch

        parts = []
        for start in range(0, len(texts), batch_size):
            features = self.model.preprocess(texts[start:start + batch_size])
            hidden = self.session.run(None, {n: features[n].numpy() for n in self.names})[0]
            out = {"token_embeddings": torch.from_numpy(hidden), "attention_mask": features["attention_mask"]}
            for module in list(self.model)[1:]:
                out = module(out)
            parts.append(out["sentence_embedding"].detach().numpy())
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def encoder(folder: Path, backend: str, file_name: str, threads: int):
    if backend == "onnx":
        return OnnxEncoder(folder, file_name, threads)
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), backend="openvino", device="cpu", local_files_only=True,
                               model_kwargs={"file_name": file_name,
                                             "ov_config": {"INFERENCE_NUM_THREADS": str(threads)}})


def parity(model, sentences: list[str], reference, test: dict) -> dict:
    """Cosine of each sentence's embedding with the reference's, and the test pairs' Spearman x 100."""
    import numpy as np
    from scipy.stats import spearmanr

    def unit(x):
        x = np.asarray(x, dtype=np.float64)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    cosines = (unit(model.encode(sentences)) * unit(reference)).sum(1)
    result = {"sentences": len(sentences), "min_cosine": round(float(cosines.min()), 6),
              "mean_cosine": round(float(cosines.mean()), 6)}
    if test and test.get("score"):
        texts = list(dict.fromkeys([*test["sentence1"], *test["sentence2"]]))
        where = {t: i for i, t in enumerate(texts)}
        vectors = unit(model.encode(texts))
        a = vectors[[where[t] for t in test["sentence1"]]]
        b = vectors[[where[t] for t in test["sentence2"]]]
        result.update(test_pairs=len(test["score"]),
                      test_spearman=round(100 * float(spearmanr((a * b).sum(1), test["score"]).statistic), 2))
    return result


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("sentence-transformers", "transformers", "torch", "onnxruntime", "onnx", "openvino", "optimum-intel",
                 "nncf"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def convert(request: dict) -> dict:
    import numpy as np
    import torch

    threads = int(request.get("threads") or 1)
    torch.set_num_threads(threads)
    folder, backend, quantize = Path(request["folder"]), request["backend"], request.get("quantize")
    config = request.get("config") or "avx512_vnni"
    if backend not in CONVERTERS or quantize not in (None, "int8") or config not in ONNX_QUANTIZATION:
        raise SystemExit(f"unknown request: backend {backend!r}, quantize {quantize!r}, config {config!r}")
    began = time.perf_counter()
    record = CONVERTERS[backend](folder, quantize, config, request.get("calibration") or [])
    written = backend_file(backend, quantize, config)
    if not (folder / written).is_file():
        raise SystemExit(f"the conversion wrote no {written} in {folder}")
    seconds = time.perf_counter() - began
    reference = np.load(request["reference"]) if request.get("reference") else None
    checked = parity(encoder(folder, backend, written, threads), request["sentences"], reference,
                     request.get("test") or {}) if reference is not None else {}
    return {"backend": backend, "quantize": quantize, "file": written, **record, "parity": checked,
            "convert_seconds": round(seconds, 1), "versions": versions()}


# backend -> the function that writes its files (augsbert.export.backends.REGISTRY's `converter`, tied by
# tests/test_backends.py: this script imports nothing of augsbert)
CONVERTERS = {
    "onnx": lambda folder, quantize, config, calibration: export_onnx(folder, quantize, config),
    "openvino": lambda folder, quantize, config, calibration: export_openvino(folder, quantize, calibration),
}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: deploy_convert.py REQUEST.json RESULT.json")
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    result = convert(request)
    Path(args[1]).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
