"""`rcl` (seed 002): Regularized Contrastive Learning, and `rcl_entropy`, the objective of its entropy models."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Params
from .base import Objective, load, option

RCL = "augsbert.losses.regularized_contrastive"
ROWS = ("anchor", "positive", "negative", "label")  # seed 002: (anchor, positive[, negative]) + row id


@dataclass(frozen=True, kw_only=True)
class RCLOptions(Params):
    rcl_phis: list[float] = option([0.01, 0.02, 0.03, 0.04], """
        `rcl`: the φ of each entropy model (seed 002 equation 2, J_i = l_i + φ H(p_i) with l_i = equation 1,
        cosine without temperature); each model adds two unweighted regulators to the final model's loss
        (equation 3: its embeddings of the batch's queries and of its documents, frozen, k over the batch).
        Default = the paper's best (App. A.1.1; Table 4: 8 regulators); [] = equation 1 alone. Each value is
        its own `rcl_entropy` artifact: adding one trains one more model. With NLI triples the contradiction
        is an extra candidate in equation 1's denominator (and so in p_i), as in SBERT's NLI training, and
        gets no regulator: the paper does not say how it enters equations 2-3. The entropy term sums over
        every j, the diagonal included.""", uniqueItems=True)
    rcl_patience: int = option(3, """
        `rcl`: an entropy model stops once its held-out loss has not decreased for this many evaluations
        (App. A: 3 steps); the checkpoint with the lowest held-out loss is kept.""", minimum=1)
    rcl_eval_steps: int = option(100, """
        `rcl`: steps between an entropy model's held-out evaluations (and checkpoints). The paper does not
        state it.""", minimum=1)
    rcl_entropy_max_steps: int | None = option(None, """
        `rcl`: at most this many steps per entropy model if early stopping does not end it first (null =
        `max_steps`).""", minimum=1)


@dataclass(frozen=True, kw_only=True)
class RCLEntropyOptions(Params):
    phi: float | None = None  # equation 2's weight, set by the rcl_entropy stage (one model per rcl_phis value)


@dataclass(frozen=True)
class RCLObjective(Objective):
    """Rows (id, anchor, positive[, negative]) from NLI triples, or each corpus sentence twice (dropout views)."""

    def rows(self, sentences, seed, triples, options):
        return load(f"{RCL}:rcl_columns")(triples if triples else [(i, s, s) for i, s in enumerate(sentences)])


@dataclass(frozen=True)
class RegularizedContrastive(RCLObjective):
    """Equation 3: equation 1 + two regulators per entropy model (the artifacts the job names `regulators`)."""

    def build(self, model, params, head_source: str):
        paths = params.regulators  # the entropy artifacts, added by the job (not a keyed option)
        if len(paths) != len(params.rcl_phis):
            raise ValueError(f"rcl: {len(params.rcl_phis)} φ value(s) but {len(paths)} entropy model(s)")
        return load(self.loss)(model, load(f"{RCL}:load_regulators")(paths))


@dataclass(frozen=True)
class EntropyContrastive(RCLObjective):
    """Equation 2 with weight φ: one entropy model (the rcl_entropy stage's trainer)."""

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, params.phi)


ENTRIES = (
    RegularizedContrastive("rcl", ROWS, "mean", True, RCLOptions, f"{RCL}:RegularizedContrastiveLoss",
                           corpus="augsbert.training.pretrain_rows:rcl_corpus"),
    EntropyContrastive("rcl_entropy", ROWS, "mean", True, RCLEntropyOptions,
                       "augsbert.losses.entropy_contrastive:EntropyContrastiveLoss", choice=False),
)
