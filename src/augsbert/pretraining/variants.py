"""Park et al. (seed 001, section 4) variants of unsupervised SimCSE, chosen by `pretrain.simcse_variant`.

Every variant keeps SimCSE's core: the anchor is the sentence's first dropout
pass h_i, logits_ij = scale * cos(h_i, h'_j) over the batch's positives h'_j
(one direction, as `MultipleNegativesRankingLoss`), target i. What changes:

| variant | seed 001 | class |
| --- | --- | --- |
| `gni`, `gaussian_dropout`, `bernoulli`, `feature_bernoulli`, `fgsm` | §4.1.2, Tab. 3 | InputNoiseSimCSELoss |
| `output_gaussian`, `output_bernoulli`, `output_mask_trivial`, `output_mask_significant`, `output_fgsm` | §4.1.1, Tab. 2 | OutputAugmentedSimCSELoss |
| `label_smoothing` | §4.2, Tab. 4 | LabelSmoothingSimCSELoss |
| `sam`, `awp` | §4.2, Tab. 4 | WeightPerturbation (a trainer hook) + plain SimCSE |
| `awp+gni`, `awp+fgsm` | §4.2, Tab. 4 | WeightPerturbation + InputNoiseSimCSELoss |
| `memory_bank` | §4.3, Tab. 5 | MemoryBankSimCSELoss |
| `gaussian_negatives`, `cov_filtering`, `anchor_noise_negatives` | §4.3, Tab. 5 | GaussianNegativesSimCSELoss |
| `gmm` | §4.3, Tab. 5 | GMMNegativesSimCSELoss |
| `vae` | §4.3, Tab. 5 | VAENegativesSimCSELoss (GaussianVAE, Kingma & Welling 2014) |

Random draws come from the global torch RNG in training (the trainer
checkpoints it) and from a generator fixed by the batch in eval mode, so the
held-out losses of different checkpoints compare (as ConSERTLoss does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..stages.pretrain import PretrainParams

PARK_CITATION = """
@mastersthesis{park2023data,
    title={Data Augmentation, Stabilization and Negative Sample Generation Methods for Improving Sentence Embeddings of SimCSE},
    author={Park, Jinwoo},
    school={Seoul National University},
    year={2023}
}
"""

VAE_CITATION = """
@inproceedings{kingma2014autoencoding,
    title={Auto-Encoding Variational Bayes},
    author={Kingma, Diederik P. and Welling, Max},
    booktitle={International Conference on Learning Representations},
    year={2014}
}
"""


def simcse_logits(anchors: Tensor, positives: Tensor, scale: float, extra: Tensor | None = None) -> Tensor:
    """N x (N + K) logits: scale * cos(anchor_i, [positives; extra]_j); `extra` = K additional negatives."""
    candidates = positives if extra is None or len(extra) == 0 else torch.cat([positives, extra.to(positives.dtype)])
    return scale * nn.functional.normalize(anchors, dim=-1) @ nn.functional.normalize(candidates, dim=-1).T


def _targets(logits: Tensor) -> Tensor:
    return torch.arange(len(logits), device=logits.device)


def _normal(shape, like: Tensor, generator: torch.Generator | None) -> Tensor:
    """N(0, 1) of `shape` on `like`'s device; a CPU `generator` (eval mode) draws on the CPU first."""
    if generator is None:
        return torch.randn(shape, device=like.device, dtype=like.dtype)
    return torch.randn(shape, generator=generator, dtype=like.dtype).to(like.device)


def _uniform(shape, like: Tensor, generator: torch.Generator | None) -> Tensor:
    if generator is None:
        return torch.rand(shape, device=like.device, dtype=like.dtype)
    return torch.rand(shape, generator=generator, dtype=like.dtype).to(like.device)


# ---- input-embedding noise (§4.1.2): applied to the word-embedding matrix, before positions are added
def gaussian_noise(e: Tensor, sigma: float, generator=None) -> Tensor:
    """GNI: e + N(0, σ²) elementwise (seed 001: σ 0.001)."""
    return e + sigma * _normal(e.shape, e, generator)


