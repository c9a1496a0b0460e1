"""Seed 001 (Park) SimCSE variants: the properties of ../shared/spec/unsupervised.md section 3 ("Park").

Noise statistics on large tensors (GNI residual std σ, Gaussian dropout mean 1 / std σ), FGSM's
‖δ‖∞ = ε along the gradient's sign, the N x (N + K) logits of the sampled negatives (no gradient,
a higher loss), the memory bank's detached step t-1 entries, label smoothing against a manual
computation, SAM / AWP restoring the weights bit-exactly and equal to plain SimCSE at ρ = γ = 0,
the VAE's negative ELBO against its closed form and torch.distributions, its negatives without a
gradient path into the encoder, its state resumed exactly, and one tiny training run per group
that lowers the held-out loss.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_pretraining import SENTENCES, Fixed

from augsbert.stages.pretrain import PretrainParams
from augsbert.objectives import SIMCSE_VARIANT_KEYS, SIMCSE_VARIANTS, build_loss, resolved
from augsbert.training.pretrain import build_encoder, fit, held_out_loss, loss_extra_state
from augsbert.losses.gaussian_negatives_simcse import GaussianNegativesSimCSELoss
from augsbert.losses.gmm_negatives_simcse import GMMNegativesSimCSELoss
from augsbert.losses.input_noise_simcse import bernoulli_dropout, feature_dropout, gaussian_dropout, gaussian_noise
from augsbert.losses.label_smoothing_simcse import LabelSmoothingSimCSELoss
from augsbert.losses.memory_bank_simcse import MemoryBankSimCSELoss
from augsbert.losses.output_augmented_simcse import OutputAugmentedSimCSELoss, magnitude_mask
from augsbert.losses.simcse_variant_base import simcse_logits
from augsbert.losses.vae_negatives_simcse import GaussianVAE, VAENegativesSimCSELoss
from augsbert.training.weight_perturbation import WeightPerturbation

VARIANT_DEFAULTS = {"simcse_variant": "none", "noise_sigma": 0.001, "noise_rate": 0.1, "noise_views": "positive",
                    "fgsm_epsilon": 0.001, "label_smoothing": 0.1, "sam_rho": 0.05, "awp_gamma": 0.005,
                    "extra_negatives": None, "gmm_components": 4, "gmm_history": 8, "vae_history": 8,
                    "vae_hidden": 500, "vae_latent": 20, "vae_lr": 1e-3, "vae_updates": 1, "vae_sampling": "posterior"}


def resolved_for(variant: str, **override) -> dict:
    """The planner's `pretrain` options of `variant` (objectives.resolved), as a spec holds them."""
    options = {"objective": "simcse", "preset": "thesis", "pooling": "cls", "batch_size": 8, "max_steps": 4,
               "lr": 3e-4, "warmup_ratio": 0.0, "weight_decay": 0.0, "scheduler": "constant", "max_length": 24,
               "temperature": 0.05, "eval_steps": 4, "selection": "last", "group_by_length": None, "megabatch": 50,
               "seed": 3, **VARIANT_DEFAULTS, "simcse_variant": variant}
    options.update(override)
    return resolved(options)


def params_for(variant: str, **override) -> PretrainParams:
    """The job's view of a planned pretrain spec: what the plan adds (model, corpus options) around them."""
    return PretrainParams.from_json({"model": "tiny", "exclude_eval_sentences": True, "held_out": 0.1,
                                     **resolved_for(variant, **override)})


class FixedDim(Fixed):
    """`Fixed` (embeddings carried in the features) with the dimension and device a stateful loss asks for."""

    device = torch.device("cpu")

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def get_embedding_dimension(self) -> int:
        return self.dim


def plain_ce(anchors, positives, extra=None, scale=20.0):
    logits = simcse_logits(anchors, positives, scale, extra)
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(anchors))), logits


@pytest.fixture(scope="module")
def encoder(tiny_model):
    # the random tiny BERT: the tests below compare the model with itself (noise statistics, gradients, restored
    # weights); the one that changes its weights restores them
    return build_encoder(tiny_model, "cls", 24, "cpu")


def batch(model, n=6):
    feats = {k: v for k, v in model.tokenize(SENTENCES[:n]).items() if isinstance(v, torch.Tensor)}
    return [feats, {k: v.clone() for k, v in feats.items()}]


