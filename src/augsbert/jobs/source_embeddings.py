"""Stage `source_embeddings`: the parallel train pairs that may train (no dev or test sentence: augsbert.data.parallel)
and the teacher's embeddings of their originals, each encoded once (augsbert.training.multilingual)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..data import DataError
from ..data.parallel import held_out_sentences, training_pairs
from ..models import resolve_device
from ..models.architectures import BiEncoder
from ..params import read_params
from ..scheduling.progress import warn
from ..stages.source_embeddings import SourceEmbeddingsParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path
from ..training.multilingual import teacher_targets, write_targets

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(SourceEmbeddingsParams, spec), spec["inputs"]
    pairs, counts = training_pairs(inputs["parallel"], held_out_sentences(inputs["parallel"], inputs.get("data")),
                                   params.max_per_language)
    found = []
    if counts["dropped"]:  # a dev or test sentence never trains (issue 67): said, with how many
        found.append(f"{counts['dropped']} parallel train pair(s) hold a dev or test sentence (of the parallel "
                     "dataset or the experiment's data): dropped, never trained on")
        warn(found[-1])
    if pairs.empty:
        raise DataError(f"{inputs['parallel']}: no parallel train pair is left to train on (dropped "
                        f"{counts['dropped']} holding a dev or test sentence)")
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        teacher = BiEncoder().load(Path(inputs["teacher"]) / "model" if "teacher" in inputs
                                   else model_path(params, params.model), device)
        pairs, embeddings = teacher_targets(pairs, teacher, params.eval_batch_size)
        write_targets(tmp, pairs, embeddings)
        metrics = {"device": device, "teacher_model": inputs.get("teacher") or params.model, "pairs": len(pairs),
                   "sources": len(embeddings), "dimension": int(embeddings.shape[1]),
                   "teacher_max_length": int(teacher.max_seq_length),
                   "pairs_per_language": {k: int(v) for k, v in pairs["language"].value_counts(sort=False).items()},
                   **counts, "warnings": found}
        log.info("source embeddings: %d originals of %d parallel pairs embedded by %s (%d dimensions)",
                 len(embeddings), len(pairs), metrics["teacher_model"], metrics["dimension"])
        write_json(tmp / "metrics.json", metrics)
    return metrics
