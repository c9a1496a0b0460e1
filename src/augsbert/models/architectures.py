"""The three pair architectures behind one small interface.

Each adapter knows how to build its model from a base checkpoint, where its
encoder is, how it scores pairs, and how it is saved and loaded. Their
trainers (sentence-transformers trainers for the Cross-Encoder and
Bi-Encoder, the Hugging Face Trainer for the custom Cross-Bi-Encoder) are
built in `augsbert.training.trainers`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..stages.student import StudentParams
from ..stages.teacher import TeacherParams
from . import inference
from .compact import is_static, reduce_layers, static_student
from .cross_bi_encoder import CrossBiEncoder

log = logging.getLogger(__name__)


def load_bi_encoder(ref: str, device: str, max_length: int):
    """A SentenceTransformer from the local model directory `ref` (mean pooling is added for plain encoders)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(ref, device=device)
    model.max_seq_length = max_length
    return model


def embed_texts(ref: str, texts: list[str], device: str, max_length: int, batch_size: int) -> np.ndarray:
    """The L2-normalised embeddings of `texts`, in order, by the Bi-Encoder at `ref` (cut at `max_length` tokens),
    in batches of `batch_size` at the model's own precision: the candidate search's pool (its index and passes)."""
    model = load_bi_encoder(ref, device, max_length)
    log.info("encoding %d pool sentences with %s", len(texts), ref)
    return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=True)


ACTIVATIONS = {"sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh, "identity": torch.nn.Identity}


def freeze_embeddings(encoder: torch.nn.Module) -> list[str]:
    """Freeze word, position and token-type embeddings of a Hugging Face encoder; return what was frozen."""
    base = getattr(encoder, "base_model", encoder)
    embeddings = getattr(base, "embeddings", None)
    if embeddings is None:
        raise ValueError(f"{type(encoder).__name__} has no `embeddings` module to freeze")
    frozen = []
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        module = getattr(embeddings, name, None)
        if module is not None:
            module.requires_grad_(False)
            frozen.append(name)
    return frozen


def _hf_module(st_model) -> torch.nn.Module:
    """The transformers model inside a SentenceTransformer / CrossEncoder."""
    return st_model[0].auto_model if hasattr(st_model[0], "auto_model") else st_model[0].model


class _SentenceTransformersModel:
    """Shared by the two sentence-transformers models: where the encoder is, how to save."""

    def encoder(self, model):
        return _hf_module(model)

    def save(self, model, path: Path) -> None:
        model.save(str(path))


class BiEncoder(_SentenceTransformersModel):
    """SentenceTransformer with mean pooling; CosineSimilarityLoss (MSE of cosine vs label)."""

    name = "be"

    def build(self, base: str, params: StudentParams, device: str):
        from sentence_transformers import SentenceTransformer

        if params.arch == "static":  # a student's options (augsbert.models.compact)
            return static_student(base, params.static_dims, device)
        model = SentenceTransformer(base, device=device, config_kwargs=params.config_kwargs)
        if not is_static(model):  # a static model (a base trained before) has no sequence length to cut
            model.max_seq_length = params.max_length
        if params.init == "layers":
            reduce_layers(model, params.layers)
        return model

    def predict(self, model, pairs: Sequence[tuple[str, str]], batch_size: int, params: StudentParams) -> np.ndarray:
        return inference.cosine_scores(model, pairs, batch_size, show_progress=False)

    def load(self, path: Path, device: str):
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(path), device=device)


class CrossEncoderArch(_SentenceTransformersModel):
    """sentence-transformers CrossEncoder with one output; BCE-with-logits (reference) or MSE loss."""

    name = "ce"

    def build(self, base: str, params: TeacherParams, device: str):
        from sentence_transformers import CrossEncoder

        return CrossEncoder(base, num_labels=1, max_length=params.max_length, device=device,
                            activation_fn=ACTIVATIONS[params.activation](),
                            config_kwargs=params.config_kwargs)

    def predict(self, model, pairs, batch_size, params) -> np.ndarray:
        activation = ACTIVATIONS[params.activation]()
        with inference.autocast(model):  # on CUDA: fp16 and batches as large as memory holds; elsewhere as given
            pairs = list(pairs)
            scores = model.predict(pairs, batch_size=inference.batch_size(model, batch_size, pairs),
                                   activation_fn=activation, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64)

    def load(self, path: Path, device: str):
        from sentence_transformers import CrossEncoder

        return CrossEncoder(str(path), device=device)


class CrossBiEncoderArch:
    """The thesis' Cross-Bi-Encoder, trained with MSE by the Hugging Face Trainer."""

    name = "cbe"

    def build(self, base: str, params: TeacherParams, device: str):
        return CrossBiEncoder.from_base(base, params.max_length, params.config_kwargs).to(device)

    def encoder(self, model):
        return model.encoder

    def predict(self, model, pairs, batch_size, params) -> np.ndarray:
        with inference.autocast(model):  # as the Cross-Encoder's
            pairs = list(pairs)
            scores = model.predict(pairs, batch_size=inference.batch_size(model, batch_size, pairs))
        return scores.astype(np.float64)

    def save(self, model, path: Path) -> None:
        model.save(path)

    def load(self, path: Path, device: str):
        return CrossBiEncoder.load(path, device)


ARCHITECTURES = {"be": BiEncoder(), "ce": CrossEncoderArch(), "cbe": CrossBiEncoderArch()}
