"""The Cross-Bi-Encoder (CBE): one forward pass over a pair, two mean poolings, cosine.

Input layout `[CLS] a [SEP] [CLS] b [SEP]` (RoBERTa-style `<s> a </s> <s> b </s>`),
built from `add_special_tokens=False` encodings so it works for any encoder
family. The two segment masks are made while tokenising: segment one is the
first [CLS] through the first [SEP], segment two the second [CLS] through the
second [SEP]; padding belongs to neither. u and v are the means of the last
hidden states over each segment and the score is cos(u, v) in [-1, 1], on the
same scale as the Bi-Encoder student (thesis section 4.1.2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from huggingface_hub import ModelCard, ModelHubMixin
from torch import nn

from .padding import batch_width

CONFIG_NAME = "cross_bi_encoder.json"
SPECIALS_PER_PAIR = 4  # two [CLS] and two [SEP]

# What sentence-transformers reads first when a directory is given to CrossEncoder(path) or
# SentenceTransformer(path). A CBE writes both so that neither library builds a model with a random head:
# CrossEncoder finds model_type "CrossEncoder" and, before loading any module, checks `requirements`; ours
# can never be met, so it stops with LOAD_MESSAGE. SentenceTransformer treats the directory as a
# CrossEncoder save and converts it the way it converts every one (with a warning): the CBE's encoder
# with mean pooling, each text embedded alone -- real weights, no new head, but not the CBE's scores.
# modules.json is empty, so a CrossEncoder that ignored `requirements` would stop on an empty module list.
ST_CONFIG_NAME = "config_sentence_transformers.json"
ST_MODULES_NAME = "modules.json"
LOAD_HINT = "from augsbert.models.cross_bi_encoder import CrossBiEncoder; CrossBiEncoder.from_pretrained(path)"
LOAD_MESSAGE = ("(unsatisfiable on purpose) This directory is an augsbert Cross-Bi-Encoder, not a CrossEncoder: "
                "its encoder has no classification head, and CrossEncoder would add one with random weights. "
                f"Load it with `{LOAD_HINT}` and score pairs with `.predict(pairs)`.")

CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ model_name }}

A **Cross-Bi-Encoder** (CBE), saved by the `augsbert` package (Augmented SBERT): one forward pass of a {{ encoder_type }} encoder over the pair
`{{ layout }}`, the mean of each segment's last hidden states, and their cosine as the score
(in [-1, 1]). A pair is cut to {{ max_length }} tokens, its four special tokens included (longer text first).

## Usage

```python
from augsbert.models.cross_bi_encoder import CrossBiEncoder

model = CrossBiEncoder.from_pretrained("{{ model_id }}")
scores = model.predict([("A man is playing a flute.", "Someone plays an instrument.")])
```

The directory is a standard one: `config.json`, `model.safetensors` and the tokenizer of the
encoder, plus `cross_bi_encoder.json` (max length, pooling, score). Nothing is pickled and no
remote code runs.

**Not a CrossEncoder, not a SentenceTransformer.** `CrossEncoder(path)` stops with a message
naming `CrossBiEncoder.from_pretrained` instead of adding a classification head with random
weights. `SentenceTransformer(path)` converts it like any Cross-Encoder save: the CBE's encoder
with mean pooling, embedding each text alone (without the other text in its context), which
does not reproduce the CBE's scores.
{% if training_facts %}
{{ training_facts }}
{% endif %}"""


