"""The static student's recipe (issue 58): `static_lr` and batch size chosen on the STS-B dev split (run by hand;
docs/guide/compact.md has the figures and the command).

    .venv/bin/python benchmarks/sweep_static.py --out /tmp/static-sweep                       # the default grid
    .venv/bin/python benchmarks/sweep_static.py --lrs 0.05 --batches 16 --weight-decays 0 0.01 --out DIR
    .venv/bin/python benchmarks/sweep_static.py --pretrain --lrs 0.005 --batches 16 --out DIR   # pre-trained table

The bundled MiniLM is distilled once by model2vec (`StaticEmbedding.from_distillation`, 256 PCA dimensions, the
static student's start: augsbert.models.compact.static_student), saved under --out, and each (lr, batch, weight
decay) x seed trains from it on the STS-B gold train pairs (5,749; no teacher: the recipe is the optimiser's, gold
is enough to choose it) with augsbert's own trainer (`augsbert.training.pairs.fit`, the student job's), `epochs`
passes, the best epoch on dev kept (the student's `target_dev` selection). Printed per setting: dev and test
Spearman x 100, mean and std over the seeds, and the seconds one run took; the setting with the best dev mean is
marked. Results are appended to DIR/sweep.jsonl as they come, so a stopped sweep resumes where it was.

`--pretrain`: the distilled table is first pre-trained (augsbert.models.compact.pretrain_static, as
`student.static_pretrain`) on the bundled MiniLM's embeddings of the STS-B train sentences (no dev / test sentence;
PCA to the table's dimensions), the embedder the gold-only setting has (the grid's pre-training reads its full
student's instead).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_encode import read_split  # noqa: E402  (the STS-B files, 0-5 scores)


def table(name: str):
    import pandas as pd

    frame = pd.DataFrame(read_split(name), columns=["sentence1", "sentence2", "score"])
    frame["score"] /= 5.0  # the project's 0-1 scale
    return frame


def distilled(out: Path, dims: int) -> str:
    """The static start (model2vec distillation of the bundled MiniLM), made once."""
    folder = out / f"distilled-{dims}"
    if not (folder / "modules.json").is_file():
        sys.path.insert(0, str(ROOT / "src"))
        from augsbert.models.compact import static_student
        from augsbert.store.model_refs import resolve_model

        start = time.perf_counter()
        static_student(resolve_model("minilm-l6"), dims, "cpu").save(str(folder))
        print(f"distilled in {time.perf_counter() - start:.0f} s -> {folder}", flush=True)
    return str(folder)


def pretrained(out: Path, start: str, train, dev, test, seed: int = 42) -> str:
    """The distilled table pre-trained on MiniLM's embeddings of the train sentences (made once)."""
    folder = out / f"{Path(start).name}-pretrained"
    if not (folder / "modules.json").is_file():
        sys.path.insert(0, str(ROOT / "src"))
        from sentence_transformers import SentenceTransformer

        from augsbert.models.compact import pca_targets, pretrain_static
        from augsbert.store.model_refs import resolve_model

        held = set(dev["sentence1"]) | set(dev["sentence2"]) | set(test["sentence1"]) | set(test["sentence2"])
        texts = sorted({*train["sentence1"], *train["sentence2"]} - held)
        began = time.perf_counter()
        vectors = SentenceTransformer(resolve_model("minilm-l6"), device="cpu").encode(texts, batch_size=64)
        model = SentenceTransformer(start, device="cpu")
        record = pretrain_static(model, texts, pca_targets(vectors, model.get_embedding_dimension(), seed), seed)
        model.save(str(folder))
        (folder / "static_pretrain.json").write_text(json.dumps(record))
        print(f"pre-trained in {time.perf_counter() - began:.0f} s: {record}", flush=True)
    return str(folder)


def run_one(start: str, train, dev, test, lr: float, batch: int, weight_decay: float, seed: int, epochs: int,
            work: Path) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from augsbert.stages.student import StudentParams
    from augsbert.training.pairs import evaluate, fit

    params = StudentParams.from_json(dict(
        model="minilm-l6", epochs=epochs, batch_size=batch, lr=lr, warmup_ratio=0.1, weight_decay=weight_decay,
        checkpoint_steps=10 ** 6, seed=seed, max_length=256, freeze_embeddings=False, eval_batch_size=256,
        group_by_length=False, use_gold_labels=True, selection="target_dev"))
    began = time.perf_counter()
    result = fit("be", start, train, dev, params, work, "cpu", "fp32")
    test_metrics, _ = evaluate("be", result.model, test, params)
    return {"lr": lr, "batch": batch, "weight_decay": weight_decay, "seed": seed, "epochs": epochs,
            "dev": result.metrics.get("dev_spearman"), "best_epoch": result.metrics.get("best_epoch"),
            "test": test_metrics["spearman"], "seconds": round(time.perf_counter() - began, 1)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.005, 0.01, 0.02, 0.05, 0.1, 0.2])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--weight-decays", type=float, nargs="+", default=[0.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pretrain", action="store_true", help="start from the pre-trained table (see above)")
    args = parser.parse_args(argv)

    import shutil

    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = distilled(out, args.dims)
    train, dev, test = table("sts-train.csv"), table("sts-dev.csv"), table("sts-test.csv")
    if args.pretrain:
        start = pretrained(out, start, train, dev, test)
    tag = "pretrained" if args.pretrain else "distilled"
    log = out / "sweep.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, {args.threads} thread(s); torch "
          f"{torch.__version__}", flush=True)
    for wd in args.weight_decays:
        for batch in args.batches:
            for lr in args.lrs:
                for seed in args.seeds:
                    if any((r["lr"], r["batch"], r["weight_decay"], r["seed"], r["epochs"], r.get("start", "distilled"))
                           == (lr, batch, wd, seed, args.epochs, tag) for r in done):
                        continue
                    work = out / "work"
                    shutil.rmtree(work, ignore_errors=True)
                    row = run_one(start, train, dev, test, lr, batch, wd, seed, args.epochs, work)
                    row["load"] = round(os.getloadavg()[0], 1)
                    row["start"] = tag
                    done.append(row)
                    with log.open("a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    report(done, args.epochs)


def report(rows: list[dict], epochs: int) -> None:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["epochs"] == epochs:
            groups.setdefault((row.get("start", "distilled"), row["weight_decay"], row["batch"], row["lr"]),
                              []).append(row)

    def mean_std(values):
        return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)

    best = max(groups, key=lambda k: statistics.mean(r["dev"] for r in groups[k]))
    print("\n| start | weight decay | batch | static_lr | seeds | dev Spearman | test Spearman | s per run |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(groups):
        start, wd, batch, lr = key
        dev, test = mean_std([r["dev"] for r in groups[key]]), mean_std([r["test"] for r in groups[key]])
        mark = " **best dev**" if key == best else ""
        print(f"| {start} | {wd:g} | {batch} | {lr:g} | {len(groups[key])} | {dev[0]:.2f} ± {dev[1]:.2f}{mark} | "
              f"{test[0]:.2f} ± {test[1]:.2f} | {statistics.mean(r['seconds'] for r in groups[key]):.0f} |")


if __name__ == "__main__":
    main()
