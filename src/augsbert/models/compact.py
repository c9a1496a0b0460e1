"""Students that deploy (issue 51): a layer-reduced student, a Matryoshka student, a static-embedding student.

Each is the student's Bi-Encoder built differently (or trained under a wrapped loss); the trainer, the data and
the epoch selection stay those of every student (augsbert.training.pairs):

- `student.init: layers` -- the student starts from `layers` of the base's Transformer layers (the
  embeddings and the pooling kept), as sentence-transformers' layer-reduction distillation examples: k layers
  of n are the evenly spread `floor((i + 0.5) * n / k)`, i = 0..k-1 (`layer_indices`: 3 of MiniLM-L6's 6 ->
  1, 3, 5; 4 of 12 -> 1, 4, 7, 10, what the library's former examples/training/distillation/
  model_distillation.py kept of stsb-roberta-base's 12), or the indices given as a list. The current
  example (examples/sentence_transformer/training/distillation/model_distillation_layer_reduction.py) keeps
  every third layer from 0 (0, 3, ..., 21 of mxbai-embed-large-v1's 24), where this rule keeps 1, 4, ..., 22;
- `student.matryoshka_dims` -- sentence-transformers' MatryoshkaLoss around the student loss (each listed
  prefix of the embedding trained with it, equal weights); the test split is scored at every dimension
  (`models.inference.scores_by_dim`: the first d components, re-normalised, cosine);
- `student.arch: static` -- a StaticEmbedding (one vector per token, mean-pooled) made by model2vec's
  distillation of the base (`StaticEmbedding.from_distillation`: every vocabulary token through the base,
  PCA to `static_dims`, SIF weighting), offline on a local model, then trained on the student's pairs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)


def layer_indices(total: int, keep: int | Sequence[int]) -> list[int]:
    """The indices of the Transformer layers a `keep`-layer student keeps of `total` (see the module)."""
    if isinstance(keep, int):
        if not 1 <= keep <= total:
            raise ValueError(f"student.layers {keep}: the base model has {total} layers (1..{total})")
        return [math.floor((i + 0.5) * total / keep) for i in range(keep)]
    chosen = list(keep)
    if not chosen or sorted(set(chosen)) != chosen or chosen[0] < 0 or chosen[-1] >= total:
        raise ValueError(f"student.layers {chosen}: distinct ascending layer indices in 0..{total - 1} "
                         f"(the base model has {total} layers)")
    return chosen


def _layer_list(hf_model):
    """(the ModuleList of a Hugging Face encoder's Transformer layers, the config key counting them)."""
    base = getattr(hf_model, "base_model", hf_model)
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
        module = base
        for part in path.split("."):
            module = getattr(module, part, None)
        if module is not None and hasattr(module, "__len__"):
            return module
    raise ValueError(f"student.init layers: cannot find the Transformer layers of {type(hf_model).__name__} "
                     "(BERT / RoBERTa / MPNet: encoder.layer; DistilBERT: transformer.layer)")


def reduce_layers(model, keep: int | Sequence[int]) -> list[int]:
    """Keep only layers `keep` (a count or indices) of the SentenceTransformer `model`'s Transformer, in place;
    returns the kept indices (of the base)."""
    import torch

    hf_model = model[0].auto_model
    layers = _layer_list(hf_model)
    kept = layer_indices(len(layers), keep)
    new = torch.nn.ModuleList([layers[i] for i in kept])
    parent = getattr(hf_model, "base_model", hf_model)
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
        *owner_path, name = path.split(".")
        owner = parent
        for part in owner_path:
            owner = getattr(owner, part, None)
        if owner is not None and getattr(owner, name, None) is layers:
            setattr(owner, name, new)
            break
    hf_model.config.num_hidden_layers = len(kept)  # saved with the model: it loads with these layers
    for i, layer in enumerate(new):  # attention layers that know their index (caches) get their new one
        for module in layer.modules():
            if hasattr(module, "layer_idx"):
                module.layer_idx = i
    log.info("student.init layers: kept layers %s of %d", kept, len(layers))
    return kept


def static_student(base: str, dims: int | None, device: str):
    """A SentenceTransformer of one StaticEmbedding distilled from the local model `base` by model2vec."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    try:
        import model2vec.distill  # noqa: F401  (the library's own check says less)
    except ImportError as err:
        raise ImportError(f"student.arch static needs model2vec ({err}); install augsbert's `deploy` extra: "
                          "pip install -e '.[deploy]'") from None
    if is_static_folder(base):  # a static start made before (pre-trained: pretrain_static), trained as it is
        return SentenceTransformer(str(base), device=device)
    embedding = StaticEmbedding.from_distillation(base, device=device, pca_dims=dims)
    log.info("student.arch static: model2vec distillation of %s -> %d tokens x %d dims", base,
             embedding.embedding.weight.shape[0], embedding.embedding.weight.shape[1])
    return SentenceTransformer(modules=[embedding], device=device)


def is_static_folder(path) -> bool:
    """Whether `path` is a saved SentenceTransformer whose first module is a StaticEmbedding."""
    import json
    from pathlib import Path

    modules = Path(str(path)) / "modules.json"
    try:
        first = json.loads(modules.read_text(encoding="utf-8"))[0]
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return False
    return isinstance(first, dict) and str(first.get("type", "")).endswith("StaticEmbedding")


# Pre-training of the static table (`student.static_pretrain`): tokenlearn's optimiser settings (its
# pretrain.train_supervised: AdamW at 1e-3, batches of 256, a tenth of the texts (at most 10,000) held out,
# early stopping after 5 epochs without a lower validation loss, the best epoch kept)
PRETRAIN_LR, PRETRAIN_BATCH, PRETRAIN_PATIENCE, PRETRAIN_MAX_EPOCHS, PRETRAIN_MAX_HELD_OUT = 1e-3, 256, 5, 100, 10_000


def pca_targets(vectors, dims: int, seed: int):
    """The embedder's vectors reduced by PCA to the static table's dimensions (tokenlearn's targets)."""
    from sklearn.decomposition import PCA

    vectors = np.asarray(vectors, dtype=np.float64)
    dims = min(dims, vectors.shape[1], vectors.shape[0])
    return PCA(n_components=dims, random_state=seed).fit_transform(vectors).astype(np.float32)


def pretrain_static(model, texts: Sequence[str], targets, seed: int) -> dict:
    """Pre-train a static model's token table in place on `targets` (one vector per text; tokenlearn's "featurize
    then train"): the model's mean-pooled embedding of each text, through a linear head (dropped afterwards, as
    tokenlearn's), regresses the text's target by mean squared error; tokenlearn's settings above, no weight
    decay. Returns the record: texts, held out, epochs run, the best epoch and its validation loss, and the
    validation loss before training."""
    import torch

    static = model[0]
    table = static.embedding.weight
    targets = torch.as_tensor(np.asarray(targets, dtype=np.float32))
    if len(texts) != len(targets) or len(texts) < 2:
        raise ValueError(f"static pre-training needs one target per text and two texts at least ({len(texts)} texts, "
                         f"{len(targets)} targets)")
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    order = torch.randperm(len(texts), generator=generator).tolist()
    held = max(1, min(PRETRAIN_MAX_HELD_OUT, len(texts) // 10))
    train_ids, val_ids = order[held:], order[:held]
    head = torch.nn.Linear(table.shape[1], targets.shape[1]).to(table.device)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=PRETRAIN_LR, weight_decay=0.0)

    def loss_of(ids: list[int]):
        features = model.preprocess([texts[i] for i in ids])
        features = {k: v.to(table.device) if hasattr(v, "to") else v for k, v in features.items()}
        predicted = head(model(features)["sentence_embedding"])
        return torch.nn.functional.mse_loss(predicted, targets[ids].to(table.device))

    def validation() -> float:
        with torch.no_grad():
            losses = [loss_of(val_ids[i:i + PRETRAIN_BATCH]).item() * len(val_ids[i:i + PRETRAIN_BATCH])
                      for i in range(0, len(val_ids), PRETRAIN_BATCH)]
        return float(sum(losses) / len(val_ids))

    before = best = validation()
    best_state, best_epoch, waited, epoch = table.detach().clone(), 0, 0, 0
    for epoch in range(1, PRETRAIN_MAX_EPOCHS + 1):
        shuffled = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator).tolist()]
        for start in range(0, len(shuffled), PRETRAIN_BATCH):
            optimizer.zero_grad()
            loss_of(shuffled[start:start + PRETRAIN_BATCH]).backward()
            optimizer.step()
        current = validation()
        if current < best:
            best, best_state, best_epoch, waited = current, table.detach().clone(), epoch, 0
        else:
            waited += 1
            if waited >= PRETRAIN_PATIENCE:
                break
    with torch.no_grad():
        table.copy_(best_state)
    log.info("student.static_pretrain: %d texts (%d held out), best epoch %d of %d, validation MSE %.5f -> %.5f",
             len(texts), held, best_epoch, epoch, before, best)
    return {"texts": len(texts), "held_out": held, "epochs": epoch, "best_epoch": best_epoch,
            "validation_mse_before": round(before, 6), "validation_mse": round(best, 6)}


def is_static(model) -> bool:
    """Whether a SentenceTransformer is a static-embedding model (no Hugging Face tokenizer or encoder)."""
    from sentence_transformers.models import StaticEmbedding

    try:
        return isinstance(model[0], StaticEmbedding)
    except (TypeError, IndexError, KeyError):  # not a module sequence (a CrossBiEncoder)
        return False


def matryoshka_loss(model, loss, dims: Sequence[int]):
    """sentence-transformers' MatryoshkaLoss around `loss`, over `dims` (largest first), equal weights."""
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss

    size = model.get_embedding_dimension()
    too_large = [d for d in dims if d > size]
    if too_large:
        raise ValueError(f"student.matryoshka_dims {list(dims)}: {too_large[0]} is more than the student's "
                         f"{size} dimensions")
    return MatryoshkaLoss(model, loss, matryoshka_dims=sorted(dims, reverse=True))