def gaussian_dropout(e: Tensor, sigma: float, generator=None) -> Tensor:
    """Gaussian dropout (Srivastava et al. 2014): e ⊙ N(1, σ²) elementwise (seed 001: σ 0.001)."""
    return e * (1.0 + sigma * _normal(e.shape, e, generator))


def bernoulli_dropout(e: Tensor, rate: float, generator=None) -> Tensor:
    """Element dropout at `rate`, rescaled by 1/(1 - rate) as conventional (inverted) dropout is."""
    return e * (_uniform(e.shape, e, generator) >= rate).to(e.dtype) / (1.0 - rate)


def feature_dropout(e: Tensor, rate: float, generator=None) -> Tensor:
    """Whole embedding dimensions dropped at `rate`, per sentence and at every position (rescaled as dropout)."""
    keep = (_uniform((e.shape[0], 1, e.shape[-1]), e, generator) >= rate).to(e.dtype)
    return e * keep / (1.0 - rate)


def fgsm(gradient: Tensor, epsilon: float) -> Tensor:
    """FGSM (Goodfellow et al. 2015): δ = ε · sign(∇L), the first-order loss ascent within ‖δ‖∞ ≤ ε."""
    return epsilon * gradient.sign()


INPUT_NOISE = {"gni": gaussian_noise, "gaussian_dropout": gaussian_dropout, "bernoulli": bernoulli_dropout,
               "feature_bernoulli": feature_dropout}


class _SimCSE(nn.Module):
    """Shared parts: the encoder call, eval-mode generators, the config dict, the citation."""

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__()
        self.model, self.scale = model, scale

    def generator(self, features: dict[str, Tensor], salt: int = 0) -> torch.Generator | None:
        """None in training (global RNG); in eval a generator fixed by the batch's ids."""
        if self.model.training:
            return None
        ids = features["input_ids"]
        return torch.Generator().manual_seed(int(ids.sum()) + ids.numel() + salt)

    def embed(self, features: dict[str, Tensor]) -> Tensor:
        return self.model(features)["sentence_embedding"]

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    @property
    def citation(self) -> str:
        return PARK_CITATION


class InputNoiseSimCSELoss(_SimCSE):
    """SimCSE with noise on the input word embeddings (seed 001, 4.1.2; Table 3).

    The noise acts on the output of the encoder's word-embedding layer, before
    position and token-type embeddings are added and before BERT's embedding
    dropout (seed 001, 7.1: "the original BERT's dropout is applied after the
    summation"). `gni` e + N(0, σ²); `gaussian_dropout` e ⊙ N(1, σ²);
    `bernoulli` element dropout at `rate`; `feature_bernoulli` whole
    dimensions dropped at `rate`; `fgsm` e + ε · sign(∇_e L): the gradient of
    the SimCSE loss with respect to the positive view's word embeddings, from
    an extra pass whose anchors are detached; the loss is then computed with
    the perturbed positive. The encoder's dropout stays on (the noise is on
    top of SimCSE's two dropout views). `views`: `positive` (the second pass
    only; seed 001 augments "the anchor to generate positive samples") or
    `both` (random noises only; FGSM perturbs the positive).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, noise: str, scale: float = 20.0, sigma: float = 0.001, rate: float = 0.1,
                 epsilon: float = 0.001, views: str = "positive") -> None:
        super().__init__(model, scale)
        if noise not in (*INPUT_NOISE, "fgsm"):
            raise ValueError(f"unknown input noise {noise!r}")
        self.noise, self.sigma, self.rate, self.epsilon, self.views = noise, sigma, rate, epsilon, views
        self.cross_entropy = nn.CrossEntropyLoss()
        self._transform: Callable[[Tensor], Tensor] | None = None
        model[0].auto_model.get_input_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        return output if self._transform is None else self._transform(output)

    def embed_with(self, features: dict[str, Tensor], transform: Callable[[Tensor], Tensor] | None) -> Tensor:
        """Sentence embeddings with `transform` applied to the word embeddings of this pass only."""
        self._transform = transform
        try:
            return self.embed(features)
        finally:
            self._transform = None

    def random_noise(self, features: dict[str, Tensor], salt: int) -> Callable[[Tensor], Tensor]:
        function, generator = INPUT_NOISE[self.noise], self.generator(features, salt)
        amount = self.rate if self.noise in ("bernoulli", "feature_bernoulli") else self.sigma
        return lambda e: function(e, amount, generator)

    def fgsm_delta(self, anchors: Tensor, features: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(δ = ε · sign(g), g) with g = ∇ of the SimCSE loss w.r.t. the positive view's word embeddings."""
        seen = {}

        def leaf(e: Tensor) -> Tensor:
            seen["e"] = e.detach().requires_grad_()
            return seen["e"]

        with torch.enable_grad():  # also in evaluation, which runs under no_grad
            positives = self.embed_with(features, leaf)
            logits = simcse_logits(anchors.detach(), positives, self.scale)
            (gradient,) = torch.autograd.grad(self.cross_entropy(logits, _targets(logits)), seen["e"])
        return fgsm(gradient, self.epsilon), gradient

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        if self.noise == "fgsm":
            anchors = self.embed(first)
            delta, _ = self.fgsm_delta(anchors, second)
            positives = self.embed_with(second, lambda e: e + delta)
        else:
            anchors = self.embed_with(first, self.random_noise(first, 1) if self.views == "both" else None)
            positives = self.embed_with(second, self.random_noise(second, 2))
        logits = simcse_logits(anchors, positives, self.scale)
        return self.cross_entropy(logits, _targets(logits))

    def get_config_dict(self) -> dict[str, Any]:
        return {"noise": self.noise, "sigma": self.sigma, "rate": self.rate, "epsilon": self.epsilon,
                "views": self.views, "scale": self.scale}


