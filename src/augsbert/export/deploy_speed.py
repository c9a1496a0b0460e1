"""Speed and size of every row of a frontier, measured in one process under one condition (`augsbert frontier`,
augsbert.export.frontier). Run as a script by the Python that holds what the rows need: the deploy environment's
(.venv-deploy/bin/python: torch, ONNX Runtime and OpenVINO, so the PyTorch, ONNX and OpenVINO rows are timed by the
same process, one after the other, on the same sentences and threads) where the frontier has exported rows, else
the main environment's. Like deploy_convert.py (whose OnnxEncoder runs the ONNX rows, loaded by its path) it
imports nothing of augsbert: only the standard library at import, torch and sentence-transformers inside.

    python deploy_speed.py REQUEST.json RESULT.json

REQUEST.json: {"rows": [{"name", "path", "backend": "torch" | "onnx" | "openvino", "file", "texts"}], "texts":
{name: [sentences]}, "threads", "repeat", "batch_size"} (the grid's `frontier` section). Per row: sentences per second (the best of
`repeat` timed `encode` calls over all its sentences, after a warm-up batch; tokenisation included), the megabytes
of the files the backend reads, and the load average (1 min) before and after the row. RESULT.json adds what the
process ran with: threads, CPUs, torch's version, its Python.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from pathlib import Path

# each backend's folder in an export (augsbert.export.backends.REGISTRY's `folder`, tied by tests/test_backends.py: this
# script imports nothing of augsbert); a row's size leaves the other backends' folders out
FOLDERS = {"torch": None, "onnx": "onnx", "openvino": "openvino"}
OTHER_BACKENDS = {backend: tuple(f for other, f in FOLDERS.items() if other != backend and f) for backend in FOLDERS}
CONVERTER = Path(__file__).with_name("deploy_convert.py")


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
        return runpy.run_path(str(CONVERTER), run_name="deploy_convert")["OnnxEncoder"](path, file_name, threads)
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
    return round(len(texts) / max(best, 1e-9), 1)


def measure(request: dict) -> dict:
    import torch

    threads = int(request["threads"])
    torch.set_num_threads(threads)
    repeat, batch_size = int(request["repeat"]), int(request["batch_size"])
    measured = []
    for row in request["rows"]:
        texts = request["texts"][row["texts"]]
        model = load(row, threads)
        before = os.getloadavg()[0]
        per_s = speed(model, texts, repeat, batch_size)
        measured.append({**row, "sentences": len(texts), "sentences_per_s": per_s,
                         "size_mb": size_mb(Path(row["path"]), row.get("backend", "torch"), row.get("file")),
                         "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)})
        print(json.dumps({k: v for k, v in measured[-1].items() if k != "texts"}), flush=True)
        del model
    return {"threads": threads, "repeat": repeat, "batch_size": batch_size, "cpus": os.cpu_count(),
            "torch": torch.__version__, "python": sys.executable, "rows": measured}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: deploy_speed.py REQUEST.json RESULT.json")
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    Path(args[1]).write_text(json.dumps(measure(request), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
