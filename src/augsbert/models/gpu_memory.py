"""The GPU memory a model needs, estimated from its config before it runs (a job's `gpu_mem_mb`).

What a node's job asks for is this estimate of its model and batch (augsbert.scheduling.resources.job_gpu_mem_mb);
a local run packs several model jobs onto one GPU by these figures (augsbert.scheduling.gpus), so they are meant
to be safe upper bounds for the default fp32 training, not measurements. What enters:

- the model's size, read from its `config.json` without loading it: a packaged alias's or local
  directory's, a hub id's from the local Hugging Face cache; a model not found there counts as
  BERT-base (`DEFAULT_DIMS`), the largest base the shipped grids use besides RoBERTa-base;
- the stage: a stage that declares `trains` (augsbert.stages.base.Stage) trains (weights, gradients and
  AdamW's two moments: 16 bytes per parameter, plus the activations kept for the backward pass); any
  other only runs forward passes (4 bytes per parameter, plus one layer's activations at a time);
- the batch: `batch_size` rows of `Stage.gpu_sequences` sequences (a Bi-Encoder pair is two, a
  dropout-view objective two), each `max_length` tokens (an upper bound: batches are padded to
  their longest row only). A stage that runs the model of an input (`Stage.model_input`: labels score
  with the teacher) is sized by that input's base and max_length.

Per token and layer, training keeps 68·h + 10·a·s bytes (h hidden size, a heads, s sequence
length): twice the fp16 figure 34·h + 5·a·s of Korthikanti et al. (2022, "Reducing activation
recomputation in large transformer models", eq. 1), since the default precision keeps fp32
activations. A forward pass holds 20·h + 4·a·s bytes per token of one layer. The total gets
SAFETY (allocator fragmentation, optimizer temporaries) and the CUDA context, and is rounded up to
ROUND_MB. Override a stage's figure with `--set-resources <stage>:gpu_mem_mb=N`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from ..store.model_refs import ALIASES, ModelResolutionError, local_path, reference_kind

# BERT-base: what an unknown model counts as
DEFAULT_DIMS = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                "vocab_size": 30522, "max_position_embeddings": 512}
CONTEXT_MB = 600  # CUDA context and the kernels' workspace of one process
SAFETY = 1.25
ROUND_MB = 250


def _hub_config(ref: str) -> Path | None:
    """config.json of a hub model in the local Hugging Face cache (its `main` snapshot, else any), without network."""
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    root = Path(os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")) / ("models--" + ref.replace("/", "--"))
    main = root / "refs" / "main"
    snapshots = [root / "snapshots" / main.read_text().strip()] if main.is_file() else []
    snapshots += sorted((root / "snapshots").glob("*")) if (root / "snapshots").is_dir() else []
    return next((s / "config.json" for s in snapshots if (s / "config.json").is_file()), None)


@lru_cache(maxsize=None)
def model_config(ref: str | None) -> dict:
    """A model's config.json (a local folder, the packaged model or a hub model in the local cache); {} where none
    is found."""
    path = None
    try:
        kind = reference_kind(ref) if ref else None
        if kind == "alias":
            path = Path(ALIASES[ref]()) / "config.json"
        elif kind == "path":
            path = local_path(ref) / "config.json"
        elif kind == "hub":
            path = _hub_config(ref)
        found = json.loads(path.read_text()) if path else {}
    except (ModelResolutionError, OSError, ValueError, ImportError):
        found = {}
    return found if isinstance(found, dict) else {}


def model_dims(ref: str | None) -> dict[str, int]:
    """The size fields of a model's config.json (DEFAULT_DIMS for what is missing or not found)."""
    found = model_config(ref)
    # some configs name them differently (DistilBERT: dim, n_layers, n_heads, hidden_dim)
    aliases = {"hidden_size": "dim", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
               "intermediate_size": "hidden_dim"}
    dims = {}
    for name, default in DEFAULT_DIMS.items():
        value = found.get(name, found.get(aliases.get(name, ""), None))
        dims[name] = int(value) if isinstance(value, int) and value > 0 else default
    return dims


def parameter_count(dims: dict[str, int]) -> int:
    """Weights of a BERT-style encoder without pooler (exactly BertModel's): embeddings (word, position, two
    token types, LayerNorm), per layer attention (4 h² + 4 h), feed-forward (2 h i + h + i), two LayerNorms."""
    h, i = dims["hidden_size"], dims["intermediate_size"]
    embeddings = (dims["vocab_size"] + dims["max_position_embeddings"] + 2) * h + 2 * h
    layer = 4 * h * h + 4 * h + 2 * h * i + h + i + 4 * h
    return embeddings + dims["num_hidden_layers"] * layer


def forward_bytes_per_token(dims: dict[str, int], s: int) -> int:
    """Bytes per token of one layer's activations in a forward-only pass at sequence length `s` (20·h + 4·a·s)."""
    return 20 * dims["hidden_size"] + 4 * dims["num_attention_heads"] * s


def estimate_mb(dims: dict[str, int], *, training: bool, batch_size: int, sequences: int, max_length: int) -> int:
    """GPU memory (MB) of one process training or running the model of `dims` on batches of that shape."""
    h, a, layers = dims["hidden_size"], dims["num_attention_heads"], dims["num_hidden_layers"]
    s = min(max_length, dims["max_position_embeddings"])
    tokens = batch_size * sequences * s
    params = parameter_count(dims)
    if training:
        state = 16 * params
        activations = tokens * layers * (68 * h + 10 * a * s)
    else:
        state = 4 * params
        activations = tokens * forward_bytes_per_token(dims, s)
    total = CONTEXT_MB + SAFETY * (state + activations) / 1e6
    return ROUND_MB * math.ceil(total / ROUND_MB)


# What a job may use in a packed local run (augsbert.scheduling.gpus packs the jobs by the estimates above):
JOB_GPU_MEM_ENV = "AUGSBERT_JOB_GPU_MEM_MB"  # set by each rule from its `gpu_mem_mb` resource
JOB_GPUS_ENV = "AUGSBERT_JOB_GPUS"  # set by each rule from its `gpu` resource
# both in one shell word, `<gpus>:<MB>`, as the stage rules pass them in a packed run (JobClaim)
JOB_CLAIM_ENV = "AUGSBERT_JOB_GPU_CLAIM"


def job_claim(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(GPUs, MB in all) this job claims in a packed local run: `AUGSBERT_JOB_GPU_CLAIM=<gpus>:<MB>`, or the
    two variables earlier versions' rules set; (0, 0) where nothing is claimed."""
    env = os.environ if env is None else env
    if env.get(JOB_CLAIM_ENV):
        count, _, mem = env[JOB_CLAIM_ENV].partition(":")
        return int(count or 0), int(mem or 0)
    return int(env.get(JOB_GPUS_ENV) or 0), int(env.get(JOB_GPU_MEM_ENV) or 0)
