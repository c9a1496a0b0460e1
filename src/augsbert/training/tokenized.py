"""Training texts tokenised once: a step's batch is looked up and padded instead of tokenised again.

A trainer tokenises every batch it collates: the same texts once per epoch,
and SimCSE's anchor and positive (one text) twice per step. Here the texts of
a training set are tokenised once, in large chunks, by the very call the
trainer would make, and kept without their padding; a batch then takes its
rows and pads them. The tensors are the ones that call gives for the batch
(tests/test_tokenized.py checks equality); a text that is not in the set (a
noised copy, a dev sentence) goes through the original call.

- `PretokenizedPreprocess`: a sentence-transformers model's `preprocess`
  (the collator of the Bi-Encoder and pre-training trainers; the
  Cross-Encoder's losses, which tokenise pairs inside the loss);
- `TokenIds`: token ids without special tokens or truncation, what the
  Cross-Bi-Encoder's `PairTokenizer` (also MLM adaptation) builds its pairs
  from and what `batching.token_counts` counts.

`pad_to_multiple_of` (the trainers set 8 on CUDA only, where tensor cores
want it) pads a batch further, and `buckets` (the pair trainers set
`max_length` on CUDA with `cuda_graphs: auto`, augsbert.training.cuda_graphs) pads
it to one of a few fixed widths (`augsbert.models.padding.bucket_width`); padding is masked
everywhere, so the results differ only by float summation order (and, with
dropout, the layout of its masks), and the CPU path keeps the exact width.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import torch

from ..models.padding import batch_width

PADDED_KEYS = ("input_ids", "attention_mask", "token_type_ids")  # the tensors a text model's preprocess pads
CHUNK = 4096  # texts per tokeniser call while filling the cache


class PretokenizedPreprocess:
    """`preprocess(inputs)` of a sentence-transformers model, answered from `items` tokenised once.

    `items` are what the model's preprocess takes per example: texts, or (text, text) pairs for a
    Cross-Encoder. A call whose inputs are all known returns the padded rows (on `device` when given,
    copied from pinned memory without waiting); any other call (an unknown input, a prompt, a task)
    goes to `preprocess` unchanged. If the model's preprocess returns anything but padded
    `PADDED_KEYS` tensors and constant strings, nothing is cached and every call goes through.
    """

    def __init__(self, preprocess: Callable, tokenizer, items: Sequence[Hashable], chunk: int = CHUNK,
                 pad_to_multiple_of: int | None = None, device: str | torch.device | None = None,
                 buckets: int | None = None):
        self.preprocess = preprocess
        self.pad_to_multiple_of = pad_to_multiple_of
        self.buckets = buckets
        self.device = torch.device(device) if device is not None else None
        self.index: dict[Hashable, int] = {}
        self.left = getattr(tokenizer, "padding_side", "right") == "left"
        self.pad_values = {"input_ids": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
                           "attention_mask": 0, "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}
        self.keys: list[str] = []  # the output's keys in preprocess's order
        self.constants: dict[str, object] = {}  # e.g. modality: "text"
        unique = list(dict.fromkeys(items))
        # each key's real tokens of all items, concatenated (int32), and where each item's start
        flat: dict[str, list[np.ndarray]] = {}
        lengths: list[np.ndarray] = []
        for start in range(0, len(unique), chunk):
            part = unique[start : start + chunk]
            out = preprocess(list(part))
            if not self._accept(out):
                self.index = {}
                return
            real = out["attention_mask"].numpy().astype(bool)  # row by row, the real tokens in order
            lengths.append(real.sum(1))
            for key in self.keys:
                if key in PADDED_KEYS:
                    flat.setdefault(key, []).append(out[key].numpy()[real].astype(np.int32))
            self.index.update((item, len(self.index)) for item in part)
        self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.flat = {key: np.concatenate(parts) for key, parts in flat.items()}

    def _accept(self, out: dict) -> bool:
        tensors = [k for k, v in out.items() if isinstance(v, torch.Tensor)]
        constants = {k: v for k, v in out.items() if not isinstance(v, torch.Tensor)}
        if not set(tensors) <= set(PADDED_KEYS) or "attention_mask" not in tensors or \
                any(out[k].dim() != 2 or out[k].dtype != torch.int64 for k in tensors) or \
                not all(isinstance(v, str) for v in constants.values()):
            return False
        if not self.keys:
            self.keys, self.constants = list(out), constants
        return list(out) == self.keys and constants == self.constants

    @property
    def enabled(self) -> bool:
        return bool(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def __call__(self, inputs: Sequence[Hashable], prompt: str | None = None, task: str | None = None, **kwargs):
        try:
            found = [self.index[item] for item in inputs] if not (prompt or task or kwargs) else None
        except (KeyError, TypeError):  # unknown (or unhashable) input
            found = None
        if not found:
            if prompt is not None or task is not None:
                kwargs.update(prompt=prompt, task=task)
            return self.preprocess(inputs, **kwargs)
        lengths = self.lengths[found]
        width = batch_width(int(lengths.max()), self.pad_to_multiple_of, self.buckets)
        out = {}
        for key in self.keys:
            if key not in self.flat:
                out[key] = self.constants[key]
                continue
            padded = np.full((len(found), width), self.pad_values[key], dtype=np.int64)
            values = self.flat[key]
            for row, (start, n) in enumerate(zip(self.starts[found].tolist(), lengths.tolist())):
                if self.left:
                    padded[row, width - n:] = values[start : start + n]
                else:
                    padded[row, :n] = values[start : start + n]
            out[key] = self._tensor(padded)
        return out

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array)
        if self.device is None or self.device.type != "cuda":
            return tensor
        # pinned, then copied without blocking: the step does not wait for the GPU to finish the previous one
        return tensor.pin_memory().to(self.device, non_blocking=True)


class TokenIds:
    """Token ids of texts without special tokens or truncation (`tokenizer(texts, add_special_tokens=False,
    truncation=False)`), each distinct text tokenised once; unknown texts are tokenised when asked for."""

    def __init__(self, tokenizer, texts: Sequence[str] = (), chunk: int = CHUNK):
        self.tokenizer = tokenizer
        self.ids: dict[str, list[int]] = {}
        self.add(texts, chunk)

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def add(self, texts: Sequence[str], chunk: int = CHUNK) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self.ids]
        for start in range(0, len(new), chunk):
            part = new[start : start + chunk]
            self.ids.update(zip(part, self.tokenize(part)))

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.ids]
        extra = dict(zip(missing, self.tokenize(missing))) if missing else {}
        return [self.ids[t] if t in self.ids else extra[t] for t in texts]

    def counts(self, texts: Sequence[str]) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self(texts)), dtype=np.int64, count=len(texts))


def pad_multiple(device) -> int | None:
    """Training batches' width multiple on `device`: 8 on CUDA (tensor cores), none elsewhere (exact widths)."""
    return 8 if torch.device(device).type == "cuda" else None


def pretokenize_collator(collator, model, dataset, buckets: int | None = None) -> None:
    """Answer a sentence-transformers trainer's `collator` (its `preprocess_fn`, the model's preprocess) from
    the text columns of `dataset` tokenised once (padded to `buckets`' widths when given)."""
    skip = {*collator.valid_label_columns, "dataset_name"}
    texts = [t for column in dataset.column_names if column not in skip  # [:]: a list (a column iterates by row)
             for t in dataset[column][:] if isinstance(t, str)]
    collator.preprocess_fn = PretokenizedPreprocess(collator.preprocess_fn, model.tokenizer, texts,
                                                    pad_to_multiple_of=pad_multiple(model.device), buckets=buckets)
