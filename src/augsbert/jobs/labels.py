"""Stage `labels`: the teacher (`augsbert.models.teacher.Teacher`) scores the gold train pairs ("label
regularisation", thesis 5.2; also the KDE strategies' reference distribution) and the sampled candidates,
streamed from parquet a piece at a time, or (candidates.shards > 1) the label shards' scores are merged; the
selection, deduplication and writing of the silver pairs from those scores: `augsbert.sampling.labelled_pairs`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data.tables import candidate_count
from ..models import resolve_device
from ..models.teacher import Teacher
from ..params import read_params
from ..sampling.labelled_pairs import ScoredBy, gold_to_score, merged_scores, write_pairs
from ..stages.labels import LabelsParams
from ..store.artifacts import artifact_dir, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """Score every candidate here, or (candidates.shards > 1) take the label shards' scores."""
    params = read_params(LabelsParams, spec)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        teacher = Teacher(spec, params, device)
        scored_by = ScoredBy(teacher.dir.name, teacher.arch_name, teacher.delimiter, teacher.topics)
        gold, gold_scored = gold_to_score(spec, scored_by)
        gold_scored["score"] = teacher.score(gold_scored)
        scores = None
        if "candidates" in spec["inputs"]:
            path = Path(spec["inputs"]["candidates"]) / "candidates.parquet"
            count = candidate_count(path)
            if params.shards > 1:
                scores = merged_scores(spec, params.shards, count)
                log.info("merged the scores of %d label shards", params.shards)
            else:
                log.info("scoring %d candidate pairs with the %s teacher", count, teacher.arch_name)
                scores = np.empty(count, dtype=np.float64)
                teacher.score_rows(path, 0, count, scores)
        sampling_stats = write_pairs(tmp, spec, params, scored_by, gold, gold_scored, scores)
        write_json(tmp / "metrics.json", {"device": device, "pairs": sampling_stats["pairs"], **sampling_stats})
    return sampling_stats
