"""A pair model's training job, shared by stages `teacher` (Cross-Encoder / Cross-Bi-Encoder) and `student`
(Bi-Encoder): the best epoch on dev, the chosen model tested on the test split and saved in its standard
format under `model/`, with its metrics (`train_and_save`); and what a student learns from
(`student_training_set`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import time
from pathlib import Path

import pandas as pd

from ..scheduling import progress
from . import distributed
from ..store.artifacts import artifact_dir, checkpoint_dir, read_json, write_json
from ..data import DataError, read_pairs
from ..data.prompts import prompt_pairs
from ..evaluation import correlations
from ..models import resolve_device
from ..models.compact import is_static_folder, pca_targets, pretrain_static, static_student
from ..models.device import precision
from ..models.inference import scores_by_dim
from ..stages.student import StudentParams
from ..stages.teacher import TeacherParams
from ..store.model_refs import model_path
from .pairs import evaluate, fit, save_model
from ..data.pool import read_split, target_pool, test_draw

log = logging.getLogger(__name__)


def selection_dev(spec: dict, selection: str | None) -> pd.DataFrame | None:
    """The dev split that picks the best epoch, or None (`selection: last`).

    Teachers and in-domain Bi-Encoders read the dev split of the data they
    learn; a transfer student the source's (`source_dev`, its default) or, only
    when asked for, the target's (`target_dev`, the planned `dev` input).
    """
    inputs = spec["inputs"]
    if selection == "last":
        return None
    return read_split(inputs.get("dev", inputs["data"]), "dev", required=False)


MIN_TRAINING_PAIRS = 2  # as gold_fraction and Trans-Encoder's unlabelled pairs: one pair gives nothing to rank


def check_training_pairs(spec: dict, train: pd.DataFrame, student: bool) -> None:
    """Refuse (DataError, one line naming the files) a training set of fewer than MIN_TRAINING_PAIRS distinct pairs
    (a pair and its swap, or a duplicate, are one): a model fitted to one pair's score ranks nothing, yet its test
    figures and table row would read as a trained model's. A one-pair gold train split ran without a word (issue
    64); refused rather than warned of, since nothing it could produce is a result."""
    pairs = {frozenset(pair) for pair in zip(train["sentence1"], train["sentence2"])}
    if len(pairs) >= MIN_TRAINING_PAIRS:
        return
    inputs = spec["inputs"]
    gold = (train["source"] == "gold").any() if student else "labels" not in inputs  # Trans-Encoder: no gold
    files = ([f"{inputs['data']}/train.parquet"] if gold else []) + (
        [f"{inputs['labels']}/pairs.parquet"] if "labels" in inputs else [])
    raise DataError(f"{' and '.join(files)}: {len(pairs)} distinct pair(s) to train on; a model needs at least "
                    f"{MIN_TRAINING_PAIRS} (fitted to one pair's score it ranks nothing, and its figures would pass "
                    "for a trained model's): give the dataset's train split more labelled pairs")


def train_and_save(arch: str, spec: dict, params: TeacherParams | StudentParams, train: pd.DataFrame, out, device,
                    force) -> dict:
    check_training_pairs(spec, train, isinstance(params, StudentParams))
    data = spec["inputs"]["data"]
    # Bi-Encoders: their `selection`; teachers their own dev split, or the last epoch (Trans-Encoder: no gold)
    selection = params.selection if isinstance(params, StudentParams) or params.selection == "last" else None
    untrained = params.max_steps == 0  # a teacher without a training step reads no dev label
    dev = None if untrained else selection_dev(spec, selection)
    test = read_split(spec["inputs"].get("eval", data), "test")  # domain transfer: the target's test split
    full_test = len(test)
    if isinstance(params, TeacherParams) and params.test_pairs is not None:  # an active round's teacher: a subset
        test = test.iloc[test_draw(len(test), params.test_pairs)].reset_index(drop=True)
    device = resolve_device(device)
    work = checkpoint_dir(out)
    # an MLM-adapted checkpoint (domain / full_domain variants) replaces the base model
    base = str(Path(spec["inputs"]["init"]) / "model") if "init" in spec["inputs"] else model_path(params, params.model)
    log.info("%s: %d training pairs, %s dev pairs, %d test pairs, base %s, device %s", arch, len(train),
             len(dev) if dev is not None else "no", len(test), params.model, device)
    delimiter = params.topic_prompt
    tested = test
    if delimiter:  # topic prompts (thesis 4.4): training and dev pairs with topics are prompted
        train = prompt_pairs(train, delimiter)
        dev = prompt_pairs(dev, delimiter) if dev is not None else None
        if arch != "be":  # a teacher is tested as it is used: on prompted pairs; Bi-Encoders on raw text
            tested = prompt_pairs(test, delimiter)  # (their prompted test score is in the suite)
        log.info("topic prompts on (delimiter %r): e.g. %r", delimiter, train["sentence1"].iloc[0][:80])
    if not distributed.is_main():  # a further process of a distributed run: it trains; rank 0 writes the artifact
        fit(arch, base, train, dev, params, work, device, precision(), after_warmup=isinstance(params, TeacherParams))
        return {}
    pretrained = None
    # the static table pre-trained first (models.compact)
    if isinstance(params, StudentParams) and params.static_pretrain == "full":
        base, pretrained = static_start(spec["inputs"], params, base, work, device)
    swept = None
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        if isinstance(params, StudentParams) and params.static_lr_sweep:  # the static rate chosen on dev
            result, swept = sweep_static_lr(base, train, dev, params, work, device)
        else:
            result = fit(arch, base, train, dev, params, work, device, precision(),
                         after_warmup=isinstance(params, TeacherParams))
        progress.phase(f"scoring test ({len(tested):,} pairs" + (f" of {full_test:,})" if len(test) < full_test
                                                                   else ")"))
        test_metrics, predicted = evaluate(arch, result.model, tested, params)
        log.info("%s: test spearman %.2f  pearson %.2f", arch, test_metrics["spearman"], test_metrics["pearson"])
        save_model(arch, result.model, tmp / "model")
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        metrics = {"arch": arch, "device": device, "test": test_metrics, **result.metrics}
        if len(test) < full_test:  # the test figures are of a seeded subset (active.test_pairs)
            metrics["test_subset"] = {"pairs": len(test), "of": full_test}
        if untrained:
            metrics["selection"] = "untrained"
        elif selection:
            metrics["selection"] = selection
        if "source" in train:
            metrics["training_set"] = {str(k): int(v) for k, v in train["source"].value_counts(sort=False).items()}
        if "eval" in spec["inputs"]:
            metrics["source_test"] = evaluate(arch, result.model, read_split(data, "test"), params)[0]
        if isinstance(params, StudentParams) and params.matryoshka_dims:  # the test split at each Matryoshka size
            metrics["test_by_dim"] = test_by_dim(result.model, test, params)
        if pretrained is not None:
            metrics["static_pretrain"] = pretrained
        if swept is not None:
            metrics["static_lr_sweep"] = swept
        if arch == "be":  # what the model costs to deploy (the results' speed and size columns), and the
            # conditions the speed was measured under: a figure of this job's machine and load, labelled so
            metrics.update(model_size_mb=folder_mb(tmp / "model"),
                           sentences_per_s=encode_speed(result.model, test, params.eval_batch_size),
                           **speed_conditions(device))
        write_json(tmp / "metrics.json", metrics)
    if pretrained is not None:
        shutil.rmtree(static_start_dir(work), ignore_errors=True)
    if swept is not None:
        distilled = work.parent / f"{work.name}.static_distilled"
        for folder in [distilled, *(sweep_dir(work, rate["lr"]) for rate in swept["rates"])]:
            shutil.rmtree(folder, ignore_errors=True)
    return metrics


def sweep_dir(work: Path, rate: float) -> Path:
    """Where one rate of a static learning-rate sweep trains (beside the job's resume state; resumable)."""
    return work.parent / f"{work.name}.lr-{rate:g}"


def chosen_rate(rates: list[dict]) -> float:
    """The rate whose run scored best on dev (a NaN score never wins; a tie goes to the smaller rate)."""
    def score(run: dict) -> float:
        value = run["dev_spearman"]
        return -math.inf if value is None or math.isnan(value) else value

    return max(sorted(rates, key=lambda run: run["lr"]), key=score)["lr"]


def sweep_static_lr(base: str, train: pd.DataFrame, dev: pd.DataFrame | None, params: StudentParams, work: Path,
                    device: str) -> tuple[object, dict]:
    """`student.static_lr_sweep`: the static student trained at `lr` and each rate of the sweep, each run its own
    (resumable) work folder; the rate whose run scores best on the dev split is kept. Without
    `static_lr_sweep_steps` each run is the student's whole schedule and the best run is the result; with it, each
    run is that many steps and the chosen rate trains the whole schedule in `work`. Returns the result and the
    record ({rates: [{lr, dev_spearman, steps, best_epoch}], chosen, steps})."""
    if dev is None or len(dev) < 2:
        raise DataError("student.static_lr_sweep chooses the rate on the dev split, and this data has none")
    if distributed.world_size() > 1:
        raise ValueError("student.static_lr_sweep trains its rates in one process; set gpus: 1")
    if not is_static_folder(base):  # distilled once, every rate starts from it (a pre-trained start is one already)
        start = work.parent / f"{work.name}.static_distilled"
        if not (start / "modules.json").is_file():
            progress.phase("static learning rates: distilling the base once")
            static_student(base, params.static_dims, device).save(str(start))
        base = str(start)
    steps = params.static_lr_sweep_steps
    short = {"max_steps": steps, "early_stopping_patience": 0} if steps else {}
    rates, kept = [], {}
    for rate in sorted({params.lr, *params.static_lr_sweep}):
        progress.phase(f"static learning rate {rate:g} ({len(rates) + 1} of {len(params.static_lr_sweep) + 1})")
        result = fit("be", base, train, dev, dataclasses.replace(params, lr=rate, **short), sweep_dir(work, rate),
                     device, precision())
        rates.append({"lr": rate, "dev_spearman": result.metrics.get("dev_spearman"),
                      "steps": result.metrics["steps"], "best_epoch": result.metrics.get("best_epoch")})
        log.info("static learning rate %g: dev spearman %.2f (%d steps)", rate, rates[-1]["dev_spearman"],
                 result.metrics["steps"])
        best = chosen_rate(rates)
        kept = {best: result} if best == rate else kept  # only the best run's model stays in memory
    best = chosen_rate(rates)
    log.info("static learning rate: %g chosen on dev among %s", best, ", ".join(f"{r['lr']:g}" for r in rates))
    record = {"rates": rates, "chosen": best, "steps": steps}
    if steps:  # short runs chose the rate: it trains the student's own schedule
        return fit("be", base, train, dev, dataclasses.replace(params, lr=best), work, device, precision()), record
    return kept[best], record


def static_start_dir(work: Path) -> Path:
    """Where a static student's pre-trained start waits (beside its resume state, which a new fingerprint wipes)."""
    return work.parent / f"{work.name}.static_start"


def static_start(inputs: dict, params: StudentParams, base: str, work: Path, device: str) -> tuple[str, dict]:
    """`student.static_pretrain: full`: the distilled static model of `base`, its table pre-trained on the
    embedder's (the full student's) embeddings of the target's pool (train sentences and unlabelled texts, no dev /
    test sentence), PCA-reduced to the table's dimensions (models.compact.pretrain_static); saved beside the job's
    resume state and reused by a resumed job. Returns its folder (the start `fit` builds from) and the record."""
    from sentence_transformers import SentenceTransformer

    folder = static_start_dir(work)
    if (folder / "static_pretrain.json").is_file() and (folder / "modules.json").is_file():
        return str(folder), read_json(folder / "static_pretrain.json")
    data = Path(inputs["data"])
    unlabelled = (data / "unlabeled.parquet").is_file() or (data / "unlabeled_pairs.parquet").is_file()
    texts, _, _ = target_pool(data, "train+unlabeled" if unlabelled else "train", exclude_eval=True,
                              option="student.static_pretrain")
    progress.phase(f"static pre-training: embedding {len(texts):,} pool sentences")
    embedder = SentenceTransformer(str(Path(inputs["embedder"]) / "model"), device=device)
    vectors = embedder.encode(texts, batch_size=params.eval_batch_size, show_progress_bar=False)
    del embedder
    model = static_student(base, params.static_dims, device)
    targets = pca_targets(vectors, model.get_embedding_dimension(), params.seed)
    progress.phase("static pre-training: the token table")
    record = {"embedder": Path(inputs["embedder"]).name, **pretrain_static(model, texts, targets, params.seed)}
    shutil.rmtree(folder, ignore_errors=True)
    model.save(str(folder))
    write_json(folder / "static_pretrain.json", record)
    return str(folder), record


def test_by_dim(model, test: pd.DataFrame, params: StudentParams) -> dict[str, dict]:
    """Spearman / Pearson of the test pairs with the embeddings cut to each of `params.matryoshka_dims`."""
    pairs = list(zip(test["sentence1"].tolist(), test["sentence2"].tolist()))
    scores = scores_by_dim(model, pairs, params.matryoshka_dims, params.eval_batch_size)
    result = {str(d): correlations(s, test["score"].to_numpy()) for d, s in scores.items()}
    log.info("be: test spearman by dimension %s", {d: round(m["spearman"], 2) for d, m in result.items()})
    return result


def folder_mb(folder: Path) -> float:
    """Megabytes of the files under `folder` (a saved model: weights, tokenizer, config)."""
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6, 2)


