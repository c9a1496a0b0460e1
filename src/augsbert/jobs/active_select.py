"""Stage `active_select`: an active-learning round's choice among the pool's still-unlabelled pairs
(augsbert.sampling.active: the strategies; augsbert.models.uncertainty: the teacher's scores, MC dropout passes,
pair vectors). Writes `chosen.parquet` (the chosen pairs in the order picked, their statistic, teacher score and
cluster), `scored.parquet` (every scored candidate's figures) and `metrics.json`."""

from __future__ import annotations

import logging
from pathlib import Path

from ..data.pool import read_split, unlabelled_with_ids
from ..models import resolve_device
from ..models.uncertainty import TeacherScorer
from ..params import read_params
from ..sampling.active import STRATEGIES, Request, capped, choice_tables, choose
from ..stages.active_select import SelectParams
from ..stages.sizes import batch_pairs
from ..stages.teacher_ensemble import MEMBER_INPUT
from ..store.artifacts import artifact_dir, read_json, write_json
from ..store.model_refs import model_path

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(SelectParams, spec)
    inputs = spec["inputs"]
    pool = Path(inputs["pool"])
    rest = unlabelled_with_ids(pool)
    train = read_split(pool, "train")
    labelled = list(zip(train["sentence1"], train["sentence2"]))
    k = batch_pairs(params.batch, int(read_json(pool / "metrics.json")["gold_pairs_of"]))
    scores = STRATEGIES[params.strategy].scores
    candidates = rest.iloc[capped(len(rest), params.max_pool if scores else None, params.seed, params.round)]
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        scorer = None
        if scores:
            members = [inputs[MEMBER_INPUT.format(m)] for m in range(len(inputs)) if MEMBER_INPUT.format(m) in inputs]
            encoder = model_path(params, params.model) if params.model else None
            scorer = TeacherScorer(inputs["teacher"], members, device, params.batch_size, encoder, params.max_length)
        log.info("round %d: choosing %d of %d unlabelled pairs by %s (%d scored)", params.round, k, len(rest),
                 params.strategy, len(candidates) if scores else 0)
        request = Request(list(zip(candidates["sentence1"], candidates["sentence2"])), k, params.seed, params.round,
                          labelled, params.passes, params.candidate_factor, params.clusters, params.uncertainty)
        picked = choose(params.strategy, request, scorer)
        chosen, scored, metrics = choice_tables(candidates.reset_index(drop=True), picked, params.strategy, len(rest))
        chosen.to_parquet(tmp / "chosen.parquet", index=False)
        scored.to_parquet(tmp / "scored.parquet", index=False)
        metrics.update(round=params.round, device=device)
        write_json(tmp / "metrics.json", metrics)
        log.info("round %d: %d pairs chosen, mean %s %s", params.round, k, metrics["statistic"],
                 metrics["chosen"]["mean_uncertainty"])
    return metrics
