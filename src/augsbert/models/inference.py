"""Forward-only passes at the GPU's pace: how many rows a batch takes, and at what precision.

The labelling, zero-shot, suite and pair-score stages and the trainers' dev evaluation score texts
with a model and nothing else (`Encoder` for Bi-Encoders, the architectures' `predict` for
Cross-Encoders and Cross-Bi-Encoders). All of them already cut length-sorted batches (the
libraries' `encode` / `predict` and `CrossBiEncoder.predict` sort by length and hand the results
back in input order). What is left for a GPU:

- **Batch size by free memory.** A stage's `batch_size` (16-64) is sized for training; a MiniLM
  forward pass of 64 rows keeps an H100 busy for well under a millisecond, so the host's kernel
  launches bound it. On CUDA the rows per batch are what half the memory this job may still use
  holds (`rows_for_memory`), at least the stage's own batch size and at most MAX_ROWS. The memory a
  row needs is the forward-pass figure of `augsbert.models.gpu_memory` (one layer's activations, fp32) for
  the longest row of the call: its texts are counted in tokens first (`longest_row`, an upper
  bound: every batch is padded to its own longest row, never beyond), at most `max_length`. The
  memory the job may use is the GPU's free memory, and in a packed local run (augsbert.scheduling.gpus) no
  more than the job's own claim less what torch holds already, so a job never takes memory
  promised to the jobs beside it (the claim assumes `max_length` rows; real rows are shorter).
- **Autocast.** fp16 under `precision: auto` (inference has no gradients to overflow, and fp16 keeps
  three more mantissa bits than bf16, so scores and their ranks move least); `bf16` / `fp16` as
  set; `fp32` none. LayerNorm and the pooling stay fp32 under autocast.

On any other device nothing changes: the stage's batch size, fp32, the very calls of before, so CPU
results are bit for bit those of before (tests/test_inference.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .gpu_memory import SAFETY, forward_bytes_per_token, DEFAULT_DIMS, CONTEXT_MB, job_claim
from .device import precision
from .compact import is_static

log = logging.getLogger(__name__)

SPECIAL_TOKENS = 4  # added to a row's text tokens: [CLS] a [SEP] b [SEP] (BERT: 3), <s> a </s></s> b </s> (RoBERTa: 4)
MAX_ROWS = 1024  # beyond this a MiniLM/BERT-base forward pass gains nothing measurable: the kernels are large already
MEMORY_SHARE = 0.5  # of the memory the job may still use: the rest for the allocator's blocks and the CUDA workspaces


def rows_for_memory(free_mb: float, row_mb: float, requested: int, cap: int = MAX_ROWS) -> int:
    """Rows per forward-only batch: what MEMORY_SHARE of `free_mb` holds at `row_mb` a row, within
    [`requested`, max(`requested`, `cap`)] (never fewer than the stage asked for, as before)."""
    if row_mb <= 0:
        raise ValueError(f"row_mb must be positive, got {row_mb}")
    fits = int(max(free_mb, 0.0) * MEMORY_SHARE // row_mb)
    return max(int(requested), min(int(cap), fits))


def row_mb(dims: dict[str, int], length: int) -> float:
    """MB a row of `length` tokens needs in a forward pass (gpu_memory's figure, with its SAFETY factor)."""
    s = min(int(length), dims["max_position_embeddings"])
    return SAFETY * s * forward_bytes_per_token(dims, s) / 1e6


def longest_row(tokenizer, rows) -> int:
    """Tokens of the longest row: a text, or a pair (a, b) scored as one sequence, plus SPECIAL_TOKENS.
    Each distinct text is tokenised once, without truncation."""
    texts = list(dict.fromkeys(t for row in rows for t in ((row,) if isinstance(row, str) else row)))
    if not texts:
        return SPECIAL_TOKENS
    ids = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    count = dict(zip(texts, map(len, ids)))
    return SPECIAL_TOKENS + max(count[r] if isinstance(r, str) else sum(count[t] for t in r) for r in rows)


def _is_cuda(device) -> bool:
    return str(device).startswith("cuda")


def model_device(model) -> str:
    """The device of a SentenceTransformer, CrossEncoder or CrossBiEncoder ("cpu" for anything without one)."""
    return str(getattr(model, "device", "cpu"))


def model_shape(model) -> tuple[dict[str, int], int]:
    """(size fields of its transformers config, max length) of a SentenceTransformer, CrossEncoder or CrossBiEncoder."""
    if hasattr(model, "encoder") and hasattr(model, "pair_tokenizer"):  # CrossBiEncoder
        config, max_length = model.encoder.config, model.max_length
    else:  # SentenceTransformer, CrossEncoder (sentence-transformers 6: both a Transformer module first)
        config, max_length = model[0].auto_model.config, model.max_seq_length
    dims = {name: int(getattr(config, name, None) or default) for name, default in DEFAULT_DIMS.items()}
    return dims, int(max_length or dims["max_position_embeddings"])


def usable_mb(device) -> float:
    """MB this job may still use on CUDA `device`: the GPU's free memory, within its claim in a packed run."""
    import torch

    free = torch.cuda.mem_get_info(torch.device(device))[0] / 1e6
    count, total = job_claim()
    claim = -(-total // max(count, 1))  # per GPU: a data-parallel job claims `count` GPUs
    if claim > 0:
        free = min(free, claim - CONTEXT_MB - torch.cuda.memory_reserved(torch.device(device)) / 1e6)
    return free


def tokenizer_of(model):
    """The tokenizer of a SentenceTransformer, CrossEncoder or CrossBiEncoder."""
    return model.pair_tokenizer.tokenizer if hasattr(model, "pair_tokenizer") else model.tokenizer


def batch_size(model, requested: int, rows=None) -> int:
    """Rows per forward-only batch of `model` over `rows` (texts, or (a, b) pairs): `requested` off CUDA (nothing
    is tokenised there), sized by the usable memory and the longest of `rows` on CUDA."""
    device = model_device(model)
    if not _is_cuda(device) or is_static(model):  # a static student: a table look-up, no activations to size
        return requested
    dims, max_length = model_shape(model)
    length = max_length if rows is None else min(max_length, longest_row(tokenizer_of(model), rows))
    chosen = rows_for_memory(usable_mb(device), row_mb(dims, length), requested)
    log.info("inference: %d rows per batch on %s (stage batch_size %d, longest row %d tokens)", chosen, device,
             requested, length)
    return chosen


def autocast(model):
    """The autocast context of a forward-only pass of `model`: none off CUDA or under `precision: fp32`."""
    device = model_device(model)
    if not _is_cuda(device):
        return contextlib.nullcontext()
    import torch

    mode = precision()
    if mode == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if mode == "bf16" else torch.float16
    return torch.autocast("cuda", dtype=dtype)


class Encoder:
    """L2-normalised embeddings under a SentenceTransformer, each distinct text encoded once per instance.

    Lee documents occur in many pairs, and one evaluation job scores several
    tasks with the same model: the cache serves them all.
    """

    def __init__(self, model, batch_size: int = 64, show_progress: bool | None = None):
        self.model, self.batch_size, self.show_progress, self.cache = model, batch_size, show_progress, {}

    def __call__(self, texts) -> np.ndarray:
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            progress = len(new) > 1000 if self.show_progress is None else self.show_progress
            # on CUDA as many rows per batch as memory holds, under autocast (below); elsewhere
            # `batch_size` and fp32, the call of before
            rows = batch_size(self.model, self.batch_size, new)
            with autocast(self.model):
                emb = self.model.encode(new, batch_size=rows, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=progress)
            self.cache.update(zip(new, emb))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def cosine(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine similarity of each (a, b) pair."""
        self(dict.fromkeys(t for pair in pairs for t in pair))  # one encode call, first-seen order
        a = self([p[0] for p in pairs])
        b = self([p[1] for p in pairs])
        return np.einsum("ij,ij->i", a, b).astype(np.float64)


def cosine_scores(model, pairs: Sequence[tuple[str, str]], batch_size: int = 64,
                  show_progress: bool = True) -> np.ndarray:
    """Cosine similarity of each (a, b) pair under a SentenceTransformer (every distinct text encoded once)."""
    return Encoder(model, batch_size, show_progress).cosine(pairs)


def scores_by_dim(model, pairs: Sequence[tuple[str, str]], dims: Sequence[int],
                  requested: int) -> dict[int, np.ndarray]:
    """Cosine of each pair's embeddings cut to their first d components, for every d of `dims` (a Matryoshka
    student's test split at each size; augsbert.models.compact); `requested`: the rows per batch asked for."""
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    with autocast(model):
        emb = model.encode(texts, batch_size=batch_size(model, requested, texts), convert_to_numpy=True,
                           normalize_embeddings=False, show_progress_bar=False)
    where = {t: i for i, t in enumerate(texts)}
    first = emb[[where[a] for a, _ in pairs]].astype(np.float64)
    second = emb[[where[b] for _, b in pairs]].astype(np.float64)
    scores = {}
    for d in dims:
        a, b = first[:, :d], second[:, :d]
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        scores[int(d)] = np.einsum("ij,ij->i", a, b) / np.where(norms == 0, 1.0, norms)
    return scores


SCORE_CHUNK = 65_536  # (query, passage) pairs held for a Cross-Encoder at a time (stream_scores)


def stream_scores(model, pairs, batch_size: int, scale: str, chunk: int = SCORE_CHUNK) -> np.ndarray:
    """The Cross-Encoder's scores of an iterable of (query, passage) pairs, `chunk` pairs in memory at a time."""
    import torch

    activation = torch.nn.Sigmoid() if scale == "sigmoid" else torch.nn.Identity()
    out, buffer = [], []

    def flush():
        out.append(np.asarray(model.predict(buffer, batch_size=batch_size, activation_fn=activation,
                                            convert_to_numpy=True, show_progress_bar=False), dtype=np.float64))
        buffer.clear()

    for pair in pairs:
        buffer.append(pair)
        if len(buffer) == chunk:
            flush()
    if buffer:
        flush()
    return np.concatenate(out) if out else np.zeros(0)


def encode_rows(model, texts: list[str], path: Path, batch_size: int) -> int:
    """Encode `texts` (each unique text once) into the .npy file `path`, row i = texts[i]; returns the dimension."""
    unique = sorted(set(texts))
    position = {text: i for i, text in enumerate(unique)}
    embeddings = model.encode(unique, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    table = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(len(texts), embeddings.shape[1]))
    for start in range(0, len(texts), 65536):  # chunks: no second full-size copy in memory
        chunk = texts[start : start + 65536]
        table[start : start + len(chunk)] = embeddings[[position[t] for t in chunk]]
    table.flush()
    del table
    return int(embeddings.shape[1])