def encode_speed(model, test: pd.DataFrame, batch_size: int) -> float:
    """Sentences per second encoding the distinct test sentences once more, on the job's device and threads (a
    warm-up batch first): a figure of this job's machine, as noisy as its load; benchmarks/bench_encode.py
    measures the rows side by side."""
    texts = list(dict.fromkeys([*test["sentence1"].tolist(), *test["sentence2"].tolist()]))
    model.encode(texts[:batch_size], batch_size=batch_size, show_progress_bar=False)
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, show_progress_bar=False)
    return round(len(texts) / max(time.perf_counter() - start, 1e-9), 1)


def speed_conditions(device: str) -> dict:
    """What an encoding speed was measured under (read right after the timing): `speed_load`, the 1-minute load
    average (this job's own threads included: about its thread count when it runs alone), `speed_cpus`, the
    cores the job may use, `speed_threads`, torch's threads, and `speed_device` (a GPU by its name). Speeds of
    identical models measured under loads 1 and 10 differ by up to 9x (issue 56): the tables show these beside
    the figure."""
    import torch

    load, cores = progress.machine_load()
    name = str(device)
    if name.startswith("cuda") and torch.cuda.is_available():
        name = f"{name} ({torch.cuda.get_device_name(torch.device(name))})"
    return {"speed_load": round(load, 2), "speed_cpus": cores, "speed_threads": torch.get_num_threads(),
            "speed_device": name}


