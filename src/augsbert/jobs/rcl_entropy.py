"""Stage `rcl_entropy`: one entropy model of Regularized Contrastive Learning (seed 002, §3.2, Algorithm 1 l. 2-4).

The base encoder is fine-tuned with equation 2 (weight φ) on the same training
rows as the final `rcl` model, and stopped early as App. A describes: training
ends once the held-out loss has not decreased for `patience` evaluations
(every `eval_steps` steps; the paper's "3 steps" read as 3 evaluations), and
the checkpoint with the lowest held-out loss is kept. That model then encodes
every training (and held-out) row's query and document once; the artifact
holds them as `query.npy` / `document.npy` (float32, row i = row id i; .npy,
never pickle) with `rows.parquet` (id, split, anchor, positive), the model
under `model/`, and `metrics.json` (with `rows_digest`, which the final stage
checks against its own rows before using the embeddings).

Rows: NLI triples from `pretrain.triples` (anchor, entailment, contradiction)
or, without a triples file, the pretrain corpus' sentences twice (two dropout
views, SimCSE-style; not the paper's setup). Ids: training rows 0..N-1 in their
seeded order, held-out rows N..N+M-1.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..data import DataError
from ..models import resolve_device
from ..models.device import precision
from ..models.inference import encode_rows
from ..losses.regularized_contrastive import DOCUMENT_FILE, QUERY_FILE, ROWS_FILE
from ..params import read_params
from ..stages.pretrain import PretrainParams
from ..stages.rcl_entropy import RclEntropyParams
from ..store.artifacts import artifact_dir, checkpoint_dir, write_json
from ..store.model_refs import model_path
from ..training.pretrain import base_held_out_loss, fit, held_out_loss
from ..training.pretrain_rows import rcl_rows, rows_digest

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    from transformers import EarlyStoppingCallback

    params = read_params(RclEntropyParams, spec)
    train, held, removed = rcl_rows(spec, params)
    if not held:
        raise DataError("rcl_entropy: no held-out rows, so early stopping has nothing to measure")
    # the trainer's view: equation 2 with weight phi, best checkpoint by held-out loss
    fit_params = PretrainParams.from_json({
        **{k: v for k, v in params.to_json().items() if k not in ("patience", "pool")},
        "objective": "rcl_entropy", "selection": "held_out_loss", "preset": "rcl_entropy"})
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        base = model_path(params, params.model)
        log.info("rcl_entropy phi=%g from %s: %d training rows, %d held out, %d removed (dev/test), device %s",
                 params.phi, params.model, len(train), len(held), removed, device)
        anchors, held_anchors = [r[1] for r in train], [r[1] for r in held]
        before = base_held_out_loss(base, held_anchors, fit_params, device, held)
        model, loss, metrics = fit(base, anchors, held_anchors, None, fit_params, work, device, precision(),
                                   train, held, callbacks=[EarlyStoppingCallback(params.patience)])
        after = held_out_loss(model, loss, "rcl_entropy", held_anchors, fit_params, held)
        log.info("rcl_entropy: held-out loss %.4f (base) -> %.4f after %d step(s)", before, after, metrics["steps"])
        rows = train + held  # Algorithm 1 line 4: every query and index, once, with the frozen entropy model
        batch = params.eval_batch_size
        model.eval()
        dim = encode_rows(model, [r[1] for r in rows], tmp / QUERY_FILE, batch)
        encode_rows(model, [r[2] for r in rows], tmp / DOCUMENT_FILE, batch)
        pd.DataFrame({"id": [r[0] for r in rows], "split": ["train"] * len(train) + ["held_out"] * len(held),
                      "anchor": [r[1] for r in rows], "positive": [r[2] for r in rows]}).to_parquet(
            tmp / ROWS_FILE, index=False)
        model.save(str(tmp / "model"))
        metrics = {"model": params.model, "device": device, "phi": params.phi,
                   "rows": {"train": len(train), "held_out": len(held)}, "dim": dim,
                   "rows_digest": rows_digest(rows), "eval_sentences_removed": removed,
                   "stopped_early": metrics["steps"] < params.max_steps,
                   "held_out_loss_base": before, "held_out_loss_final": after, **metrics}
        write_json(tmp / "metrics.json", metrics)
    return metrics
