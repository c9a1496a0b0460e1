"""Speed and size of every row of a frontier, measured in one process under one condition (run by
benchmarks/frontier.py with the deploy environment's Python, .venv-deploy/bin/python: it holds torch, ONNX Runtime
and OpenVINO, so the PyTorch, ONNX and OpenVINO rows are timed by the same process, one after the other, on the
same sentences and threads). It imports nothing of augsbert: the ONNX rows run through
src/augsbert/face/deploy_convert.py's OnnxEncoder, loaded by its path.

    .venv-deploy/bin/python benchmarks/frontier_speed.py REQUEST.json RESULT.json

REQUEST.json: {"rows": [{"name", "seed", "path", "backend": "torch" | "onnx" | "openvino", "file"}], "sentences":
[...], "threads": 2, "repeat": 3, "batch_size": 64}. Per row: sentences per second (the best of `repeat` timed
`encode` calls over all the sentences, after a warm-up batch; tokenisation included), the megabytes of the files the
backend reads, and the load average (1 min) before and after the row.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OTHER_BACKENDS = {"torch": ("onnx", "openvino"), "onnx": ("openvino",), "openvino": ("onnx",)}


def size_mb(folder: Path, backend: str, file_name: str | None) -> float:
    """MB of what the backend reads: the folder less the other backends' folders, the card and, for ONNX /
    OpenVINO, the PyTorch weights and the backend's other files (float32 beside int8)."""
    total = 0
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or rel.split("/")[0] in OTHER_BACKENDS[backend] or rel in ("README.md",
                                                                                        "augsbert_export.json"):
            continue
        if backend != "torch" and path.suffix in (".safetensors", ".bin") and not rel.startswith(backend + "/"):
            continue
        if backend != "torch" and rel.startswith(backend + "/") and file_name and \
                not rel.startswith(file_name.rsplit(".", 1)[0]):
            continue
        total += path.stat().st_size
    return round(total / 1e6, 2)


def load(row: dict, threads: int):
    from sentence_transformers import SentenceTransformer

    path, backend, file_name = Path(row["path"]), row.get("backend", "torch"), row.get("file")
    if backend == "onnx":
        convert = runpy.run_path(str(ROOT / "src" / "augsbert" / "face" / "deploy_convert.py"), run_name="convert")
        return convert["OnnxEncoder"](path, file_name, threads)
    if backend == "openvino":
        return SentenceTransformer(str(path), backend="openvino", device="cpu", local_files_only=True,
                                   model_kwargs={"file_name": file_name,
                                                 "ov_config": {"INFERENCE_NUM_THREADS": str(threads)}})
    return SentenceTransformer(str(path), device="cpu", local_files_only=True)


def speed(model, texts: list[str], repeat: int, batch_size: int) -> float:
    model.encode(texts[:batch_size], batch_size=batch_size)  # warm-up: first-call allocations, lazy kernels
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        model.encode(texts, batch_size=batch_size)
        best = min(best, time.perf_counter() - start)
    return round(len(texts) / best, 1)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    threads = int(request.get("threads", 2))
    import torch

    torch.set_num_threads(threads)
    texts = request["sentences"]
    measured = []
    for row in request["rows"]:
        model = load(row, threads)
        before = os.getloadavg()[0]
        per_s = speed(model, texts, int(request.get("repeat", 3)), int(request.get("batch_size", 64)))
        measured.append({**row, "sentences_per_s": per_s,
                         "size_mb": size_mb(Path(row["path"]), row.get("backend", "torch"), row.get("file")),
                         "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)})
        print(json.dumps(measured[-1]), flush=True)
        del model
    Path(args[1]).write_text(json.dumps({
        "sentences": len(texts), "threads": threads, "repeat": int(request.get("repeat", 3)),
        "cpus": os.cpu_count(), "torch": torch.__version__, "rows": measured}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
