"""Masked-LM as an auxiliary pre-training loss: `MaskedLMLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..models.mlm import IGNORE, mask_tokens, masked_lm_from
from .common import masked_lm_logits


class MaskedLMLoss(nn.Module):
    """Masked-language-model loss on the Bi-Encoder's own transformer (BERT, Devlin et al. 2019).

    The sentence features of the first column are masked (every non-special,
    non-padding token chosen with `probability`; `uniform` = all chosen tokens
    become the mask token, `bert` = 80/10/10) and a masked-LM head on top of
    the *shared* encoder predicts them; the loss is the mean cross-entropy
    over the masked positions only. The head comes from the checkpoint's
    masked-LM head where it has one (else a new head, decoder tied to the word
    embeddings). In training, masking draws from the global torch RNG inside
    `forward`, which the trainer checkpoints, so a resumed run masks the same
    way; in eval mode from a generator fixed by the batch, so held-out losses
    of different checkpoints compare.

    Inputs: any text column(s); only the first is used. No labels.
    """

    def __init__(self, model, head_source: str, probability: float = 0.2, masking: str = "uniform",
                 config_kwargs: dict | None = None) -> None:
        super().__init__()
        self.model = model
        encoder = model[0].auto_model
        mlm = masked_lm_from(head_source, config_kwargs)
        # the masked-LM model runs our encoder: its own base model is replaced by the shared one
        setattr(mlm, mlm.base_model_prefix, encoder)
        mlm.get_output_embeddings().weight = encoder.get_input_embeddings().weight
        self.mlm = mlm.to(encoder.device)
        self.probability, self.masking = probability, masking
        tokenizer = model.tokenizer
        self.mask_id, self.vocab_size = tokenizer.mask_token_id, len(tokenizer)
        self.register_buffer("special_ids", torch.tensor(sorted(set(tokenizer.all_special_ids))), persistent=False)

    def masked(self, features: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        ids = features["input_ids"]
        maskable = features["attention_mask"].bool() & ~torch.isin(ids, self.special_ids.to(ids.device))
        # evaluation masks by a generator fixed by the batch, so held-out losses compare across checkpoints
        generator = None if self.model.training else torch.Generator().manual_seed(int(ids.sum()) + ids.numel())
        masked, labels = mask_tokens(ids.cpu(), maskable.cpu(), self.mask_id, self.probability, generator,
                                     scheme=self.masking, vocab_size=self.vocab_size)
        return masked.to(ids.device), labels.to(ids.device)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        features = list(sentence_features)[0]
        masked, targets = self.masked(features)
        inputs = {"input_ids": masked, "attention_mask": features["attention_mask"]}
        if "token_type_ids" in features:
            inputs["token_type_ids"] = features["token_type_ids"]
        chosen = targets != IGNORE
        logits = masked_lm_logits(self.mlm, chosen, **inputs)
        if not chosen.any():  # nothing masked in this batch (tiny inputs): no signal, keep the graph
            return logits.sum() * 0.0
        return nn.functional.cross_entropy(logits, targets[chosen])

    def get_config_dict(self) -> dict[str, Any]:
        return {"probability": self.probability, "masking": self.masking}

    @property
    def citation(self) -> str:
        return """
@inproceedings{devlin2019bert,
    title={BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding},
    author={Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina},
    booktitle={NAACL-HLT},
    year={2019}
}
"""