# ---- options: inert ones are pruned, so they do not change the artifact key
def test_resolved_keeps_only_the_variants_own_options():
    assert not set(SIMCSE_VARIANT_KEYS) & set(resolved_for("none"))
    assert set(SIMCSE_VARIANT_KEYS) & set(resolved_for("gni")) == {"simcse_variant", "noise_sigma", "noise_views"}
    assert set(SIMCSE_VARIANT_KEYS) & set(resolved_for("awp+fgsm")) == {"simcse_variant", "awp_gamma", "fgsm_epsilon"}
    assert set(SIMCSE_VARIANT_KEYS) & set(resolved_for("vae")) == {
        "simcse_variant", "extra_negatives", "vae_history", "vae_hidden", "vae_latent", "vae_lr", "vae_updates",
        "vae_sampling"}
    assert resolved_for("gmm", vae_latent=3) == resolved_for("gmm")
    assert resolved_for("gaussian_negatives")["extra_negatives"] == 8  # null = the batch size
    assert resolved_for("gaussian_negatives", extra_negatives=8) == resolved_for("gaussian_negatives")
    assert resolved_for("gni", sam_rho=0.5, extra_negatives=3) == resolved_for("gni")
    other = resolved({**resolved_for("none"), **VARIANT_DEFAULTS, "objective": "nm", "simcse_variant": "gni",
                      "deletion_ratio": 0.6, "deletion_unit": "word"})
    assert not set(SIMCSE_VARIANT_KEYS) & set(other)  # simcse only
    from augsbert.config.schema import load_schema

    enum = load_schema()["$defs"]["stage_options"]["properties"]["pretrain"]["properties"]["simcse_variant"]["enum"]
    assert set(enum) == set(SIMCSE_VARIANTS)


# ---- input-embedding noise (§4.1.2)
def test_gni_and_gaussian_dropout_statistics():
    torch.manual_seed(0)
    e = torch.rand(1000, 1000) + 0.5
    residual = gaussian_noise(e, 0.001) - e
    assert float(residual.std()) == pytest.approx(0.001, rel=0.01) and abs(float(residual.mean())) < 1e-5
    ratio = gaussian_dropout(e, 0.001) / e
    assert float(ratio.mean()) == pytest.approx(1.0, abs=1e-5) and float(ratio.std()) == pytest.approx(0.001, rel=0.01)
    dropped = bernoulli_dropout(e, 0.1)
    zero = dropped == 0
    assert float(zero.float().mean()) == pytest.approx(0.1, abs=0.002)
    assert torch.allclose(dropped[~zero], e[~zero] / 0.9)
    cols = feature_dropout(e.view(10, 100, 1000), 0.1)
    zero_cols = (cols == 0).all(dim=1)  # (sentence, dimension): a dimension is dropped at every position
    assert torch.equal((cols == 0).any(dim=1), zero_cols)
    assert float(zero_cols.float().mean()) == pytest.approx(0.1, abs=0.02)


def test_gni_acts_on_the_positive_word_embeddings_only(encoder):
    loss = build_loss("simcse", encoder, params_for("gni"), head_source="")
    words = encoder[0].auto_model.get_input_embeddings()
    seen = []
    handle = words.register_forward_hook(lambda m, args, out: seen.append(out - m.weight[args[0]]))  # runs after GNI
    try:
        torch.manual_seed(0)
        with torch.no_grad():  # all 64 sentences: ~15k noised values at the tiny model's width 16
            loss(batch(encoder, len(SENTENCES)), None)
    finally:
        handle.remove()
    anchor, positive = seen
    assert torch.equal(anchor, torch.zeros_like(anchor))  # noise_views: positive
    assert float(positive.std()) == pytest.approx(0.001, rel=0.03) and abs(float(positive.mean())) < 5e-5


def test_fgsm_delta_is_epsilon_along_the_gradient_sign_and_raises_the_loss(tiny_minilm):
    # keeps the pretrained 1-layer MiniLM: "the sign ascends the loss" is first order, so ε = 0.01 must be small
    # against the word embeddings; the random tiny model's (std 0.02) it moves by half, and on the tiny model of
    # seed 2 the loss rose for -δ as well as for +δ
    encoder = build_encoder(tiny_minilm, "cls", 24, "cpu")
    loss = build_loss("simcse", encoder, params_for("fgsm", fgsm_epsilon=0.01), head_source="")
    encoder.eval()  # no dropout: the same network in every pass
    first, second = batch(encoder)
    with torch.no_grad():
        anchors = loss.embed(first)
        delta, gradient = loss.fgsm_delta(anchors, second)
        assert float(delta.abs().max()) == pytest.approx(0.01, rel=1e-6)
        assert torch.equal(delta, 0.01 * gradient.sign()) and (gradient != 0).float().mean() > 0.5

        def value(shift):
            positives = loss.embed_with(second, lambda e: e + shift)
            return float(plain_ce(anchors, positives)[0])

        assert value(-delta) < value(0.0) < value(delta)  # the gradient's sign ascends the loss
    encoder.train()


