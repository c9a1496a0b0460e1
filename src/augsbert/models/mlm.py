"""Masked-language-model domain adaptation on pairs in the Cross-Bi-Encoder layout (thesis 4.3.1).

Inputs are built by the CBE's own `PairTokenizer`, so adaptation sees exactly
the `[CLS] a [SEP] [CLS] b [SEP]` sequences the teacher will see. Masking is
"uniform": every non-special, non-padding token is chosen with probability p
and replaced by the mask token (no 80/10/10 split unless asked for).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from .cross_bi_encoder import PairTokenizer
from ..data.prompts import prompt_positions

log = logging.getLogger(__name__)

IGNORE = -100  # label of positions that do not count in the loss


def mask_tokens(input_ids: torch.Tensor, maskable: torch.Tensor, mask_token_id: int, probability: float,
                generator: torch.Generator | None = None, scheme: str = "uniform",
                vocab_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked inputs and labels.

    `maskable` marks the positions that may be chosen (never special tokens
    or padding). `uniform`: chosen tokens become the mask token; `bert`:
    80 % mask token, 10 % a random token, 10 % unchanged. Labels hold the
    original id at chosen positions and -100 elsewhere.
    """
    chosen = (torch.rand(input_ids.shape, generator=generator) < probability) & maskable.bool()
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
    masked = input_ids.clone()
    if scheme == "uniform":
        masked[chosen] = mask_token_id
    elif scheme == "bert":
        roll = torch.rand(input_ids.shape, generator=generator)
        masked[chosen & (roll < 0.8)] = mask_token_id
        random_pos = chosen & (roll >= 0.8) & (roll < 0.9)
        if vocab_size is None:
            raise ValueError("the bert scheme needs vocab_size for its random replacements")
        masked[random_pos] = torch.randint(vocab_size, input_ids.shape, generator=generator)[random_pos]
    else:
        raise ValueError(f"unknown masking scheme {scheme!r} (uniform or bert)")
    return masked, labels


def maskable_positions(pair_tokenizer: PairTokenizer, features: dict[str, torch.Tensor],
                       delimiter_id: int | None = None) -> torch.Tensor:
    """Real tokens that are not special tokens ([CLS]/[SEP]/<s>/</s>, padding) nor, with a topic
    `delimiter_id`, prompt tokens (thesis 4.4.3: MLM never masks the topic prompt)."""
    tok = pair_tokenizer.tokenizer
    special = torch.tensor(sorted(set(tok.all_special_ids)), dtype=torch.long)
    maskable = features["attention_mask"].bool() & ~torch.isin(features["input_ids"], special)
    if delimiter_id is not None:
        maskable &= ~prompt_positions(features["input_ids"], tok.cls_token_id, delimiter_id)
    return maskable


class MLMPairCollator:
    """Rows {sentence1, sentence2} -> masked CBE-layout batches for a masked-LM head."""

    def __init__(self, pair_tokenizer: PairTokenizer, probability: float = 0.2, scheme: str = "uniform",
                 seed: int | None = None, delimiter_id: int | None = None):
        self.pair_tokenizer = pair_tokenizer
        self.delimiter_id = delimiter_id  # topic prompts: positions up to it are never masked
        self.probability = probability
        self.scheme = scheme
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None

    def __call__(self, rows: Sequence[dict]) -> dict[str, torch.Tensor]:
        tok = self.pair_tokenizer.tokenizer
        feats = self.pair_tokenizer([r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
        masked, labels = mask_tokens(feats["input_ids"], maskable_positions(self.pair_tokenizer, feats, self.delimiter_id),
                                     tok.mask_token_id, self.probability, self.generator, self.scheme,
                                     len(tok))
        batch = {"input_ids": masked, "attention_mask": feats["attention_mask"], "labels": labels}
        if "token_type_ids" in feats:
            batch["token_type_ids"] = feats["token_type_ids"]
        return batch


def masked_lm_from(path: str, config_kwargs: dict | None = None):
    """A masked-LM model from `path`; a checkpoint without an MLM head gets a new one.

    The new head's decoder is tied to the word embeddings (the usual BERT
    setup); the rest of the head starts freshly initialised. The log says so.
    """
    from transformers import AutoConfig, AutoModelForMaskedLM

    config = AutoConfig.from_pretrained(path, **(config_kwargs or {}))
    config.tie_word_embeddings = True
    model, info = AutoModelForMaskedLM.from_pretrained(path, config=config, output_loading_info=True)
    prefix = model.base_model_prefix + "."
    new_head = [k for k in info.get("missing_keys", []) if not k.startswith(prefix)]
    missing_encoder = [k for k in info.get("missing_keys", []) if k.startswith(prefix)]
    if new_head:
        log.info("%s has no (complete) masked-LM head: initialised %s fresh; decoder tied to the word embeddings",
                 path, ", ".join(sorted(new_head)[:6]))
    if missing_encoder:
        raise ValueError(f"{path}: encoder weights missing for a masked-LM model: {missing_encoder[:5]}")
    return model
