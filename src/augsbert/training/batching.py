"""Length-grouped training batches: little padding, every example once per epoch, resumable order.

The scheme of Hugging Face's `group_by_length`: the examples are shuffled,
cut into mega-batches of `megabatch` batches, each mega-batch is sorted by
token length and cut into batches; then the order of the batches is shuffled,
and the batch with the most padded tokens goes first (an out-of-memory shows
at the first step, not hours later). The one incomplete batch, if any, is the
last. The order depends only on (seed, epoch), never on global RNG state, so a
job resumed mid-epoch skips exactly the batches it had trained on.

Lengths are token counts as the model sees them (special tokens included,
truncated at the model's maximum length), counted once before training with
the model's (fast) tokenizer:

- Cross-Encoder / Cross-Bi-Encoder / MLM pairs: one sequence per pair, so one
  length (1-D grouping);
- Bi-Encoder: the two sentences are padded separately (one forward pass per
  column), so a pair has two lengths and a batch is cheap only when both are
  homogeneous. Pairs are oriented longer sentence first (the Bi-Encoder's
  cosine loss is symmetric, so this changes nothing but padding) and a
  mega-batch is grouped in 2-D: halved recursively, each time by whichever of
  the two lengths pads less, down to single batches (k-d split). Two lengths
  need more batches per mega-batch than one for the same padding, hence the
  student's larger default `megabatch` (400 against 50).

The samplers plug into the libraries' own mechanisms: `LengthGroupedTrainer`
(a Hugging Face `Trainer` whose `train_sampling_strategy="group_by_length"`
reads the `length_column_name` column) and `LengthGroupedBatchSampler`
(a sentence-transformers `DefaultBatchSampler` for the trainers' `batch_sampler`
argument).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np
import torch
from sentence_transformers.base.sampler import DefaultBatchSampler
from transformers import Trainer

LENGTH_COLUMN = "length"


# ---------------------------------------------------------------- token lengths
def token_counts(tokenizer, texts: Sequence[str], chunk: int = 2048, ids=None) -> np.ndarray:
    """Tokens of each text without special tokens and without truncation (each distinct text tokenised once).

    `ids` (augsbert.training.tokenized.TokenIds of `tokenizer`): the texts' ids, tokenised once for training as well.
    """
    texts = list(texts)
    if ids is not None:
        return ids.counts(texts)
    unique = list(dict.fromkeys(texts))
    counts: dict[str, int] = {}
    for start in range(0, len(unique), chunk):
        part = unique[start : start + chunk]
        ids = tokenizer(part, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        counts.update(zip(part, map(len, ids)))
    return np.fromiter((counts[t] for t in texts), dtype=np.int64, count=len(texts))


def pair_lengths(tokenizer, sentence1: Sequence[str], sentence2: Sequence[str], max_length: int,
                 specials: int, ids=None) -> np.ndarray:
    """Tokens of each pair as one sequence: both texts plus `specials`, truncated ("longest first") at `max_length`."""
    total = token_counts(tokenizer, sentence1, ids=ids) + token_counts(tokenizer, sentence2, ids=ids) + specials
    return np.minimum(total, max_length)


def side_lengths(tokenizer, sentence1: Sequence[str], sentence2: Sequence[str], max_length: int) -> np.ndarray:
    """(n, 2) tokens of each sentence encoded alone (special tokens included, truncated at `max_length`)."""
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    return np.minimum(np.stack([token_counts(tokenizer, sentence1), token_counts(tokenizer, sentence2)], 1) + specials,
                      max_length)


# ---------------------------------------------------------------- batch order
def _as_2d(lengths) -> np.ndarray:
    lengths = np.asarray(lengths, dtype=np.int64)
    return lengths[:, None] if lengths.ndim == 1 else lengths


def padded_tokens(batches: Sequence[np.ndarray], lengths) -> int:
    """Tokens computed for `batches`: every column (sequence) of a batch padded to its longest member."""
    lengths = _as_2d(lengths)
    return int(sum(len(b) * lengths[b].max(0).sum() for b in batches if len(b)))


def padding_share(batches: Sequence[np.ndarray], lengths) -> float:
    """Share of the computed tokens that are padding."""
    total = padded_tokens(batches, lengths)
    real = int(sum(_as_2d(lengths)[b].sum() for b in batches if len(b)))
    return 1 - real / total if total else 0.0


def _sorted_desc(idx: np.ndarray, key: np.ndarray) -> np.ndarray:
    return idx[np.argsort(-key[idx], kind="stable")]


def _cut(idx: np.ndarray, size: int) -> list[np.ndarray]:
    return [idx[i : i + size] for i in range(0, len(idx), size)]


def _excess(idx: np.ndarray, lengths: np.ndarray) -> int:
    """Padding tokens if `idx` were one batch."""
    return int(len(idx) * lengths[idx].max(0).sum() - lengths[idx].sum())


def _group_megabatch(mega: np.ndarray, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches of one mega-batch of similar lengths.

    One length per example: sorted (longest first) and cut into batches.
    Two lengths (a Bi-Encoder pair): halved recursively at a batch boundary,
    each time sorted by whichever length makes the two halves pad least, until
    one batch is left (a k-d split; with one length it is the same sort).
    """
    if lengths.shape[1] == 1:
        return _cut(_sorted_desc(mega, lengths[:, 0]), batch_size)
    if len(mega) <= batch_size:
        return [mega]
    cut = (math.ceil(len(mega) / batch_size) // 2) * batch_size
    halves = min(((_sorted_desc(mega, lengths[:, d]) for d in range(lengths.shape[1]))),
                 key=lambda order: _excess(order[:cut], lengths) + _excess(order[cut:], lengths))
    return _group_megabatch(halves[:cut], lengths, batch_size) + _group_megabatch(halves[cut:], lengths, batch_size)


def length_grouped_batches(lengths, batch_size: int, megabatch: int, seed: int, epoch: int = 0,
                           drop_last: bool = False) -> list[np.ndarray]:
    """Batches (index arrays) of one epoch; a pure function of its arguments.

    `lengths` is (n,) for one sequence per example or (n, 2) for two
    separately padded sequences (see the module docstring).
    """
    lengths = _as_2d(lengths)
    n = len(lengths)
    if batch_size < 1 or megabatch < 1:
        raise ValueError(f"batch_size and megabatch must be >= 1 (got {batch_size}, {megabatch})")
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n)
    batches = [b for mega in _cut(order, batch_size * megabatch) for b in _group_megabatch(mega, lengths, batch_size)]
    full = [b for b in batches if len(b) == batch_size]
    partial_batches = [] if drop_last else [b for b in batches if len(b) < batch_size]  # at most one
    full = [full[i] for i in rng.permutation(len(full))]
    if full:
        costs = [lengths[b].max(0).sum() for b in full]
        first = int(np.argmax(costs))
        full[0], full[first] = full[first], full[0]
        if partial_batches:  # the incomplete batch must stay last; give its longest example to the first batch
            rest, head = partial_batches[0], full[0]
            i, j = int(np.argmax(lengths[rest].sum(1))), int(np.argmin(lengths[head].sum(1)))
            if lengths[rest[i]].sum() > lengths[head].sum(1).max():
                rest, head = rest.copy(), head.copy()
                rest[i], head[j] = head[j], rest[i]
                full[0], partial_batches = head, [rest]
    return full + partial_batches


