"""Helpers shared by the model stages' jobs: runtime settings, model paths, checkpoint places."""

from __future__ import annotations

import os
from pathlib import Path

from ..store.artifacts import stage_sidecar
from ..models import resolve_model
from ..models.device import PRECISION_ENV
from ..params import ModelParams


def precision() -> str:
    """auto | fp32 | fp16 | bf16, from $AUGSBERT_PRECISION (the Snakefile sets it from the config)."""
    return os.environ.get(PRECISION_ENV, "auto")


def checkpoint_dir(out: str | Path) -> Path:
    """`artifacts/<stage>/<key>` -> `artifacts/.checkpoints/<stage>/<key>`: beside, not inside, the output.

    Snakemake deletes a job's declared outputs before it starts, so resumable
    state must live elsewhere; `artifact_dir(..., checkpoints=)` removes it once
    the artifact is complete. The artifact's writer lock guards it too.
    """
    return stage_sidecar(out, "checkpoints")


def model_path(params: ModelParams, ref: str) -> str:
    """Local directory of model `ref`, at the hub revision the config pins for it (`hub_revisions`)."""
    return resolve_model(ref, params.hub_revisions.get(ref))
