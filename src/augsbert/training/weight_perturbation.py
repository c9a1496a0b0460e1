"""SAM / AWP (seed 001, 4.2): the trainer hook that takes the gradient at perturbed weights."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn

from ..stages.pretrain import PretrainParams


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


# ---- which loss and trainer hook a `pretrain.simcse_variant` means
WEIGHT_PERTURBED = {"sam": "sam", "awp": "awp", "awp+gni": "awp", "awp+fgsm": "awp"}


def weight_perturbation(params: PretrainParams) -> WeightPerturbation | None:
    """The SAM / AWP trainer hook of `params.simcse_variant`, or None."""
    kind = WEIGHT_PERTURBED.get(getattr(params, "simcse_variant", "none"))  # an option of simcse only
    if kind is None:
        return None
    return WeightPerturbation(kind, params.sam_rho if kind == "sam" else params.awp_gamma)