def _topics(table: pd.DataFrame) -> list[str]:
    """The topic columns a pair table carries (kept for a prompted student)."""
    return [c for c in ("topic", "topic1", "topic2") if c in table.columns]


def student_training_set(inputs: dict[str, str], use_gold_labels: bool) -> pd.DataFrame:
    """What the student learns from, one row per (pair, label), with its `source`.

    - `gold`: the gold train pairs with their gold scores (`student.use_gold_labels`);
      the teacher's gold, so in domain transfer the *source's*;
    - `relabelled_gold`: the same pairs scored by the teacher (`labels.relabel_gold`,
      label regularisation; the labels artifact's `gold` strategy);
    - one source per sampling strategy: candidates scored by the teacher, already
      de-duplicated across strategies by the labels stage (first strategy wins).

    Defaults follow the thesis: each gold pair once, with the teacher's score
    (relabel on, gold labels off). With both on, each gold pair enters twice,
    once per label, as in the AugSBERT paper's gold + silver set plus label
    regularisation.
    """
    parts = []
    if use_gold_labels:
        gold = read_split(inputs["data"], "train")
        parts.append(gold[["sentence1", "sentence2", "score", *_topics(gold)]].assign(source="gold"))
    if "labels" in inputs:
        labelled = read_pairs(Path(inputs["labels"]) / "pairs.parquet")
        source = labelled["strategy"].where(labelled["strategy"] != "gold", "relabelled_gold")
        parts.append(labelled[["sentence1", "sentence2", "score", *_topics(labelled)]]
                     .assign(source=source.to_numpy()))
    if not parts:
        raise DataError("the student has no training pairs: enable student.use_gold_labels or silver labels")
    table = pd.concat(parts, ignore_index=True)
    if table.empty:  # e.g. a stage refining the labels kept none: say so, not the trainer's "max_steps" error
        raise DataError(f"the student has no training pairs: {inputs.get('labels', 'the labels')} holds none"
                        + ("" if use_gold_labels else " and student.use_gold_labels is off"))
    log.info("student training set: %s", table["source"].value_counts(sort=False).to_dict())
    return table
