"""Seed 000's CLM autoencoder: `CLMAutoEncoderLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .common import WANG_2022, decoder_config


class CLMAutoEncoderLoss(nn.Module):
    """CLM autoencoder (seed 000, 3.2.1, equation 3.4): reconstruct x left to right from f(x) alone.

    A `decoder_layers`-layer causal Transformer decoder reads x shifted right and
    cross-attends only to the pooled sentence embedding (memory = one vector,
    as TSDAE); no input noise. L = -(1/N) Σ_i Σ_t log P(x_t | x_<t, f(x_i)):
    summed over a sentence's tokens (padding excluded), averaged over sentences.
    The decoder starts from the base checkpoint's first `decoder_layers`
    layers and embeddings (its own copy: seed 000 states neither its
    initialisation nor tying), cross-attention freshly initialised.

    Inputs: one text column (the sentence). No labels.
    """

    def __init__(self, model, base: str, decoder_layers: int = 2, config_kwargs: dict | None = None) -> None:
        super().__init__()
        from transformers import AutoModelForCausalLM

        self.model = model
        config = decoder_config(base, decoder_layers, config_kwargs, causal=True)
        self.decoder = AutoModelForCausalLM.from_pretrained(base, config=config).to(model.device)

    def from_embedding(self, embedding: Tensor, features: dict[str, Tensor]) -> Tensor:
        ids, mask = features["input_ids"], features["attention_mask"]
        logits = self.decoder(input_ids=ids[:, :-1], attention_mask=mask[:, :-1],
                              encoder_hidden_states=embedding[:, None],
                              encoder_attention_mask=torch.ones(len(ids), 1, dtype=mask.dtype, device=mask.device),
                              use_cache=False).logits
        nll = nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        return (nll * mask[:, 1:]).sum() / len(ids)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        features = list(sentence_features)[0]
        return self.from_embedding(self.model(features)["sentence_embedding"], features)

    def get_config_dict(self) -> dict[str, Any]:
        return {"decoder_layers": self.decoder.config.num_hidden_layers}

    @property
    def citation(self) -> str:
        return WANG_2022