# ---------------------------------------------------------------- samplers
class LengthGroupedSampler(torch.utils.data.Sampler):
    """Index sampler for the Hugging Face Trainer: the batches of `length_grouped_batches`, flattened.

    The DataLoader cuts the stream into `batch_size` chunks; only the last
    batch may be short, so the chunks are exactly the grouped batches.
    """

    def __init__(self, lengths, batch_size: int, megabatch: int, seed: int):
        self.lengths = _as_2d(lengths)
        self.batch_size, self.megabatch, self.seed = batch_size, megabatch, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        batches = length_grouped_batches(self.lengths, self.batch_size, self.megabatch, self.seed, self.epoch)
        return iter(np.concatenate(batches).tolist() if batches else [])


class LengthGroupedBatchSampler(DefaultBatchSampler):
    """Batch sampler for the sentence-transformers trainers (`batch_sampler=` of their training arguments).

    Lengths come in through `length_batch_sampler(lengths, megabatch)`: the
    sentence-transformers collators turn every dataset column into model
    inputs, so there is no length column there.
    """

    def __init__(self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None,
                 seed: int = 0, *, lengths=None, megabatch: int = 50):
        super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                         valid_label_columns=valid_label_columns, generator=generator, seed=seed)
        self.lengths = _as_2d(lengths)
        if len(self.lengths) != len(dataset):
            raise ValueError(f"{len(self.lengths)} lengths for a dataset of {len(dataset)} examples")
        self.megabatch = megabatch

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self):
        for batch in length_grouped_batches(self.lengths, self.batch_size, self.megabatch, self.seed, self.epoch,
                                            self.drop_last):
            yield batch.tolist()