# ---- output augmentation instead of the second pass (§4.1.1)
def magnitude_mask(h: Tensor, rate: float, largest: bool) -> Tensor:
    """h with the round(rate · d) dimensions of smallest (or largest) |h| zeroed, per sentence."""
    k = max(1, round(rate * h.shape[-1]))
    chosen = h.abs().topk(k, dim=-1, largest=largest).indices
    return h.scatter(-1, chosen, 0.0)


class OutputAugmentedSimCSELoss(_SimCSE):
    """SimCSE whose positive is made from the anchor's encoder output, not a second pass (seed 001, 4.1.1; Table 2).

    One encoder pass h (dropout on); h' = aug(h), gradients flow through both.
    `output_gaussian`: h + N(0, σ_d²) with σ_d the batch's standard deviation
    of dimension d (detached: the noise is a sample); `output_bernoulli`: h ⊙
    Bernoulli mask at `rate` (no rescaling: the cosine ignores it);
    `output_mask_trivial` / `output_mask_significant`: zero the `rate` (10 %)
    of dimensions with the smallest / largest |h|; `output_fgsm`: h + ε ·
    sign(∇_{h'} L) at h' = h.

    Inputs: (anchor, positive) columns holding the same text; only the first is encoded. No labels.
    """

    KINDS = ("output_gaussian", "output_bernoulli", "output_mask_trivial", "output_mask_significant", "output_fgsm")

    def __init__(self, model, kind: str, scale: float = 20.0, rate: float = 0.1, epsilon: float = 0.001) -> None:
        super().__init__(model, scale)
        if kind not in self.KINDS:
            raise ValueError(f"unknown output augmentation {kind!r}")
        self.kind, self.rate, self.epsilon = kind, rate, epsilon
        self.cross_entropy = nn.CrossEntropyLoss()

    def augment(self, h: Tensor, generator=None) -> Tensor:
        if self.kind == "output_gaussian":
            sigma = h.detach().std(dim=0, correction=1 if len(h) > 1 else 0)
            return h + sigma * _normal(h.shape, h, generator)
        if self.kind == "output_bernoulli":
            return h * (_uniform(h.shape, h, generator) >= self.rate).to(h.dtype)
        if self.kind in ("output_mask_trivial", "output_mask_significant"):
            return magnitude_mask(h, self.rate, largest=self.kind == "output_mask_significant")
        with torch.enable_grad():
            point = h.detach().requires_grad_()
            logits = simcse_logits(h.detach(), point, self.scale)
            (gradient,) = torch.autograd.grad(self.cross_entropy(logits, _targets(logits)), point)
        return h + fgsm(gradient, self.epsilon)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first = list(sentence_features)[0]
        anchors = self.embed(first)
        logits = simcse_logits(anchors, self.augment(anchors, self.generator(first)), self.scale)
        return self.cross_entropy(logits, _targets(logits))

    def get_config_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rate": self.rate, "epsilon": self.epsilon, "scale": self.scale}


