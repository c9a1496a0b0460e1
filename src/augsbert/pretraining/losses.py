"""Pre-training objectives that sentence-transformers has no class for, in its `losses/` style.

One class per objective; each states its inputs and the paper. SimCSE (both
forms), Contrastive Tension (both forms) and TSDAE are the library's own
classes (MultipleNegativesRankingLoss, ContrastiveTensionLoss[InBatchNegatives],
DenoisingAutoEncoderLoss): `augsbert.objectives` wires them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..models.mlm import IGNORE, mask_tokens, masked_lm_from
from ..models.topic_classifier import REIML_2023  # the thesis that also defines Noise Matching (below)


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


def _cos_logits(queries: Tensor, docs: Tensor, scale: float) -> Tensor:
    return scale * nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(docs, dim=-1).T


class NoiseMatchingLoss(nn.Module):
    """Noise Matching (Reiml 2023, thesis 4.2.3): SimCSE with x+ = T(x) and a stop-gradient on f(x).

    For a batch of clean sentences x_i and their deletion-noised copies T(x_i):
    logits_ij = scale * cos(sg(f(x_i)), f(T(x_j))), loss = cross-entropy with
    target i (SimCSE's orientation: rows are the anchors x_i, columns the
    positives x+_j). Only the noised side receives gradient, so T(x) is pulled
    towards x and never x towards T(x): a subsequence should be like its
    sentence, not the reverse. The clean pass runs under `no_grad` and is
    detached (no activations kept for it); dropout is on in both passes as in
    SimCSE.

    Inputs: (clean, noised) text pairs; the noised column is made by
    `augsbert.pretraining.noise` (60 % deletion). No labels.
    """

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__()
        self.model = model
        self.scale = scale
        self.cross_entropy = nn.CrossEntropyLoss()

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        clean_features, noised_features = list(sentence_features)[:2]
        with torch.no_grad():  # sg(f(x)); detach too, for an encoder that hands back a leaf tensor
            clean = self.model(clean_features)["sentence_embedding"].detach()
        noised = self.model(noised_features)["sentence_embedding"]
        logits = _cos_logits(clean, noised, self.scale)
        return self.cross_entropy(logits, torch.arange(len(logits), device=logits.device))

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    @property
    def citation(self) -> str:
        return REIML_2023


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


class MultiTaskLoss(nn.Module):
    """L = L_main + weight * L_aux on the same batch (thesis 5.4.2: MLM+SimCSE, MLM+NM, TSDAE+NM), or with
    `weight_on="main"` L = weight * L_main + L_aux (SimCSE's reading: its auxiliary MLM term is the weighted one).

    The auxiliary objective is the "low-loss" contrastive term (SimCSE or NM);
    the main one MLM or TSDAE. `aux_columns` picks and orders the batch's text
    columns for the auxiliary loss (TSDAE reads (noised, original), NM reads
    (clean, noised): the same two columns swapped). Each loss runs its own
    forward passes (the thesis does not say a pass is shared). Returns the two
    weighted terms as a dict, which the sentence-transformers trainer sums and
    logs separately.
    """

    def __init__(self, main: nn.Module, aux: nn.Module, weight: float, aux_columns: tuple[int, ...] = (0, 1),
                 weight_on: str = "contrastive") -> None:
        super().__init__()
        if weight_on not in ("contrastive", "main"):
            raise ValueError(f"weight_on: 'contrastive' or 'main', not {weight_on!r}")
        self.main, self.aux, self.weight, self.aux_columns = main, aux, weight, tuple(aux_columns)
        self.weight_on = weight_on
        self.model = getattr(main, "model", None) or getattr(main, "encoder")

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = list(sentence_features)
        if self.weight_on == "main":
            aux = self.aux([features[i] for i in self.aux_columns], labels)
            if self.weight == 0:
                return {"aux": aux}
            return {"main": self.weight * self.main(features, labels), "aux": aux}
        main = self.main(features, labels)
        if self.weight == 0:
            return {"main": main}
        aux = self.aux([features[i] for i in self.aux_columns], labels)
        return {"main": main, "aux": self.weight * aux}

    def get_config_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "weight_on": self.weight_on, "aux_columns": list(self.aux_columns)}


CONSERT_AUGMENTATIONS = ("none", "shuffle", "token_cutoff", "feature_cutoff", "embedding_dropout")


def nt_xent(z1: Tensor, z2: Tensor, scale: float) -> Tensor:
    """Symmetric NT-Xent (seed 000, equations 2.7-2.9): (1/2N) Σ_i [l(i, i+) + l(i+, i)].

    Each of the 2N views is scored against the other 2N - 1 (itself excluded):
    its positive is the other view of its sentence, the negatives are both
    views of every other sentence.
    """
    n = len(z1)
    z = nn.functional.normalize(torch.cat([z1, z2]), dim=-1)
    logits = scale * z @ z.T
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return nn.functional.cross_entropy(logits, targets)


def shuffled_positions(position_embeddings: Tensor, attention_mask: Tensor, generator=None) -> Tensor:
    """Token shuffling: each sentence's content tokens get a random permutation of their positions.

    [CLS] keeps position 0 and the last real token ([SEP]) its position; padding is untouched.
    """
    batch, length = attention_mask.shape
    out = position_embeddings.expand(batch, length, -1).clone()
    for b, real in enumerate(attention_mask.sum(dim=1).tolist()):
        if real > 3:
            inner = torch.arange(1, real - 1)
            perm = inner[torch.randperm(len(inner), generator=generator)]
            out[b, inner] = position_embeddings[0 if position_embeddings.shape[0] == 1 else b, perm]
    return out


def token_cutoff(embeddings: Tensor, attention_mask: Tensor, rate: float, generator=None) -> Tensor:
    """Zero whole rows: round(rate x real tokens) random real tokens of each sentence (at least one)."""
    out = embeddings.clone()
    for b, real in enumerate(attention_mask.sum(dim=1).tolist()):
        k = max(1, round(rate * real))
        rows = torch.randperm(real, generator=generator)[:k]
        out[b, rows.to(out.device)] = 0.0
    return out


def feature_cutoff(embeddings: Tensor, rate: float, generator=None) -> Tensor:
    """Zero whole columns: round(rate x d) random hidden dimensions of each sentence, at every position."""
    batch, _, dim = embeddings.shape
    k = max(1, round(rate * dim))
    keep = torch.ones(batch, 1, dim, dtype=embeddings.dtype)
    for b in range(batch):
        keep[b, 0, torch.randperm(dim, generator=generator)[:k]] = 0.0
    return embeddings * keep.to(embeddings.device)


def embedding_dropout(embeddings: Tensor, rate: float, generator=None) -> Tensor:
    """Zero single elements with probability `rate` (no rescaling: the values that stay are unchanged)."""
    keep = (torch.rand(embeddings.shape, generator=generator) >= rate).to(embeddings.device, embeddings.dtype)
    return embeddings * keep


class ConSERTLoss(nn.Module):
    """ConSERT (Yan et al. 2021; seed 000, section 3.1.2): augmented embedding matrices, symmetric NT-Xent.

    Both views read the same sentence; each view's L x d embedding matrix (the
    output of the encoder's embedding layer) is augmented before the
    transformer layers: `shuffle` (permuted position ids, applied to the
    position embeddings), `token_cutoff` (zero rows), `feature_cutoff` (zero
    columns, `cutoff_rate`), `embedding_dropout` (zero elements,
    `dropout_rate`) or `none`. The encoder's own dropout is switched off (as
    ConSERT does), so without augmentation the two views are identical. The
    loss is `nt_xent` at `scale` = 1/τ. ConSERT-1 = (feature_cutoff, shuffle),
    ConSERT-2 = (embedding_dropout, shuffle); the augmentation of a view is
    drawn from the global torch RNG in training and from a generator fixed by
    the batch in eval mode.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, views: tuple[str, str] = ("feature_cutoff", "shuffle"), cutoff_rate: float = 0.2,
                 dropout_rate: float = 0.2, scale: float = 20.0) -> None:
        super().__init__()
        unknown = [v for v in views if v not in CONSERT_AUGMENTATIONS]
        if unknown or len(views) != 2:
            raise ValueError(f"ConSERT needs two views from {CONSERT_AUGMENTATIONS}, got {views}")
        self.model, self.views = model, tuple(views)
        self.cutoff_rate, self.dropout_rate, self.scale = cutoff_rate, dropout_rate, scale
        encoder = model[0].auto_model
        for module in encoder.modules():  # ConSERT removes the encoder's dropout
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        embeddings = getattr(encoder, "embeddings", None) or getattr(encoder.base_model, "embeddings")
        self._active: str | None = None
        self._mask: Tensor | None = None
        self._generator = None
        embeddings.position_embeddings.register_forward_hook(self._position_hook)
        embeddings.register_forward_hook(self._embedding_hook)

    def _position_hook(self, module, args, output):
        if self._active == "shuffle":
            return shuffled_positions(output, self._mask.cpu(), self._generator).to(output.device)
        return output

    def _embedding_hook(self, module, args, output):
        if self._active == "token_cutoff":
            return token_cutoff(output, self._mask.cpu(), self.cutoff_rate, self._generator)
        if self._active == "feature_cutoff":
            return feature_cutoff(output, self.cutoff_rate, self._generator)
        if self._active == "embedding_dropout":
            return embedding_dropout(output, self.dropout_rate, self._generator)
        return output

    def encode(self, features: dict[str, Tensor], augmentation: str) -> Tensor:
        """The sentence embeddings of one view under `augmentation`."""
        ids = features["input_ids"]
        self._generator = None if self.model.training else torch.Generator().manual_seed(
            int(ids.sum()) + ids.numel() + CONSERT_AUGMENTATIONS.index(augmentation))
        self._active, self._mask = augmentation, features["attention_mask"]
        try:
            return self.model(features)["sentence_embedding"]
        finally:
            self._active, self._mask, self._generator = None, None, None

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        return nt_xent(self.encode(first, self.views[0]), self.encode(second, self.views[1]), self.scale)

    def get_config_dict(self) -> dict[str, Any]:
        return {"views": list(self.views), "cutoff_rate": self.cutoff_rate, "dropout_rate": self.dropout_rate,
                "scale": self.scale}

    @property
    def citation(self) -> str:
        return """
@inproceedings{yan2021consert,
    title={ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation Transfer},
    author={Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran},
    booktitle={ACL-IJCNLP},
    pages={5065--5075},
    year={2021}
}
"""