def length_batch_sampler(lengths, megabatch: int):
    """The `batch_sampler` argument of a sentence-transformers trainer (a picklable callable)."""
    return partial(LengthGroupedBatchSampler, lengths=np.asarray(lengths), megabatch=megabatch)


class LengthGroupedTrainer(Trainer):
    """`Trainer` whose `group_by_length` strategy uses `LengthGroupedSampler` (seeded per epoch, resumable).

    The stock `LengthGroupedSampler` of transformers shuffles with the global
    torch RNG and a fixed mega-batch rule, so a resumed epoch would get another
    order; this one reads the same length column and is seeded by
    (`data_seed`, epoch), with `megabatch` batches per mega-batch.
    """

    def __init__(self, *args, megabatch: int = 50, **kwargs):
        self.megabatch = megabatch
        super().__init__(*args, **kwargs)

    def _get_train_sampler(self, train_dataset=None):
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        column = self.args.length_column_name
        if self.args.train_sampling_strategy != "group_by_length" or column not in dataset.column_names:
            return super()._get_train_sampler(train_dataset)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        # grouped by the global batch (all processes, all accumulation steps): the data loader cuts the stream
        # into per-process batches and accelerate deals them out in turn, so one optimizer step covers one
        # global batch, as in a single process (augsbert.training.distributed)
        batch = self.args.train_batch_size * self.args.gradient_accumulation_steps * max(1, self.args.world_size)
        return LengthGroupedSampler(dataset[column], batch, self.megabatch, seed)


def hf_grouping(dataset, lengths, args: dict) -> tuple[object, dict]:
    """Dataset with a length column and the TrainingArguments that make the Trainer group by it."""
    return (dataset.add_column(LENGTH_COLUMN, np.asarray(lengths).tolist()),
            {**args, "train_sampling_strategy": "group_by_length", "length_column_name": LENGTH_COLUMN})


def longer_first(dataset, lengths: np.ndarray, first: str = "sentence1", second: str = "sentence2"):
    """Swap the two texts of every pair whose second text is the longer; return the dataset and (longer, shorter).

    Only for symmetric pair models (the Bi-Encoder: shared encoder, cosine):
    the loss of (b, a) is the loss of (a, b), while batches of pairs whose
    first columns are alike pad less.
    """
    swap = np.flatnonzero(lengths[:, 1] > lengths[:, 0])
    if len(swap):
        data = dataset.to_dict()  # column order is kept (the collator reads the texts in column order)
        for i in swap:
            data[first][i], data[second][i] = data[second][i], data[first][i]
        dataset = type(dataset).from_dict(data)
    return dataset, np.sort(lengths, axis=1)[:, ::-1].copy()
