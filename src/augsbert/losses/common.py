"""Helpers several losses share: masked-LM logits at chosen positions, cosine logits, the diagonal targets,
an autoencoder's decoder config, the embeddings of a batch's columns, seed 000's citation (its autoencoders)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

WANG_2022 = """
@mastersthesis{wang2022improving,
    title={Improving Unsupervised Contrastive Learning for Sentence Embeddings},
    author={Wang, Ruixiang},
    school={RWTH Aachen University},
    year={2022}
}
"""


def masked_lm_logits(mlm: nn.Module, chosen: Tensor, **inputs) -> Tensor:
    """Vocabulary logits of a masked-LM model at the `chosen` positions only.

    The head runs on the chosen hidden states instead of every position: with
    20 % (or 80 %) of the tokens masked that saves most of the B x L x |V|
    logits, the largest tensor of the step. Falls back to the full forward for
    a model whose head is not one module beside its base model.
    """
    heads = [m for name, m in mlm.named_children() if name != mlm.base_model_prefix]
    if len(heads) != 1:
        return mlm(**inputs).logits[chosen]
    hidden = mlm.base_model(**inputs).last_hidden_state
    return heads[0](hidden[chosen])


def scaled_cosine_logits(queries: Tensor, docs: Tensor, scale: float) -> Tensor:
    return scale * nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(docs, dim=-1).T


def decoder_config(base: str, layers: int, config_kwargs: dict | None, causal: bool):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base, **(config_kwargs or {}))
    config.num_hidden_layers = layers
    config.is_decoder = causal
    config.add_cross_attention = causal
    return config


def cosine_logits(queries: Tensor, docs: Tensor) -> Tensor:
    """cos(q_i, d_j) for every pair: equation 1's logits (no temperature)."""
    return nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(docs, dim=-1).T


def diagonal_targets(logits: Tensor) -> Tensor:
    return torch.arange(len(logits), device=logits.device)


def sentence_embeddings(model, sentence_features: Iterable[dict[str, Tensor]]) -> list[Tensor]:
    # a column absent from the batch (no NLI contradiction) arrives as an empty dict
    return [model(features)["sentence_embedding"] for features in sentence_features if features]