# ---- output augmentation (§4.1.1)
def test_output_augmentations():
    torch.manual_seed(0)
    h = torch.randn(4000, 4) * torch.tensor([0.5, 1.0, 2.0, 4.0])
    gaussian = OutputAugmentedSimCSELoss(Fixed(), "output_gaussian")
    assert torch.allclose((gaussian.augment(h) - h).std(dim=0), h.std(dim=0), rtol=0.05)
    x = torch.tensor([[0.1, -5.0, 0.3, 2.0, -0.2, 1.0, 0.05, -3.0, 0.7, 4.0]])
    assert torch.equal(magnitude_mask(x, 0.2, largest=False), x * torch.tensor([[0, 1, 1, 1, 1, 1, 0, 1, 1, 1.0]]))
    assert torch.equal(magnitude_mask(x, 0.2, largest=True), x * torch.tensor([[1, 0, 1, 1, 1, 1, 1, 1, 1, 0.0]]))
    fgsm = OutputAugmentedSimCSELoss(Fixed(), "output_fgsm", epsilon=0.05)
    anchors = h[:6].clone().requires_grad_()
    shifted = fgsm.augment(anchors)
    point = h[:6].clone().requires_grad_()
    plain_ce(h[:6], point)[0].backward()
    assert torch.equal(shifted, h[:6] + 0.05 * point.grad.sign()) and bool((point.grad != 0).all())
    shifted.sum().backward()
    assert torch.equal(anchors.grad, torch.ones_like(h[:6]))  # the gradient flows through the anchor, not through δ


# ---- stability (§4.2)
def test_label_smoothing_equals_the_manual_value():
    torch.manual_seed(0)
    a, p = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    value = LabelSmoothingSimCSELoss(Fixed(), smoothing=0.1)([{"emb": a}, {"emb": p}], None)
    log_p = torch.log_softmax(simcse_logits(a, p, 20.0), dim=1)
    expected = sum(-0.9 * log_p[i, i] - 0.1 * log_p[i].mean() for i in range(5)) / 5
    assert float(value) == pytest.approx(float(expected), rel=1e-12)
    assert float(value) != pytest.approx(float(plain_ce(a, p)[0]), rel=1e-3)


def _gradients(model, loss, feats, perturbation=None):
    def closure():
        value = loss(feats, None)
        value.backward()
        return value.detach()

    model.zero_grad(set_to_none=True)
    params = list(model.parameters())
    (perturbation.step(params, closure) if perturbation else closure())
    return [None if p.grad is None else p.grad.clone() for p in params]  # the unused pooler has none


def _same(a, b, exact=True) -> bool:
    return all((x is None and y is None) or (x is not None and y is not None and
                                             (torch.equal(x, y) if exact else torch.allclose(x, y, atol=1e-6)))
               for x, y in zip(a, b))