# ---- stability (§4.2)
class LabelSmoothingSimCSELoss(_SimCSE):
    """SimCSE with label-smoothed cross-entropy (Szegedy et al. 2016; seed 001, 4.2: smoothing 0.1).

    Target distribution (1 - s) · onehot(i) + s / N over the N in-batch
    candidates, i.e. torch's `cross_entropy(label_smoothing=s)`.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, scale: float = 20.0, smoothing: float = 0.1) -> None:
        super().__init__(model, scale)
        self.smoothing = smoothing

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        logits = simcse_logits(self.embed(first), self.embed(second), self.scale)
        return nn.functional.cross_entropy(logits, _targets(logits), label_smoothing=self.smoothing)

    def get_config_dict(self) -> dict[str, Any]:
        return {"smoothing": self.smoothing, "scale": self.scale}


class WeightPerturbation:
    """SAM (Foret et al. 2021) or AWP (Wu et al. 2020): the gradient is taken at perturbed weights w + v.

    One optimizer step = two forward/backward passes on the same batch: the
    gradient g at w gives v; the gradient at w + v is the one the optimizer
    applies, to the original w (restored bit-exactly from a copy).
    `sam`: v = ρ g / ‖g‖₂ over all parameters (seed 001: ρ 0.05). `awp`:
    layer-wise v_l = γ ‖w_l‖ g_l / ‖g_l‖ on the weight matrices only (biases
    and LayerNorm gains are not perturbed, as in Wu et al.'s code); one
    ascent step (seed 001 does not state AWP's steps or γ).
    """

    def __init__(self, kind: str, radius: float) -> None:
        if kind not in ("sam", "awp"):
            raise ValueError(f"unknown weight perturbation {kind!r}")
        self.kind, self.radius = kind, radius

    def perturbation(self, params: list[nn.Parameter]) -> list[tuple[nn.Parameter, Tensor]]:
        """(parameter, v) for every perturbed parameter, from the gradients in `.grad`."""
        with torch.no_grad():
            graded = [p for p in params if p.grad is not None]
            if self.kind == "sam":
                norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in graded]))
                return [(p, self.radius * p.grad / (norm + 1e-12)) for p in graded]
            return [(p, self.radius * torch.linalg.vector_norm(p) * p.grad / (torch.linalg.vector_norm(p.grad) + 1e-12))
                    for p in graded if p.dim() > 1]

    def step(self, params: Iterable[nn.Parameter], closure: Callable[[], Tensor]) -> Tensor:
        """Run `closure` (forward + backward) at w and at w + v; `.grad` ends as the gradient at w + v.

        Gradients already accumulated (gradient accumulation) are kept and added to.
        Returns the first pass's loss (the loss at w, for logging).
        """
        params = [p for p in params if p.requires_grad]
        stash = [p.grad for p in params]
        for p in params:
            p.grad = None
        loss = closure()
        moves = self.perturbation(params)
        originals = [p.detach().clone() for p, _ in moves]
        with torch.no_grad():
            for p, v in moves:
                p.add_(v)
        for p in params:
            p.grad = None
        try:
            closure()
        finally:
            with torch.no_grad():
                for (p, _), original in zip(moves, originals):
                    p.copy_(original)
        for p, earlier in zip(params, stash):
            if earlier is not None:
                p.grad = earlier if p.grad is None else p.grad + earlier
        return loss


# ---- additional negatives (§4.3)
class _ExtraNegatives(_SimCSE):
    """SimCSE whose denominator also holds K extra negatives: N x (N + K) logits, no gradient into them."""

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__(model, scale)
        self.cross_entropy = nn.CrossEntropyLoss()

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor | None:
        """The K extra negatives of this batch; each subclass draws its own (none here: plain SimCSE)."""
        return None

    def loss_from_embeddings(self, anchors: Tensor, positives: Tensor, extra: Tensor | None) -> Tensor:
        logits = simcse_logits(anchors, positives, self.scale, None if extra is None else extra.detach())
        return self.cross_entropy(logits, _targets(logits))

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        anchors, positives = self.embed(first), self.embed(second)
        return self.loss_from_embeddings(anchors, positives, self.extra(anchors, positives, first))


def _push(buffer: Tensor, filled: Tensor, rows: Tensor) -> None:
    """Queue `rows` (detached) into `buffer` in place, oldest first out; `filled` counts the valid rows at its end."""
    capacity = len(buffer)
    rows = rows.detach().to(buffer.dtype)[-capacity:]
    buffer.copy_(torch.cat([buffer[len(rows):], rows]))
    filled.fill_(min(int(filled) + len(rows), capacity))


class MemoryBankSimCSELoss(_ExtraNegatives):
    """SimCSE + a memory bank of the previous step's positives as negatives (seed 001, 4.3; Table 5).

    A queue of `size` (= the batch size, seed 001) detached positive
    embeddings h' from the previous training step(s), appended to the
    denominator; it is updated after the loss of a step is computed, so step t
    sees the outputs of step t-1 (no momentum encoder: seed 001 wants "the
    impact of representation of the past"). The queue is a buffer of the loss:
    checkpoints save it and a resumed run continues with it. In eval mode the
    bank is neither used nor updated: a held-out loss with a bank filled by
    training would not compare with one of an untrained model.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, size: int, scale: float = 20.0) -> None:
        super().__init__(model, scale)
        dim = model.get_embedding_dimension()
        self.register_buffer("bank", torch.zeros(size, dim, device=model.device))
        self.register_buffer("bank_filled", torch.zeros((), dtype=torch.long, device=model.device))

    def entries(self) -> Tensor:
        return self.bank[len(self.bank) - int(self.bank_filled):]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        anchors, positives = self.embed(first), self.embed(second)
        if not self.model.training:
            return self.loss_from_embeddings(anchors, positives, None)
        loss = self.loss_from_embeddings(anchors, positives, self.entries().clone())
        _push(self.bank, self.bank_filled, positives)
        return loss

    def get_config_dict(self) -> dict[str, Any]:
        return {"size": len(self.bank), "scale": self.scale}


class GaussianNegativesSimCSELoss(_ExtraNegatives):
    """SimCSE + K sampled negatives fitted to the batch's anchors (seed 001, 4.3; Tables 5, 7; Figure 10).

    `gaussian_negatives`: K draws from N(μ_z, diag σ_z²), μ_z and σ_z the
    per-dimension mean and standard deviation of the batch's anchor embeddings
    (Table 7: the scale of the batch matters). `cov_filtering`: draws from
    N(μ_z, Σ_z) with the batch's full covariance Σ_z, sampled as μ_z +
    Z_cᵀ ε / √(N-1) (Z_c the centred anchors, ε ~ N(0, I_N)), which needs no
    factorisation of the rank-deficient Σ_z: our reading of "covariance matrix
    ... inner product with sampled noise" (`cov_sampling: gaussian`). The other
    reading, `cov_sampling: sigma_noise`, takes the words literally: μ_z + Σ_z ε,
    ε ~ N(0, I_d), the covariance matrix times white noise (covariance Σ_z², not
    Σ_z). `anchor_noise_negatives`: one
    negative per anchor, h_i + N(0, σ_z²) ("GNI to anchor encoder output").
    The statistics are detached and the samples carry no gradient.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    KINDS = ("gaussian_negatives", "cov_filtering", "anchor_noise_negatives")

    COV_SAMPLING = ("gaussian", "sigma_noise")

    def __init__(self, model, kind: str = "gaussian_negatives", count: int = 64, scale: float = 20.0,
                 cov_sampling: str = "gaussian") -> None:
        super().__init__(model, scale)
        if kind not in self.KINDS:
            raise ValueError(f"unknown negative sampling {kind!r}")
        if cov_sampling not in self.COV_SAMPLING:
            raise ValueError(f"unknown cov_sampling {cov_sampling!r}")
        self.kind, self.count, self.cov_sampling = kind, count, cov_sampling

    def sample(self, anchors: Tensor, generator=None) -> Tensor:
        z = anchors.detach()
        correction = 1 if len(z) > 1 else 0
        mu, sigma = z.mean(dim=0), z.std(dim=0, correction=correction)
        if self.kind == "anchor_noise_negatives":
            return z + sigma * _normal(z.shape, z, generator)
        if self.kind == "gaussian_negatives":
            return mu + sigma * _normal((self.count, z.shape[1]), z, generator)
        centred = (z - mu) / math.sqrt(max(len(z) - correction, 1))  # Σ_z = centredᵀ centred
        if self.cov_sampling == "sigma_noise":  # Σ_z ε without forming the d x d matrix
            return mu + (_normal((self.count, z.shape[1]), z, generator) @ centred.T) @ centred
        return mu + _normal((self.count, len(z)), z, generator) @ centred

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor:
        return self.sample(anchors, self.generator(features))

    def get_config_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "scale": self.scale, "cov_sampling": self.cov_sampling}


class GMMNegativesSimCSELoss(_ExtraNegatives):
    """SimCSE + K negatives sampled from a Gaussian mixture of past anchors (seed 001, 4.3; Table 5).

    Before each training step a `components`-component diagonal GMM
    (scikit-learn's GaussianMixture, EM from k-means++ centres) is fitted to
    the detached anchor embeddings of the previous `history` steps ("updated at
    each step using the encoder outputs from the previous steps"); K samples
    from it are extra negatives. The first step has no history and no extra
    negatives. The stored outputs are a buffer of the loss (checkpointed), and
    the mixture is refitted from them every step, so a resumed run draws the
    same negatives. In eval mode no negatives are drawn and nothing is stored
    (see MemoryBankSimCSELoss).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, count: int = 64, components: int = 4, history: int = 8, batch_size: int = 64,
                 scale: float = 20.0) -> None:
        super().__init__(model, scale)
        self.count, self.components = count, components
        dim = model.get_embedding_dimension()
        self.register_buffer("past", torch.zeros(history * batch_size, dim, device=model.device))
        self.register_buffer("past_filled", torch.zeros((), dtype=torch.long, device=model.device))

    def sample(self, like: Tensor) -> Tensor | None:
        from sklearn.mixture import GaussianMixture

        filled = int(self.past_filled)
        if filled < 2:
            return None
        data = self.past[len(self.past) - filled:].double().cpu().numpy()
        seed = int(torch.randint(0, 2**31 - 1, (1,)))  # from the global RNG, which the trainer checkpoints
        mixture = GaussianMixture(min(self.components, filled), covariance_type="diag", max_iter=20,
                                  random_state=seed).fit(data)
        samples, _ = mixture.sample(self.count)
        return torch.from_numpy(samples).to(like.device, like.dtype)

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor | None:
        if not self.model.training:
            return None
        samples = self.sample(anchors)
        _push(self.past, self.past_filled, anchors)
        return samples

    def get_config_dict(self) -> dict[str, Any]:
        return {"count": self.count, "components": self.components, "history_rows": len(self.past),
                "scale": self.scale}


class GaussianVAE(nn.Module):
    """A variational auto-encoder of d-dimensional vectors (Kingma & Welling 2014, App. C.2: Gaussian MLPs).

    Encoder q(z|x) = N(μ, diag σ²) with [μ, log σ²] linear in h = tanh(W x + b); decoder
    p(x|z) = N(μ', diag σ'²) with [μ', log σ'²] linear in h' = tanh(W' z + b'); prior p(z) = N(0, I).
    `negative_elbo` is the loss it is trained with: the per-row negative evidence lower bound with one
    reparameterised sample z = μ + σ ⊙ ε (their estimator B with L = 1),
    −log N(x; μ', σ'²) + KL(N(μ, σ²) ‖ N(0, I)), averaged over the rows.
    """

    def __init__(self, dim: int, hidden: int, latent: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.Tanh(), nn.Linear(hidden, 2 * dim))
        self.latent = latent

    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(μ, log σ²) of q(z|x)."""
        return self.encoder(x).chunk(2, dim=-1)

    def decode(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """(μ', log σ'²) of p(x|z)."""
        return self.decoder(z).chunk(2, dim=-1)

    def negative_elbo(self, x: Tensor, eps: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(loss, reconstruction, KL), each the mean over the rows of x; `eps` ~ N(0, I), one row per x row."""
        mu, logvar = self.encode(x)
        mean, logvar_x = self.decode(mu + torch.exp(0.5 * logvar) * eps)
        reconstruction = 0.5 * (math.log(2 * math.pi) + logvar_x + (x - mean) ** 2 * torch.exp(-logvar_x)).sum(-1)
        kl = -0.5 * (1 + logvar - mu ** 2 - torch.exp(logvar)).sum(-1)
        return (reconstruction + kl).mean(), reconstruction.mean(), kl.mean()


class VAENegativesSimCSELoss(_ExtraNegatives):
    """SimCSE + K negatives generated by a VAE of past anchors (seed 001, 4.3; Table 5 "VAE sampling").

    Park: "we trained a VAE from the stored encoder outputs from previous 8 steps. This model was used to
    yield additional negative sample similar to the anchor's encoder output." A `GaussianVAE` (Kingma &
    Welling 2014) of the embedding's width, `hidden` units and `latent` dimensions, is trained on a queue of
    the detached anchor embeddings of the previous `history` steps: before the loss of each training step it
    takes `updates` Adam steps (lr `lr`) on the negative ELBO of the whole queue, continuing from the VAE of
    the step before. Then K negatives are drawn without gradient: `posterior` (the default, our reading of
    "similar to the anchor's encoder output") passes the step's anchors through it, anchor i mod N for
    negative i: z ~ q(z | h_i), negative = the decoder's mean μ'(z); `prior`: z ~ N(0, I), negative = μ'(z).
    The logits are N x (N + K) as `simcse_logits` builds them; the anchors then join the queue. The first
    step has no queue and no extra negatives.

    No gradient reaches the encoder from the VAE: it learns from detached anchors, its samples are drawn
    under no_grad. Its parameters do not require grad outside its own update, so the trainer's optimizer
    (which takes the loss's parameters that do) leaves them to the VAE's Adam. The queue, the VAE and its
    Adam state are the loss's state (checkpointed; a resumed run continues with them). In eval mode no
    negatives are drawn and nothing is trained or stored (see MemoryBankSimCSELoss).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    SAMPLING = ("posterior", "prior")
    _ADAM = "vae_adam"  # state_dict prefix of the VAE optimizer's state

    def __init__(self, model, count: int = 64, history: int = 8, batch_size: int = 64, hidden: int = 500,
                 latent: int = 20, lr: float = 1e-3, updates: int = 1, sampling: str = "posterior",
                 scale: float = 20.0) -> None:
        super().__init__(model, scale)
        if sampling not in self.SAMPLING:
            raise ValueError(f"unknown VAE sampling {sampling!r}")
        self.count, self.updates, self.sampling = count, updates, sampling
        dim = model.get_embedding_dimension()
        self.register_buffer("past", torch.zeros(history * batch_size, dim, device=model.device))
        self.register_buffer("past_filled", torch.zeros((), dtype=torch.long, device=model.device))
        self.vae = GaussianVAE(dim, hidden, latent).to(model.device)
        self.vae.requires_grad_(False)
        self.vae_optimizer = torch.optim.Adam(self.vae.parameters(), lr=lr)

    def entries(self) -> Tensor:
        return self.past[len(self.past) - int(self.past_filled):]

    def train_vae(self) -> list[float]:
        """`updates` Adam steps on the queue's negative ELBO; returns the loss before each step."""
        data, params = self.entries().float(), list(self.vae.parameters())
        values = []
        with torch.enable_grad(), torch.autocast(data.device.type, enabled=False):
            self.vae.requires_grad_(True)
            try:
                for _ in range(self.updates):
                    loss, _, _ = self.vae.negative_elbo(data, torch.randn(len(data), self.vae.latent,
                                                                          device=data.device))
                    for p, grad in zip(params, torch.autograd.grad(loss, params)):
                        p.grad = grad
                    self.vae_optimizer.step()
                    values.append(float(loss.detach()))
            finally:
                for p in params:
                    p.grad = None
                self.vae.requires_grad_(False)
        return values

    @torch.no_grad()
    def sample(self, anchors: Tensor) -> Tensor:
        """K negatives from the VAE as it is (no training), in the anchors' dtype."""
        with torch.autocast(anchors.device.type, enabled=False):
            if self.sampling == "prior":
                z = torch.randn(self.count, self.vae.latent, device=anchors.device)
            else:
                rows = torch.arange(self.count, device=anchors.device) % len(anchors)
                mu, logvar = self.vae.encode(anchors.detach().float()[rows])
                z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
            mean, _ = self.vae.decode(z)
        return mean.to(anchors.dtype)

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor | None:
        if not self.model.training:
            return None
        samples = None
        if int(self.past_filled) > 0:
            self.train_vae()
            samples = self.sample(anchors)
        _push(self.past, self.past_filled, anchors)
        return samples

    # the VAE's Adam state joins the loss's state_dict (the trainer checkpoints that), one tensor per entry
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for i, p in enumerate(self.vae.parameters()):
            for name, value in self.vae_optimizer.state.get(p, {}).items():
                destination[f"{prefix}{self._ADAM}.{i}.{name}"] = value if keep_vars else value.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        own = f"{prefix}{self._ADAM}."
        params = list(self.vae.parameters())
        for key in [k for k in state_dict if k.startswith(own)]:
            index, name = key[len(own):].split(".", 1)
            value = state_dict.pop(key)
            param = params[int(index)]
            # Adam keeps `step` on the CPU (non-capturable); its moments live with the parameter
            self.vae_optimizer.state[param][name] = value.clone().to("cpu" if name == "step" else param.device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def get_config_dict(self) -> dict[str, Any]:
        return {"count": self.count, "history_rows": len(self.past), "hidden": self.vae.decoder[0].out_features,
                "latent": self.vae.latent, "lr": self.vae_optimizer.defaults["lr"], "updates": self.updates,
                "sampling": self.sampling, "scale": self.scale}

    @property
    def citation(self) -> str:
        return PARK_CITATION + VAE_CITATION


# ---- which loss and trainer hook a `pretrain.simcse_variant` means
WEIGHT_PERTURBED = {"sam": "sam", "awp": "awp", "awp+gni": "awp", "awp+fgsm": "awp"}


def variant_loss(model, params: PretrainParams, scale: float):
    """The loss of `simcse` with `params.simcse_variant` (SAM / AWP add a trainer hook, `weight_perturbation`)."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    variant = params.simcse_variant
    noise = variant.split("+")[-1]  # awp+gni -> gni
    if variant in ("none", "sam", "awp"):
        return MultipleNegativesRankingLoss(model, scale=scale)
    if noise in (*INPUT_NOISE, "fgsm"):
        return InputNoiseSimCSELoss(model, noise, scale, sigma=params.noise_sigma,
                                    rate=params.noise_rate, epsilon=params.fgsm_epsilon,
                                    views=params.noise_views)
    if variant in OutputAugmentedSimCSELoss.KINDS:
        return OutputAugmentedSimCSELoss(model, variant, scale, rate=params.noise_rate,
                                         epsilon=params.fgsm_epsilon)
    if variant == "label_smoothing":
        return LabelSmoothingSimCSELoss(model, scale, params.label_smoothing)
    count = params.extra_negatives or params.batch_size
    if variant == "memory_bank":
        return MemoryBankSimCSELoss(model, params.batch_size, scale)
    if variant in GaussianNegativesSimCSELoss.KINDS:
        return GaussianNegativesSimCSELoss(model, variant, count, scale, params.cov_sampling)
    if variant == "gmm":
        return GMMNegativesSimCSELoss(model, count, params.gmm_components, params.gmm_history,
                                      params.batch_size, scale)
    if variant == "vae":
        return VAENegativesSimCSELoss(model, count, params.vae_history, params.batch_size, params.vae_hidden,
                                      params.vae_latent, params.vae_lr, params.vae_updates, params.vae_sampling,
                                      scale)
    raise ValueError(f"unknown pretrain.simcse_variant {variant!r}")


def weight_perturbation(params: PretrainParams) -> WeightPerturbation | None:
    """The SAM / AWP trainer hook of `params.simcse_variant`, or None."""
    kind = WEIGHT_PERTURBED.get(getattr(params, "simcse_variant", "none"))  # an option of simcse only
    if kind is None:
        return None
    return WeightPerturbation(kind, params.sam_rho if kind == "sam" else params.awp_gamma)