def _decoder_config(base: str, layers: int, config_kwargs: dict | None, causal: bool):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base, **(config_kwargs or {}))
    config.num_hidden_layers = layers
    config.is_decoder = causal
    config.add_cross_attention = causal
    return config


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
        config = _decoder_config(base, decoder_layers, config_kwargs, causal=True)
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
        config = _decoder_config(base, decoder_layers, config_kwargs, causal=False)
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


class ContrastiveAutoEncoderLoss(nn.Module):
    """Seed 000's multi-task learning (3.3, equation 3.6): L = L_contrastive + w · L_autoencoder on a shared f(x_i).

    The first view's embeddings f(x_i) feed both the contrastive loss (with
    the second view f(x_i+) and the in-batch negatives) and the autoencoder's
    decoder, as seed 000's Figure 3.5 shows: one encoder pass per view.
    `contrastive` must offer `compute_loss_from_embeddings` (sentence-
    transformers' MultipleNegativesRankingLoss does); `autoencoder` a
    `from_embedding(embedding, features)` (CLMAutoEncoderLoss,
    MLMAutoEncoderLoss). Returns the two terms as a dict (the trainer logs them).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, contrastive: nn.Module, autoencoder: nn.Module, weight: float) -> None:
        super().__init__()
        self.model, self.contrastive, self.autoencoder, self.weight = model, contrastive, autoencoder, weight

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        first, second = list(sentence_features)[:2]
        shared = self.model(first)["sentence_embedding"]
        other = self.model(second)["sentence_embedding"]
        out = {"contrastive": self.contrastive.compute_loss_from_embeddings([shared, other], labels)}
        if self.weight:
            out["autoencoder"] = self.weight * self.autoencoder.from_embedding(shared, first)
        return out

    def get_config_dict(self) -> dict[str, Any]:
        return {"weight": self.weight}


SIMCSE_CITATION = """
@inproceedings{gao2021simcse,
    title={{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
    author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
    booktitle={EMNLP},
    year={2021}
}
"""


class TrainOnlyMLPHeadLoss(nn.Module):
    """SimCSE's train-only MLP head (Gao et al. 2021, section 3 and appendix B: `mlp_only_train`; seed 001, 5.1:
    "during training, we employed an additional MLP head on top of the CLS output, but during testing, this head
    was removed"): `pretrain.mlp_head: train_only`.

    Wraps a SimCSE loss (MultipleNegativesRankingLoss or a seed 001 variant) so that every sentence embedding it
    takes from the encoder while it runs is h = tanh(W p + b) of the pooled output p: one dense layer of the
    embedding's width and tanh, as SimCSE's MLPLayer; W ~ N(0, initializer_range²) and b = 0, as the transformers
    model initialises it. The head is a forward hook on the SentenceTransformer that is active only inside this
    loss's forward, and its weights are the loss's own (trained by the trainer, checkpointed in the loss state):
    the encoder's `encode`, the dev evaluator and the saved model see encoder + pooling only.

    Inputs: those of the wrapped loss.
    """

    def __init__(self, model, loss: nn.Module, initializer_range: float | None = None) -> None:
        super().__init__()
        self.model, self.loss = model, loss
        dim = model.get_embedding_dimension()
        if initializer_range is None:
            config = getattr(getattr(model[0], "auto_model", None), "config", None)
            initializer_range = getattr(config, "initializer_range", 0.02)
        self.initializer_range = float(initializer_range)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.Tanh()).to(model.device)
        nn.init.normal_(self.mlp[0].weight, std=self.initializer_range)
        nn.init.zeros_(self.mlp[0].bias)
        self._active = False
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        if not self._active:
            return output
        return {**output, "sentence_embedding": self.mlp(output["sentence_embedding"])}

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None):
        self._active = True
        try:
            return self.loss(sentence_features, labels)
        finally:
            self._active = False

    def get_config_dict(self) -> dict[str, Any]:
        inner = self.loss.get_config_dict() if hasattr(self.loss, "get_config_dict") else {}
        return {**inner, "mlp_head": "train_only", "loss": type(self.loss).__name__}

    @property
    def citation(self) -> str:
        return SIMCSE_CITATION + getattr(self.loss, "citation", "")