def truncate_lengths(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """Lengths after "longest first" truncation of a pair into `budget` tokens.

    The longer text is shortened first; when both are longer than half the
    budget, each keeps about half (the first text gets the odd token).
    """
    if budget < 2:
        raise ValueError(f"max_length leaves {budget} tokens for the two texts; need at least 2")
    if len_a + len_b <= budget:
        return len_a, len_b
    half = (budget + 1) // 2
    if len_a >= len_b:
        keep_a = max(budget - len_b, half)
        return min(keep_a, len_a), budget - min(keep_a, len_a)
    keep_b = max(budget - len_a, budget - half)
    return budget - min(keep_b, len_b), min(keep_b, len_b)


class PairTokenizer:
    """Builds CBE features: input ids, attention mask, token types and the two segment masks.

    The same builder serves the CBE and (later) MLM domain adaptation, so both
    see byte-identical pair layouts.
    """

    def __init__(self, tokenizer, max_length: int, use_token_types: bool, ids=None,
                 pad_to_multiple_of: int | None = None, buckets: int | None = None):
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise ValueError("the tokenizer has no CLS/SEP (or <s>/</s>) token; a CBE needs both")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.use_token_types = use_token_types
        # training: `ids` (augsbert.training.tokenized.TokenIds) holds the training texts tokenised once, and on CUDA
        # batches are padded to a multiple of 8 (to `buckets`' fixed widths on the graph path,
        # augsbert.training.cuda_graphs); inference tokenises each batch at its exact width
        self.ids = ids
        self.pad_to_multiple_of = pad_to_multiple_of
        self.buckets = buckets

    def encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        if self.ids is not None:
            return self.ids(texts)
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]

    def layout(self, ids_a: list[int], ids_b: list[int]) -> tuple[list[int], int]:
        """Token ids of one pair and the length of its first segment (incl. its CLS and SEP)."""
        la, lb = truncate_lengths(len(ids_a), len(ids_b), self.max_length - SPECIALS_PER_PAIR)
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        first = [cls, *ids_a[:la], sep]
        return first + [cls, *ids_b[:lb], sep], len(first)

    def __call__(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> dict[str, torch.Tensor]:
        pairs = [self.layout(a, b) for a, b in zip(self.encode_texts(texts_a), self.encode_texts(texts_b))]
        lengths = np.array([len(ids) for ids, _ in pairs])
        firsts = np.array([first for _, first in pairs])
        width = batch_width(int(lengths.max()), self.pad_to_multiple_of, self.buckets)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = np.full((len(pairs), width), pad, dtype=np.int64)
        for row, (ids, _) in enumerate(pairs):
            input_ids[row, : len(ids)] = ids
        position = np.arange(width)[None, :]
        attention = position < lengths[:, None]
        seg1 = position < firsts[:, None]
        seg2 = attention & ~seg1
        features = {"input_ids": torch.from_numpy(input_ids),
                    "attention_mask": torch.from_numpy(attention.astype(np.int64)),
                    "segment1_mask": torch.from_numpy(seg1.astype(np.int64)),
                    "segment2_mask": torch.from_numpy(seg2.astype(np.int64))}
        if self.use_token_types:
            features["token_type_ids"] = features["segment2_mask"].clone()
        return features


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class CrossBiEncoder(nn.Module, ModelHubMixin, library_name="augsbert", model_card_template=CARD_TEMPLATE,
                     tags=["augsbert", "cross-bi-encoder", "sentence-similarity"]):
    """A Hugging Face encoder scored as cos(mean(segment 1), mean(segment 2)), trained with MSE.

    `save_pretrained(dir)` / `CrossBiEncoder.from_pretrained(dir or hub id)` / `push_to_hub(repo)` come
    from huggingface_hub's ModelHubMixin (safetensors, no pickle, no remote code).
    """

    def __init__(self, encoder, tokenizer, max_length: int = 512):
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_length = max_length
        use_types = getattr(encoder.config, "type_vocab_size", 0) >= 2
        self.pair_tokenizer = PairTokenizer(tokenizer, max_length, use_types)

    # ---------------------------------------------------------------- creation
    @classmethod
    def from_base(cls, path: str, max_length: int = 512, config_kwargs: dict | None = None) -> "CrossBiEncoder":
        """A CBE from any encoder checkpoint (e.g. a sentence-transformers or BERT directory)."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        config = AutoConfig.from_pretrained(path, **(config_kwargs or {}))
        encoder = AutoModel.from_pretrained(path, config=config)
        tokenizer = AutoTokenizer.from_pretrained(path)
        limit = getattr(config, "max_position_embeddings", max_length)
        if getattr(config, "model_type", "") in ("roberta", "xlm-roberta"):
            limit -= 2  # RoBERTa positions start after the padding index
        return cls(encoder, tokenizer, min(max_length, limit)).eval()  # like from_pretrained; trainers call train()

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> "CrossBiEncoder":
        """Restore a saved CBE (the same as `CrossBiEncoder.from_pretrained(path, device=device)`)."""
        return cls.from_pretrained(path, device=device)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, revision: str | None, cache_dir, force_download: bool,
                         local_files_only: bool, token, device: str | None = None, **from_config) -> "CrossBiEncoder":
        """ModelHubMixin's loading hook: a local directory, or a hub repository downloaded first.

        `from_config` holds whatever the mixin copied from config.json for names of `__init__` parameters;
        config.json is the encoder's, so those are ignored: the max length comes from cross_bi_encoder.json.
        (Older huggingface_hub releases also pass `proxies` and `resume_download`, unused here.)
        """
        unknown = set(from_config) - {"encoder", "tokenizer", "max_length", "proxies", "resume_download"}
        if unknown:
            raise TypeError(f"CrossBiEncoder.from_pretrained got unexpected arguments: {', '.join(sorted(unknown))}")
        path = Path(model_id)
        if not path.is_dir():
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(model_id, revision=revision, cache_dir=cache_dir, token=token,
                                          force_download=force_download, local_files_only=local_files_only))
        meta_path = path / CONFIG_NAME
        if not meta_path.is_file():
            raise ValueError(f"{model_id} is not a saved Cross-Bi-Encoder (no {CONFIG_NAME})")
        meta = json.loads(meta_path.read_text())
        model = cls.from_base(str(path), meta["max_length"])
        return model.to(device) if device else model

    def save(self, path: str | Path) -> None:
        """Same as `save_pretrained(path)` (kept for the training code and older callers)."""
        self.save_pretrained(path)

    def _save_pretrained(self, save_directory: Path) -> None:
        """ModelHubMixin's saving hook: safetensors weights + config, tokenizer, cross_bi_encoder.json,
        and the two sentence-transformers files that make CrossEncoder(path) refuse it (see ST_CONFIG_NAME)."""
        import sentence_transformers

        path = Path(save_directory)
        self.encoder.save_pretrained(str(path), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path))
        (path / CONFIG_NAME).write_text(json.dumps(
            {"architecture": "CrossBiEncoder", "format_version": 1, "max_length": self.max_length,
             "pooling": "mean per segment", "score": "cosine", "load_with": LOAD_HINT}, indent=2) + "\n")
        (path / ST_MODULES_NAME).write_text("[]\n")
        (path / ST_CONFIG_NAME).write_text(json.dumps(
            {"model_type": "CrossEncoder",
             "requirements": {"python": {"specifier": "<0", "reason": LOAD_MESSAGE}},
             "__version__": {"sentence_transformers": sentence_transformers.__version__}}, indent=2) + "\n")

    def generate_model_card(self, model_name: str | None = None, model_id: str | None = None,
                            training_facts: str | None = None, **card_data) -> ModelCard:
        """The model card written by save_pretrained (when the directory has no README.md yet).

        `training_facts` (Markdown) is appended: `augsbert export` passes the experiment's data, teacher,
        settings and test metrics; `card_data` adds metadata such as `base_model` or `tags`.
        """
        from huggingface_hub import ModelCardData

        info = self._hub_mixin_info.model_card_data.to_dict()
        tags = sorted(set(info.pop("tags", None) or []) | set(card_data.pop("tags", None) or []))
        data = ModelCardData(**{**info, **card_data, "tags": tags})
        cls_id, sep_id = self.tokenizer.cls_token, self.tokenizer.sep_token
        return ModelCard.from_template(
            data, template_str=self._hub_mixin_info.model_card_template,
            model_name=model_name or "Cross-Bi-Encoder", model_id=model_id or "path/to/model",
            encoder_type=getattr(self.encoder.config, "model_type", "transformer"), max_length=self.max_length,
            layout=f"{cls_id} a {sep_id} {cls_id} b {sep_id}", training_facts=training_facts)

    # ---------------------------------------------------------------- compute
    def forward(self, input_ids, attention_mask, segment1_mask, segment2_mask, token_type_ids=None, labels=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        hidden = self.encoder(**kwargs).last_hidden_state
        u = masked_mean(hidden, segment1_mask)
        v = masked_mean(hidden, segment2_mask)
        scores = F.cosine_similarity(u, v, dim=-1)
        out = {"scores": scores}
        if labels is not None:
            out["loss"] = F.mse_loss(scores, labels.to(scores.dtype))
        return out

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @torch.inference_mode()
    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32,
                show_progress_bar: bool = False) -> np.ndarray:
        """Scores in [-1, 1] for (a, b) pairs, like `CrossEncoder.predict` (length-sorted batches)."""
        from tqdm.auto import tqdm

        if not len(pairs):
            return np.zeros(0, dtype=np.float32)
        was_training = self.training
        self.eval()
        order = np.argsort([-(len(a) + len(b)) for a, b in pairs], kind="stable")
        scores = np.empty(len(pairs), dtype=np.float32)
        for start in tqdm(range(0, len(pairs), batch_size), disable=not show_progress_bar, desc="CBE"):
            idx = order[start : start + batch_size]
            feats = self.pair_tokenizer([pairs[i][0] for i in idx], [pairs[i][1] for i in idx])
            feats = {k: v.to(self.device) for k, v in feats.items()}
            scores[idx] = self(**feats)["scores"].float().cpu().numpy()
        self.train(was_training)
        return scores


class CrossBiEncoderCollator:
    """Turns dataset rows {sentence1, sentence2, score} into CBE training batches."""

    def __init__(self, pair_tokenizer: PairTokenizer):
        self.pair_tokenizer = pair_tokenizer

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = self.pair_tokenizer([r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
        batch["labels"] = torch.tensor([float(r["score"]) for r in rows], dtype=torch.float32)
        return batch
