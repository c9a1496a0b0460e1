"""Students that deploy (issue 51): sentences per second, size on disk and STS-B test Spearman of each row of the
`compact` grid (run by hand; docs/guide/compact.md has the figures and the commands).

    # rows from directories (e.g. `augsbert export` of the compact grid's students; `@onnx:<file>` loads a backend)
    .venv/bin/python benchmarks/bench_encode.py --rows full=models/compact/full matryoshka=models/compact/mat \\
        onnx_int8=models/compact/full-onnx@onnx:onnx/model_qint8_avx512_vnni.onnx
    # or the rows built here from the bundled MiniLM, each trained on the STS-B gold train pairs for N steps
    # with augsbert's own trainer (augsbert.training.pairs.fit, the student job's), saved under --out
    .venv/bin/python benchmarks/bench_encode.py --train-steps 360 --out /tmp/compact-rows

Speed: the first 10,000 distinct sentences of the STS-B files (train, dev, test, in file order) encoded on the CPU
with `--threads` (2) torch / ONNX Runtime threads, batch 64, after a warm-up batch; the time of the whole
`encode` call (tokenisation included), the best of `--repeat`; on CUDA too where present (torch rows). Size: the
bytes of the files the row's backend reads (weights, tokenizer, config). Quality: Spearman x 100 of cosine and
gold on the STS-B test split (1379 pairs); a Matryoshka row also at each cut size (the first d components).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
ROOT = Path(__file__).resolve().parent.parent
STSB = Path(os.environ.get("AUGSBERT_STSB", "/work/shared/data/stsb"))
SPLITS = ("sts-train.csv", "sts-dev.csv", "sts-test.csv")
BACKEND_DIRS = {"torch": ("onnx", "openvino"), "onnx": ("openvino",), "openvino": ("onnx",)}


def read_split(name: str) -> list[tuple[str, str, float]]:
    """(sentence1, sentence2, score 0-5) of an STS-B csv (tab-separated, as the SBERT distribution)."""
    rows = []
    with open(STSB / name, encoding="utf-8", newline="") as f:
        for fields in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(fields) >= 7:
                rows.append((fields[5], fields[6], float(fields[4])))
    return rows


def sentences(n: int) -> list[str]:
    seen = dict.fromkeys(s for split in SPLITS for a, b, _ in read_split(split) for s in (a, b))
    return list(seen)[:n]


def size_mb(folder: Path, backend: str, file_name: str | None) -> float:
    """MB of what the backend reads: everything but the other backends' folders (and the torch weights for ONNX /
    OpenVINO; only its own file of several)."""
    total = 0
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or rel.split("/")[0] in BACKEND_DIRS[backend] or rel == "README.md":
            continue
        if backend != "torch" and path.suffix in (".safetensors", ".bin") and not rel.startswith(backend):
            continue
        if backend != "torch" and rel.startswith(backend + "/") and file_name and \
                not rel.startswith(file_name.rsplit(".", 1)[0]):
            continue
        total += path.stat().st_size
    return total / 1e6


def load(spec: str, device: str):
    """`path` or `path@backend:file` -> (model, backend, file)."""
    from sentence_transformers import SentenceTransformer

    path, _, backend_file = spec.partition("@")
    backend, _, file_name = backend_file.partition(":")
    backend = backend or "torch"
    kwargs = {"model_kwargs": {"file_name": file_name}} if file_name else {}
    model = SentenceTransformer(path, device=device, backend=backend, **kwargs)
    return model, Path(path), backend, file_name or None


def spearman(model, pairs, dims=None) -> dict:
    import numpy as np
    from scipy.stats import spearmanr

    texts = list(dict.fromkeys(t for a, b, _ in pairs for t in (a, b)))
    emb = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=False)
    where = {t: i for i, t in enumerate(texts)}
    a = emb[[where[p[0]] for p in pairs]].astype(np.float64)
    b = emb[[where[p[1]] for p in pairs]].astype(np.float64)
    gold = [p[2] for p in pairs]
    out = {}
    for d in dims or [emb.shape[1]]:
        x, y = a[:, :d], b[:, :d]
        cos = (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
        out[d] = 100 * spearmanr(cos, gold).statistic
    return out


def throughput(model, texts, repeat: int) -> float:
    model.encode(texts[:64], batch_size=64)  # warm-up: first-call allocations, lazy kernels
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        model.encode(texts, batch_size=64)
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def train_rows(steps: int, out: Path, only: list[str], static_init: str | None) -> list[str]:
    """Full, 3-layer, Matryoshka and static students from the bundled MiniLM on the STS-B gold train pairs
    (`only`: these rows; `static_init`: a StaticEmbedding model distilled before, trained as it is instead of
    distilling the base again)."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "src"))
    from augsbert.stages.student import StudentParams
    from augsbert.store.model_refs import resolve_model
    from augsbert.training.pairs import fit

    base = resolve_model("minilm-l6")
    train = pd.DataFrame(read_split("sts-train.csv"), columns=["sentence1", "sentence2", "score"])
    train["score"] /= 5.0  # the project's 0-1 scale
    common = dict(model="minilm-l6", epochs=1, max_steps=steps, batch_size=16, lr=2e-5, warmup_ratio=0.1,
                  weight_decay=0.01, checkpoint_steps=100000, seed=42, max_length=128, freeze_embeddings=False,
                  eval_batch_size=64, group_by_length=True, megabatch=400, use_gold_labels=True, selection="last")
    rows = {"full": {}, "layers3": {"init": "layers", "layers": 3},
            "matryoshka": {"matryoshka_dims": [384, 128, 64]},
            "static": {"arch": "static", "static_dims": 256, "lr": 0.005, "weight_decay": 0.0,
                       "group_by_length": False}}
    specs = []
    for name, options in rows.items():
        if only and name not in only:
            continue
        target = out / name
        if not (target / "modules.json").is_file():
            start_from = base
            if name == "static" and static_init:  # the distilled table, trained by the same trainer
                start_from, options = static_init, {k: v for k, v in options.items() if k != "arch"}
            params = StudentParams.from_json({**common, **options})
            start = time.perf_counter()
            result = fit("be", start_from, train, None, params, out / f".work-{name}", "cpu", "fp32")
            result.model.save(str(target))
            print(f"trained {name}: {result.metrics['steps']} steps, loss {result.metrics['train_loss']:.4f}, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        specs.append(f"{name}={target}")
    return specs


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="*", default=[], metavar="NAME=PATH[@BACKEND:FILE]")
    parser.add_argument("--train-steps", type=int, default=0, help="build the rows: train each for this many steps")
    parser.add_argument("--out", default="/tmp/augsbert-compact-rows", help="where --train-steps saves the rows")
    parser.add_argument("--only", nargs="*", default=[], help="with --train-steps: only these rows "
                        "(full, layers3, matryoshka, static)")
    parser.add_argument("--static-init", help="with --train-steps: a static model distilled before (no second "
                        "distillation)")
    parser.add_argument("--sentences", type=int, default=10000, help="0: quality and size only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--matryoshka-dims", default="384,128,64", help="the sizes a row named matryoshka* is scored at")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    rows = (train_rows(args.train_steps, Path(args.out), args.only, args.static_init) if args.train_steps
            else []) + args.rows
    if not rows:
        parser.error("name rows (--rows) or build them (--train-steps)")
    texts = sentences(args.sentences)
    test = read_split("sts-test.csv")
    cuda = torch.cuda.is_available()
    print(f"{len(texts)} STS-B sentences, CPU {args.threads} threads (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs){', CUDA ' + torch.cuda.get_device_name(0) if cuda else ''}; torch "
          f"{torch.__version__}", flush=True)
    print("| row | test Spearman | CPU sentences/s | " + ("CUDA sentences/s | " if cuda else "") + "size MB |")
    print("| --- | ---: | ---: | " + ("---: | " if cuda else "") + "---: |")
    for row in rows:
        name, _, spec = row.partition("=")
        model, folder, backend, file_name = load(spec, "cpu")
        dims = [int(d) for d in args.matryoshka_dims.split(",")] if name.startswith("matryoshka") else None
        quality = spearman(model, test, dims)
        cpu = throughput(model, texts, args.repeat) if texts else float("nan")
        gpu = ""
        if cuda and backend == "torch" and texts:
            gpu = f"{throughput(load(spec, 'cuda')[0], texts, args.repeat):.0f} | "
        elif cuda:
            gpu = "– | "
        size = size_mb(folder, backend, file_name)
        for d, value in quality.items():
            label = f"{name} @{d}" if dims else name
            print(f"| {label} | {value:.2f} | {cpu:.0f} | {gpu}{size:.1f} |", flush=True)


if __name__ == "__main__":
    main()
