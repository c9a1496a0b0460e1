"""Seed 000's MLM autoencoder: `MLMAutoEncoderLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..models.mlm import IGNORE, mask_tokens
from .common import WANG_2022, decoder_config, masked_lm_logits


class MLMAutoEncoderLoss(nn.Module):
    """MLM autoencoder (seed 000, 3.2.2, equation 3.5): predict a heavily masked copy of x given f(x).

    A copy of x has `mask_probability` (0.8) of its tokens masked; its decoder
    word embeddings get f(x) in slot 0 (the [CLS] position); a
    `decoder_layers`-layer Transformer without cross-attention predicts the
    masked tokens. L = -(1/N) Σ_i Σ_{m ∈ M_i} log P(x_m | f(x_i), x \\ M_i):
    summed over a sentence's masked tokens, averaged over sentences. The
    decoder starts from the base checkpoint's first layers and its masked-LM
    head where it has one (its own copy). Masks come from the global torch RNG
    in training, from a generator fixed by the batch in eval mode.

    Inputs: one text column (the sentence). No labels.
    """

    def __init__(self, model, base: str, decoder_layers: int = 2, mask_probability: float = 0.8,
                 config_kwargs: dict | None = None) -> None:
        super().__init__()
        from transformers import AutoModelForMaskedLM

        self.model = model
        config = decoder_config(base, decoder_layers, config_kwargs, causal=False)
        self.decoder = AutoModelForMaskedLM.from_pretrained(base, config=config).to(model.device)
        self.probability = mask_probability
        tokenizer = model.tokenizer
        self.mask_id = tokenizer.mask_token_id
        self.register_buffer("special_ids", torch.tensor(sorted(set(tokenizer.all_special_ids))), persistent=False)

    def decoder_inputs(self, embedding: Tensor, features: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(input embeddings with f(x) in slot 0, labels of the masked positions)."""
        ids = features["input_ids"]
        maskable = features["attention_mask"].bool() & ~torch.isin(ids, self.special_ids.to(ids.device))
        generator = None if self.model.training else torch.Generator().manual_seed(int(ids.sum()) + ids.numel())
        masked, labels = mask_tokens(ids.cpu(), maskable.cpu(), self.mask_id, self.probability, generator)
        embeds = self.decoder.get_input_embeddings()(masked.to(ids.device))
        embeds = torch.cat([embedding[:, None].to(embeds.dtype), embeds[:, 1:]], dim=1)
        return embeds, labels.to(ids.device)

    def from_embedding(self, embedding: Tensor, features: dict[str, Tensor]) -> Tensor:
        embeds, labels = self.decoder_inputs(embedding, features)
        chosen = labels != IGNORE
        logits = masked_lm_logits(self.decoder, chosen, inputs_embeds=embeds, attention_mask=features["attention_mask"])
        return nn.functional.cross_entropy(logits, labels[chosen], reduction="sum") / len(labels)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        features = list(sentence_features)[0]
        return self.from_embedding(self.model(features)["sentence_embedding"], features)

    def get_config_dict(self) -> dict[str, Any]:
        return {"decoder_layers": self.decoder.config.num_hidden_layers, "mask_probability": self.probability}

    @property
    def citation(self) -> str:
        return WANG_2022