@pytest.mark.parametrize("kind", ["sam", "awp"])
def test_weight_perturbation_restores_weights_and_is_plain_at_zero(encoder, kind):
    model = encoder.eval()  # no dropout, so two passes on the same weights are the same computation
    words = model[0].auto_model.get_input_embeddings().weight
    words.requires_grad_(False)  # time: the gradient of its 30k rows would dominate the test
    loss = build_loss("simcse", model, params_for(kind), head_source="")
    feats = batch(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plain = _gradients(model, loss, feats)
    at_zero = _gradients(model, loss, feats, WeightPerturbation(kind, 0.0))
    assert _same(plain, at_zero)
    radius = 0.05 if kind == "sam" else 0.005
    perturbed = _gradients(model, loss, feats, WeightPerturbation(kind, radius))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # restored bit-exactly
    assert not _same(plain, perturbed, exact=False)
    # the moves: SAM ‖v‖ = ρ overall, AWP ‖v_l‖ = γ ‖w_l‖ per weight matrix (biases untouched)
    for p, g in zip(model.parameters(), plain):
        p.grad = g
    moves = WeightPerturbation(kind, radius).perturbation(list(model.parameters()))
    if kind == "sam":
        assert float(torch.sqrt(sum((v ** 2).sum() for _, v in moves))) == pytest.approx(0.05, rel=1e-4)
    else:
        assert moves and all(p.dim() > 1 for p, _ in moves)
        assert all(float(v.norm()) == pytest.approx(0.005 * float(p.detach().norm()), rel=1e-4) for p, v in moves)
    # and the applied gradient is the one at w + v
    with torch.no_grad():
        for p, v in moves:
            p.add_(v)
    at_moved = _gradients(model, loss, feats)
    model.load_state_dict(before)  # the module-scoped encoder, for the next test
    model.zero_grad(set_to_none=True)
    model.train()
    words.requires_grad_(True)
    assert _same(at_moved, perturbed, exact=False)


# ---- additional negatives (§4.3)
def test_gaussian_negatives_logits_no_gradient_and_higher_loss():
    torch.manual_seed(0)
    n, k = 6, 10
    anchors = torch.randn(n, 16, requires_grad=True)
    positives = (anchors.detach() + 0.1 * torch.randn(n, 16)).requires_grad_()
    loss = GaussianNegativesSimCSELoss(Fixed(), "gaussian_negatives", count=k)
    torch.manual_seed(1)
    extra = loss.sample(anchors)
    assert extra.shape == (k, 16) and not extra.requires_grad and extra.grad_fn is None
    torch.manual_seed(1)
    value = loss([{"emb": anchors}, {"emb": positives}], None)
    expected, logits = plain_ce(anchors, positives, extra)
    assert logits.shape == (n, n + k) and float(value.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    assert float(value.detach()) > float(plain_ce(anchors, positives)[0].detach())
    value.backward()
    assert anchors.grad is not None and positives.grad is not None
    # the samples follow N(μ_z, diag σ_z²) / N(μ_z, Σ_z) of the batch's anchors
    z = torch.randn(32, 4, dtype=torch.float64) @ torch.tensor([[1.0, 0.8, 0, 0], [0, 0.6, 0, 0], [0, 0, 2, 0],
                                                                 [0, 0, 0, 0.5]], dtype=torch.float64)
    many = GaussianNegativesSimCSELoss(Fixed(), "gaussian_negatives", count=200000).sample(z)
    assert torch.allclose(many.mean(0), z.mean(0), atol=0.02) and torch.allclose(many.std(0), z.std(0), rtol=0.01)
    full = GaussianNegativesSimCSELoss(Fixed(), "cov_filtering", count=200000).sample(z)
    assert torch.allclose(torch.cov(full.T), torch.cov(z.T), atol=0.03)
    # cov_sampling sigma_noise: μ + Σ ε, the covariance times white noise, so its covariance is Σ²
    literal = GaussianNegativesSimCSELoss(Fixed(), "cov_filtering", count=200000, cov_sampling="sigma_noise")
    torch.manual_seed(2)
    drawn = literal.sample(z)
    sigma = torch.cov(z.T)
    assert torch.allclose(drawn.mean(0), z.mean(0), atol=0.05)
    assert torch.allclose(torch.cov(drawn.T), sigma @ sigma, atol=0.05 * float((sigma @ sigma).abs().max()))
    torch.manual_seed(3)
    eps = torch.randn(5, 4, dtype=torch.float64)
    torch.manual_seed(3)
    five = GaussianNegativesSimCSELoss(Fixed(), "cov_filtering", count=5, cov_sampling="sigma_noise").sample(z)
    assert torch.allclose(five, z.mean(0) + eps @ sigma)  # literally Σ ε, against the formed matrix


def test_memory_bank_holds_the_previous_steps_detached_positives(encoder):
    loss = MemoryBankSimCSELoss(FixedDim(8), size=4)
    loss.train()
    torch.manual_seed(0)
    steps = [(torch.randn(4, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)) for _ in range(2)]
    first = loss([{"emb": steps[0][0]}, {"emb": steps[0][1]}], None)
    # step 1: nothing stored yet, the plain loss
    assert float(first.detach()) == pytest.approx(float(plain_ce(*steps[0])[0].detach()), rel=1e-6)
    assert torch.equal(loss.entries(), steps[0][1].detach()) and not loss.entries().requires_grad
    second = loss([{"emb": steps[1][0]}, {"emb": steps[1][1]}], None)
    expected, logits = plain_ce(*steps[1], steps[0][1].detach())
    assert logits.shape == (4, 8) and float(second.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    assert torch.equal(loss.entries(), steps[1][1].detach())
    second.backward()
    assert steps[0][1].grad is None  # no gradient reaches step t-1
    loss.eval()
    with torch.no_grad():
        evaluated = loss([{"emb": steps[0][0]}, {"emb": steps[0][1]}], None)
    assert float(evaluated) == pytest.approx(float(first.detach()), rel=1e-6)  # eval: no bank negatives ...
    assert torch.equal(loss.entries(), steps[1][1].detach())  # ... and no update
    real = build_loss("simcse", encoder, params_for("memory_bank"), head_source="")
    assert set(loss_extra_state(real, encoder)) == {"bank", "bank_filled"}  # checkpointed with the trainer


def test_gmm_negatives_come_from_previous_steps():
    loss = GMMNegativesSimCSELoss(FixedDim(3), count=5, components=2, history=2, batch_size=4)
    loss.train()
    torch.manual_seed(0)
    a, p = torch.randn(4, 3), torch.randn(4, 3)
    assert float(loss([{"emb": a}, {"emb": p}], None)) == pytest.approx(float(plain_ce(a, p)[0]), rel=1e-6)
    assert int(loss.past_filled) == 4 and torch.equal(loss.past[-4:], a)
    torch.manual_seed(1)
    extra = loss.sample(a)
    torch.manual_seed(1)
    value = loss([{"emb": a}, {"emb": p}], None)
    assert extra.shape == (5, 3) and float(value) == pytest.approx(float(plain_ce(a, p, extra)[0]), rel=1e-6)


# ---- VAE negatives (§4.3, Table 5 "VAE sampling"; Kingma & Welling 2014)
def test_vae_negative_elbo_equals_its_closed_form_and_torch_distributions():
    D = torch.distributions
    vae = GaussianVAE(2, 3, 2).double().requires_grad_(False)
    with torch.no_grad():  # every weight 0; encoder bias: μ = 1, log σ² = log 2 in both latent dimensions
        for p in vae.parameters():
            p.zero_()
        vae.encoder[2].bias.copy_(torch.tensor([1.0, 1.0, math.log(2), math.log(2)], dtype=torch.float64))
    x, eps = torch.tensor([[1.0, 2.0]], dtype=torch.float64), torch.tensor([[0.3, -0.7]], dtype=torch.float64)
    loss, reconstruction, kl = vae.negative_elbo(x, eps)
    # decoder weights and bias 0: μ' = 0, log σ'² = 0 whatever z is, so −log N(x; 0, I) = log 2π + (1 + 4) / 2
    assert float(reconstruction) == pytest.approx(math.log(2 * math.pi) + 2.5, rel=1e-12)
    # KL(N(1, 2) ‖ N(0, 1)) = ½ (σ² + μ² − 1 − log σ²) = 1 − ½ log 2 per latent dimension
    assert float(kl) == pytest.approx(2 * (1 - 0.5 * math.log(2)), rel=1e-12)
    assert float(loss) == pytest.approx(math.log(2 * math.pi) + 2.5 + 2 - math.log(2), rel=1e-12)
    # random weights: the reparameterised sample, −log p(x|z) and the KL as torch.distributions computes them
    torch.manual_seed(0)
    vae = GaussianVAE(5, 7, 3).double().requires_grad_(False)
    x, eps = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    loss, reconstruction, kl = vae.negative_elbo(x, eps)
    mu, logvar = vae.encoder(x).chunk(2, dim=-1)
    mean, logvar_x = vae.decoder(mu + torch.exp(0.5 * logvar) * eps).chunk(2, dim=-1)
    expected_rec = -D.Normal(mean, torch.exp(0.5 * logvar_x)).log_prob(x).sum(-1).mean()
    expected_kl = D.kl_divergence(D.Normal(mu, torch.exp(0.5 * logvar)),
                                  D.Normal(torch.zeros_like(mu), torch.ones_like(mu))).sum(-1).mean()
    assert float(reconstruction) == pytest.approx(float(expected_rec), rel=1e-12)
    assert float(kl) == pytest.approx(float(expected_kl), rel=1e-12)
    assert float(loss) == pytest.approx(float(expected_rec + expected_kl), rel=1e-12)


def _recording(loss):
    """Wrap `loss.sample` so the test sees the negatives each step used."""
    drawn, sample = [], loss.sample
    loss.sample = lambda anchors: drawn.append(sample(anchors)) or drawn[-1]
    return drawn


def test_vae_negatives_carry_no_gradient_and_widen_the_logits_to_n_plus_k(monkeypatch):
    from augsbert.losses import simcse_variant_base as variants

    n, k, dim = 4, 5, 6
    loss = VAENegativesSimCSELoss(FixedDim(dim), count=k, history=2, batch_size=n, hidden=8, latent=3)
    loss.train()
    drawn, logits, build = _recording(loss), [], variants.simcse_logits
    monkeypatch.setattr(variants, "simcse_logits", lambda *a: logits.append(build(*a)) or logits[-1])
    torch.manual_seed(0)
    a0, p0 = torch.randn(n, dim), torch.randn(n, dim)
    first = loss([{"emb": a0}, {"emb": p0}], None)  # step 1: an empty queue, no VAE step, the plain loss
    assert not drawn and logits[-1].shape == (n, n) and torch.equal(loss.entries(), a0)
    assert float(first) == pytest.approx(float(plain_ce(a0, p0)[0]), rel=1e-6)
    before = [p.detach().clone() for p in loss.vae.parameters()]
    anchors, positives = torch.randn(n, dim, requires_grad=True), torch.randn(n, dim, requires_grad=True)
    value = loss([{"emb": anchors}, {"emb": positives}], None)
    (extra,) = drawn
    assert extra.shape == (k, dim) and not extra.requires_grad and extra.grad_fn is None
    assert logits[-1].shape == (n, n + k) and torch.equal(logits[-1], build(anchors, positives, 20.0, extra))
    # the VAE took its Adam step on the queue (step 1's anchors), and keeps neither gradients nor requires_grad
    assert all(not torch.equal(b, p) for b, p in zip(before, loss.vae.parameters()))
    assert all(p.grad is None and not p.requires_grad for p in loss.vae.parameters())
    assert torch.equal(loss.entries(), torch.cat([a0, anchors.detach()]))
    value.backward()
    assert all(p.grad is None for p in loss.vae.parameters())  # the SimCSE loss does not reach the VAE
    # the loss against a manual computation on these fixed tensors: −mean_i log softmax_j(20 cos(a_i, c_j))_i
    candidates = torch.cat([positives, extra]).detach().double()
    a = anchors.detach().double()
    cos = torch.stack([torch.stack([torch.dot(a[i], c) / (a[i].norm() * c.norm()) for c in candidates])
                       for i in range(n)])
    expected = -sum(20 * cos[i, i] - torch.logsumexp(20 * cos[i], dim=0) for i in range(n)) / n
    assert float(value.detach()) == pytest.approx(float(expected), rel=1e-5)


def test_vae_training_sends_no_gradient_into_the_encoder(encoder):
    params = params_for("vae", vae_hidden=16, vae_latent=4, extra_negatives=3)
    loss = build_loss("simcse", encoder, params, head_source="")
    assert isinstance(loss, VAENegativesSimCSELoss) and loss.count == 3 and loss.vae.latent == 4
    encoder.eval()
    encoder.training = True  # the loss trains its VAE and draws negatives; dropout off, so passes repeat exactly
    drawn = _recording(loss)
    try:
        encoder.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        with torch.no_grad():
            loss(batch(encoder), None)  # fills the queue
        value = loss(batch(encoder), None)  # trains the VAE on it, then draws
        assert all(p.grad is None for p in encoder.parameters())  # the VAE's update wrote no encoder gradient
        value.backward()
        got = [None if p.grad is None else p.grad.clone() for p in encoder.parameters()]
        encoder.zero_grad(set_to_none=True)
        first, second = batch(encoder)
        anchors, positives = encoder(first)["sentence_embedding"], encoder(second)["sentence_embedding"]
        plain_ce(anchors, positives, drawn[-1])[0].backward()  # the negatives as constants
        want = [None if p.grad is None else p.grad.clone() for p in encoder.parameters()]
        assert _same(got, want, exact=False)
        assert set(loss_extra_state(loss, encoder)) >= {
            "past", "past_filled", "vae.encoder.0.weight", "vae_adam.0.step", "vae_adam.0.exp_avg",
            "vae_adam.0.exp_avg_sq"}
    finally:
        encoder.zero_grad(set_to_none=True)
        encoder.train()


def test_vae_state_resumes_exactly():
    def fresh(sampling):
        torch.manual_seed(0)
        return VAENegativesSimCSELoss(FixedDim(6), count=3, history=2, batch_size=4, hidden=8, latent=3,
                                      sampling=sampling).train()

    torch.manual_seed(1)
    steps = [(torch.randn(4, 6), torch.randn(4, 6)) for _ in range(5)]
    for sampling in ("posterior", "prior"):
        whole = fresh(sampling)
        torch.manual_seed(2)
        values = [float(whole([{"emb": a}, {"emb": p}], None)) for a, p in steps]
        cut = fresh(sampling)
        torch.manual_seed(2)
        for a, p in steps[:3]:
            cut([{"emb": a}, {"emb": p}], None)
        state, rng = {k: v.clone() for k, v in cut.state_dict().items()}, torch.get_rng_state()
        assert int(state["vae_adam.0.step"]) == 2  # steps 2 and 3 trained the VAE
        resumed = VAENegativesSimCSELoss(FixedDim(6), count=3, history=2, batch_size=4, hidden=8, latent=3,
                                         sampling=sampling).train()
        resumed.load_state_dict(state)  # strict: every key is the loss's
        torch.set_rng_state(rng)
        assert [float(resumed([{"emb": a}, {"emb": p}], None)) for a, p in steps[3:]] == values[3:]
        assert all(torch.equal(x, y) for x, y in zip(resumed.state_dict().values(), whole.state_dict().values()))
    # under SimCSE's train-only MLP head (the grids' setting) the same state sits under the wrapper's `loss.`
    from augsbert.losses.train_only_mlp_head import TrainOnlyMLPHeadLoss

    wrapped = TrainOnlyMLPHeadLoss(FixedDim(6), fresh("posterior"), initializer_range=0.02).train()
    for a, p in steps[:3]:
        wrapped([{"emb": a}, {"emb": p}], None)
    state = wrapped.state_dict()
    assert int(state["loss.vae_adam.0.step"]) == 2 and "loss.vae.decoder.2.weight" in state
    again = TrainOnlyMLPHeadLoss(FixedDim(6), fresh("posterior"), initializer_range=0.02)
    again.load_state_dict(state)
    assert all(torch.equal(x, y) for x, y in zip(again.state_dict().values(), state.values()))


# ---- tiny runs: one per group
# These keep the pretrained 1-layer MiniLM: every variant is SimCSE on [CLS] vectors, and the random tiny model's
# [CLS] vectors are all but equal in eval mode (cosines ~0.99999), so its held-out loss stays at log(batch size)
# (checked: unchanged to 6 digits after the run, for every variant here).
@pytest.mark.parametrize("variant", ["gni", "output_gaussian", "sam", "gaussian_negatives", "memory_bank", "vae"])
def test_tiny_run_lowers_held_out_loss(tiny_minilm, tmp_path, monkeypatch, variant):
    calls = []
    original = WeightPerturbation.step
    monkeypatch.setattr(WeightPerturbation, "step", lambda self, *a: calls.append(1) or original(self, *a))
    from transformers import TrainerCallback

    class Optimized(TrainerCallback):  # the parameters the trainer's optimizer steps
        ids: set = set()

        def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
            Optimized.ids = {id(p) for group in optimizer.param_groups for p in group["params"]}

    params = params_for(variant)
    train, held = SENTENCES[:32], SENTENCES[32:48]
    model, loss, metrics = fit(tiny_minilm, train, held, None, params, tmp_path / "work", "cpu",
                               callbacks=[Optimized()])
    base = build_encoder(tiny_minilm, "cls", 24, "cpu")
    torch.manual_seed(0)
    before = held_out_loss(base, build_loss("simcse", base, params, tiny_minilm), "simcse", held, params)
    torch.manual_seed(0)
    after = held_out_loss(model, loss, "simcse", held, params)
    assert metrics["steps"] == 4 and after < before, (variant, before, after)
    assert len(calls) == (4 if variant == "sam" else 0)  # the trainer's two-pass step, once per step
    if variant == "memory_bank":
        from safetensors.torch import load_file

        state = load_file(str(tmp_path / "work" / "trainer" / "checkpoint-4" / "loss_state.safetensors"))
        assert int(state["bank_filled"]) == 8 and torch.equal(state["bank"], loss.bank)
    if variant == "vae":  # its own Adam trained it at steps 2-4; the trainer's optimizer never held it
        from safetensors.torch import load_file

        state = load_file(str(tmp_path / "work" / "trainer" / "checkpoint-4" / "loss_state.safetensors"))
        assert int(state["past_filled"]) == 4 * 8 and int(state["vae_adam.0.step"]) == 3
        assert torch.equal(state["vae.decoder.2.weight"], loss.vae.decoder[2].weight)
        assert Optimized.ids and not Optimized.ids & {id(p) for p in loss.vae.parameters()}
    assert not math.isnan(after)


# ---- SimCSE's train-only MLP head (pretrain.mlp_head: train_only; Gao et al. 2021, seed 001 section 5.1)
def test_mlp_head_option_is_keyed_only_when_set():
    from augsbert.config.schema import load_schema

    assert "mlp_head" not in resolved_for("none") and "mlp_head" not in resolved_for("none", mlp_head="none")
    assert resolved_for("gni", mlp_head="train_only")["mlp_head"] == "train_only"
    assert params_for("none", mlp_head="train_only").mlp_head == "train_only"
    assert params_for("none").mlp_head == "none"
    other = resolved({**resolved_for("none"), "objective": "nm", "mlp_head": "train_only", "deletion_ratio": 0.6,
                      "deletion_unit": "word"})
    assert "mlp_head" not in other  # simcse only
    schema = load_schema()["$defs"]["stage_options"]["properties"]["pretrain"]["properties"]["mlp_head"]
    assert schema["enum"] == ["none", "train_only"] and schema["default"] == "none"


def _head(loss, embeddings):
    return torch.tanh(embeddings @ loss.mlp[0].weight.T + loss.mlp[0].bias)


@pytest.mark.parametrize("variant", ["none", "label_smoothing"])
def test_mlp_head_is_in_the_training_loss_and_gets_gradients(tiny_minilm, variant):
    from augsbert.losses.train_only_mlp_head import TrainOnlyMLPHeadLoss

    model = build_encoder(tiny_minilm, "cls", 24, "cpu")
    params = params_for(variant, mlp_head="train_only")
    torch.manual_seed(0)
    loss = build_loss("simcse", model, params, tiny_minilm)
    assert isinstance(loss, TrainOnlyMLPHeadLoss)
    inner = type(loss.loss).__name__
    assert inner == ("MultipleNegativesRankingLoss" if variant == "none" else "LabelSmoothingSimCSELoss")
    dim = model.get_embedding_dimension()
    assert loss.mlp[0].weight.shape == (dim, dim) and torch.equal(loss.mlp[0].bias, torch.zeros(dim))
    assert loss.mlp[0].weight.std().item() == pytest.approx(0.02, rel=0.02)  # BERT's initializer_range
    # a real (1-layer MiniLM) encoder in train mode: the same seed gives the loss's two dropout views here too
    model.train()
    feats = batch(model)
    torch.manual_seed(5)
    with torch.no_grad():
        views = [model(dict(f))["sentence_embedding"] for f in feats]  # outside the loss: no head
    smoothing = 0.1 if variant == "label_smoothing" else 0.0

    def ce(a, b):
        return float(torch.nn.functional.cross_entropy(simcse_logits(a, b, 20.0), torch.arange(6),
                                                       label_smoothing=smoothing))

    expected, without = ce(*(_head(loss, v) for v in views)), ce(*views)
    torch.manual_seed(5)
    value = loss(batch(model), None)
    assert float(value) == pytest.approx(expected, abs=1e-5)
    assert abs(float(value) - without) > 1e-3  # the head changes the loss
    model.zero_grad()
    value.backward()
    for p in loss.mlp.parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert model[0].auto_model.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    # outside the loss the hook is off: encode() and the model's forward give the pooled output
    model.eval()
    with torch.no_grad():
        pooled = model(dict(feats[0]))["sentence_embedding"]
        assert torch.equal(model.encode(SENTENCES[:6], convert_to_tensor=True), pooled)
    assert not any("mlp" in k for k in model.state_dict())
    assert {k for k in loss_extra_state(loss, model)} == {"mlp.0.weight", "mlp.0.bias"}


def test_mlp_head_is_trained_and_absent_from_the_saved_model(tiny_minilm, tmp_path):
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer
    from transformers import set_seed

    params = params_for("none", mlp_head="train_only")
    train, held = SENTENCES[:32], SENTENCES[32:48]
    set_seed(params.seed)  # fit's own seeding: the head's initial weights
    initial = build_loss("simcse", build_encoder(tiny_minilm, "cls", 24, "cpu"), params, tiny_minilm).mlp[0].weight
    model, loss, metrics = fit(tiny_minilm, train, held, None, params, tmp_path / "work", "cpu")
    assert metrics["steps"] == 4
    assert not torch.equal(loss.mlp[0].weight.detach(), initial.detach())  # the optimizer stepped the head
    state = load_file(str(tmp_path / "work" / "trainer" / "checkpoint-4" / "loss_state.safetensors"))
    assert set(state) == {"mlp.0.weight", "mlp.0.bias"} and torch.equal(state["mlp.0.weight"], loss.mlp[0].weight)
    model.save(str(tmp_path / "model"))
    saved = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert [type(m).__name__ for m in saved] == ["Transformer", "Pooling"]
    assert not any("mlp" in k for k in saved.state_dict())
    assert set(saved.state_dict()) == set(build_encoder(tiny_minilm, "cls", 24, "cpu").state_dict())
    # its embeddings are encoder + CLS pooling of the trained weights, the head not applied
    saved.eval()
    feats = {k: v for k, v in saved.tokenize(held).items() if isinstance(v, torch.Tensor)}
    with torch.no_grad():
        cls = saved[0].auto_model(**{k: feats[k] for k in ("input_ids", "attention_mask")}).last_hidden_state[:, 0]
        embeddings = saved.encode(held, convert_to_tensor=True)
        trained = model.encode(held, convert_to_tensor=True)
    assert torch.allclose(embeddings, cls, atol=1e-5) and torch.allclose(embeddings, trained, atol=1e-5)
    assert not torch.allclose(embeddings, _head(loss, cls).detach(), atol=1e-2)
