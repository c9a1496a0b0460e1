"""Regularized Contrastive Learning (seed 002): ../shared/spec/unsupervised.md section 3, "RCL".

Equations 1-3 on hand-built batches (values against explicit sums, gradients
against the library's equation 1), the frozen regulators, the plan's entropy
nodes, and a tiny run of both stages.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from augsbert.config.load import read_config
from augsbert.losses.entropy_contrastive import EntropyContrastiveLoss
from augsbert.losses.regularized_contrastive import RegularizedContrastiveLoss, RegulatorTable, rcl_columns
from conftest import REPO, TINY_BERT


class Fixed(torch.nn.Module):
    """A stand-in encoder: the sentence embedding is a tensor carried in the features."""

    def forward(self, features):
        return {"sentence_embedding": features["emb"]}


def batch(*tensors):
    return [{"emb": t} for t in tensors]


def leaves(seed: int, *shapes):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_() for shape in shapes]


def cos(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def ce(scores: list[float], target: int) -> float:
    """-log softmax(scores)[target], by hand."""
    return -scores[target] + math.log(sum(math.exp(s) for s in scores))


def equation_1(q, docs) -> float:
    """Mean over i of -log e^{cos(q_i, d_i)} / sum_j e^{cos(q_i, d_j)}, no temperature (docs may hold negatives)."""
    q, docs = q.detach().numpy(), docs.detach().numpy()
    return float(np.mean([ce([cos(qi, dj) for dj in docs], i) for i, qi in enumerate(q)]))


def grads(loss, tensors):
    for t in tensors:
        t.grad = None
    loss.backward()
    return [t.grad.clone() for t in tensors]


@pytest.mark.parametrize("with_negative", [False, True])
def test_phi_zero_and_no_regulators_are_equation_1_value_and_gradient(with_negative):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    tensors = leaves(0, *([(5, 6)] * (3 if with_negative else 2)))
    expected = equation_1(tensors[0], torch.cat(tensors[1:]))
    library = MultipleNegativesRankingLoss(Fixed(), scale=1.0)  # equation 1 = MNRL at scale 1
    reference = library(batch(*tensors), None)
    reference_grads = grads(reference, tensors)
    ids = torch.arange(5)
    for loss in (EntropyContrastiveLoss(Fixed(), phi=0.0), RegularizedContrastiveLoss(Fixed(), [])):
        value = loss(batch(*tensors), ids)
        assert value.item() == pytest.approx(expected, rel=1e-12)
        assert value.item() == pytest.approx(reference.item(), rel=1e-12)
        for ours, theirs in zip(grads(value, tensors), reference_grads):
            torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-14)


def test_entropy_term_is_phi_times_the_entropy_on_a_3x3_batch():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    d = torch.tensor([[1.0, 0.2], [-0.5, 1.0], [0.3, 1.0]], dtype=torch.float64)
    entropies, ell = [], []
    for i in range(3):
        scores = [cos(q[i], d[j]) for j in range(3)]
        z = sum(math.exp(s) for s in scores)
        p = [math.exp(s) / z for s in scores]
        entropies.append(-sum(pj * math.log(pj) for pj in p))  # every j, the diagonal included
        ell.append(ce(scores, i))
    phi = 0.37
    value = float(EntropyContrastiveLoss(Fixed(), phi)(batch(q, d)))
    assert value == pytest.approx(np.mean(ell) + phi * np.mean(entropies), rel=1e-12)
    assert value - float(EntropyContrastiveLoss(Fixed(), 0.0)(batch(q, d))) == pytest.approx(
        phi * np.mean(entropies), rel=1e-10)


def test_equation_3_equals_the_explicit_sum_with_two_regulators_each():
    q, d = leaves(1, (3, 4), (3, 4))
    rng = np.random.default_rng(5)
    tables = [RegulatorTable(rng.normal(size=(6, 4)), rng.normal(size=(6, 4))) for _ in range(2)]
    ids = torch.tensor([4, 0, 2])  # the batch's rows in the tables
    value = float(RegularizedContrastiveLoss(Fixed(), tables)(batch(q, d), ids))
    qn, dn = q.detach().numpy(), d.detach().numpy()
    expected = equation_1(q, d)
    for table in tables:
        au_q, au_d = table.query[ids.numpy()], table.document[ids.numpy()]
        expected += np.mean([ce([cos(qn[i], au_q[k]) for k in range(3)], i) for i in range(3)])
        expected += np.mean([ce([cos(dn[i], au_d[k]) for k in range(3)], i) for i in range(3)])
    assert value == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="row"):
        RegularizedContrastiveLoss(Fixed(), tables)(batch(q, d), None)


def test_regulator_embeddings_carry_no_gradient(tmp_path):
    q, d = leaves(2, (4, 3), (4, 3))
    au_q, au_d = leaves(3, (4, 3), (4, 3))  # tensors that would take gradient if the loss let them
    loss = RegularizedContrastiveLoss(Fixed(), [RegulatorTable(au_q, au_d)])
    loss(batch(q, d), torch.arange(4)).backward()
    assert au_q.grad is None and au_d.grad is None
    assert q.grad is not None and d.grad is not None
    # an artifact's tables: memory-mapped .npy, looked up as constants
    np.save(tmp_path / "query.npy", np.arange(12, dtype=np.float32).reshape(4, 3))
    np.save(tmp_path / "document.npy", -np.arange(12, dtype=np.float32).reshape(4, 3))
    table = RegulatorTable.load(tmp_path)
    found_q, found_d = table.lookup(torch.tensor([3, 1]), "cpu")
    assert not found_q.requires_grad and found_q.tolist() == [[9, 10, 11], [3, 4, 5]]
    assert found_d.tolist() == [[-9, -10, -11], [-3, -4, -5]]
    with pytest.raises(IndexError):
        table.lookup(torch.tensor([4]), "cpu")


def test_rows_carry_their_id_as_the_label_column():
    columns = rcl_columns([(7, "a", "p", "n"), (8, "b", "q", "m")])
    assert list(columns) == ["anchor", "positive", "negative", "label"] and columns["label"] == [7, 8]
    assert list(rcl_columns([(0, "a", "a")])) == ["anchor", "positive", "label"]


# ---- plan: one entropy node per φ, keyed by what trains it
def rcl_plan(**pretrain):
    from augsbert.config.load import prepare_config
    from augsbert.plan import Plan

    raw = read_config(REPO / "config" / "config.yaml")
    raw["grids"] = {}
    raw["experiments"] = {"r": {"dataset": "lee", "models": ["zero_shot"],
                                "pretrain": {"objective": "rcl", "pool": "unlabeled", "max_steps": 30, **pretrain}}}
    plan = Plan(prepare_config(raw))
    return plan, plan.experiment("r").runs[42]


def test_adding_a_phi_adds_one_entropy_node_and_changes_the_final_node():
    plan, two = rcl_plan(rcl_phis=[0.01, 0.02])
    _, three = rcl_plan(rcl_phis=[0.01, 0.02, 0.03])
    entropy = {role: key for role, key in two.items() if role.startswith("rcl_entropy_")}
    assert entropy.keys() == {"rcl_entropy_0", "rcl_entropy_1"}
    new = {k for r, k in three.items() if r.startswith("rcl_entropy_")} - set(entropy.values())
    assert len(new) == 1 and three["rcl_entropy_2"] in new
    assert {r: three[r] for r in entropy} == entropy
    assert three["pretrained"] != two["pretrained"] and three["zero_shot"] == two["zero_shot"]
    node = plan.node(two["pretrained"])
    assert dict(node.inputs)["entropy_1"] == two["rcl_entropy_1"] and "rcl_patience" not in node.params
    spec = plan.node(two["rcl_entropy_0"]).params
    assert spec["phi"] == 0.01 and spec["patience"] == 3 and spec["max_steps"] == 30 and "selection" not in spec
    # options of the final model alone leave the entropy keys; an entropy option changes them only
    _, final_only = rcl_plan(rcl_phis=[0.01, 0.02], selection="last", eval_steps=7)
    assert {r: final_only[r] for r in entropy} == entropy and final_only["pretrained"] != two["pretrained"]
    _, patience = rcl_plan(rcl_phis=[0.01, 0.02], rcl_patience=5)
    assert not set(entropy.values()) & {patience[r] for r in entropy}
    _, none = rcl_plan(rcl_phis=[])
    assert not any(r.startswith("rcl_entropy_") for r in none)


# ---- both stages, tiny
def write_target(path):
    path.mkdir()
    for split in ("train", "dev", "test"):
        pd.DataFrame({"sentence1": [f"{split} one {i}" for i in range(6)], "sentence2": [f"{split} two {i}" for i in range(6)],
                      "score": [float(i % 5) for i in range(6)]}).to_parquet(path / f"{split}.parquet")
    return str(path)


def test_entropy_and_final_stage_run_and_store_the_embeddings(tiny_model, tmp_path):
    from augsbert.data import DataError
    from augsbert.losses.regularized_contrastive import DOCUMENT_FILE, QUERY_FILE, ROWS_FILE
    from augsbert.jobs import pretrain, rcl_entropy

    animals = ["cat", "dog", "bird", "fox", "cow", "hen", "owl", "bee", "ant", "elk"]
    places = ["mat", "log", "rock", "roof", "wall", "bench"]
    triples = [(f"the {a} sat on the {p}", f"a {a} rests on a {p}", f"no {animals[(i + 3) % 10]} is near any {p}")
               for i, (a, p) in enumerate((a, p) for a in animals for p in places[:3])]
    triples_file = tmp_path / "nli.tsv"
    triples_file.write_text("anchor\tpositive\tnegative\n" + "".join("\t".join(t) + "\n" for t in triples))
    target = write_target(tmp_path / "target")
    common = {"model": tiny_model, "pooling": "mean", "max_length": 24, "batch_size": 8, "lr": 1e-4,
              "warmup_ratio": 0.0, "weight_decay": 0.0, "scheduler": "constant", "held_out": 0.2,
              "exclude_eval_sentences": True, "seed": 3, "triples": str(triples_file), "triples_digest": "x",
              "eval_batch_size": 16, "group_by_length": False}  # the pretrain spec's resolved grouping, as planned
    entropy_spec = {"stage": "rcl_entropy", "params": {**common, "phi": 0.02, "patience": 3, "eval_steps": 2,
                                                       "max_steps": 4}, "inputs": {"eval": target}}
    entropy_out = tmp_path / "entropy"
    metrics = rcl_entropy.run(entropy_spec, entropy_out, device="cpu")
    n = len(triples)  # 30 rows: 24 train, 6 held out
    assert metrics["rows"] == {"train": 24, "held_out": 6} and metrics["steps"] == 4
    assert metrics["held_out_loss_final"] < metrics["held_out_loss_base"]
    query, document = np.load(entropy_out / QUERY_FILE), np.load(entropy_out / DOCUMENT_FILE)
    width = TINY_BERT["hidden_size"]  # the mean-pooled embedding of the tiny model
    assert query.shape == document.shape == (n, width) and query.dtype == np.float32
    rows = pd.read_parquet(entropy_out / ROWS_FILE)
    assert rows["id"].tolist() == list(range(n)) and (rows["split"] == "train").sum() == 24
    # row i's stored query embedding is the saved entropy model's embedding of row i's anchor
    from sentence_transformers import SentenceTransformer

    saved = SentenceTransformer(str(entropy_out / "model"), device="cpu")
    saved.max_seq_length = 24
    np.testing.assert_allclose(saved.encode([rows["anchor"][5]])[0], query[5], atol=1e-5)

    final_spec = {"stage": "pretrain", "params": {**common, "objective": "rcl", "rcl_phis": [0.02], "max_steps": 2,
                                                  "eval_steps": 2, "selection": "last", "eval_max_length": 24},
                  "inputs": {"data": target, "eval": target, "entropy_0": str(entropy_out)}}
    final = pretrain.run(final_spec, tmp_path / "final", device="cpu")
    assert final["steps"] == 2 and math.isfinite(final["held_out_loss_final"])
    assert (tmp_path / "final" / "model" / "modules.json").is_file()
    other_rows = {**final_spec, "params": {**final_spec["params"], "seed": 4}}  # another split of the triples
    with pytest.raises(DataError, match="other training rows"):
        pretrain.run(other_rows, tmp_path / "final2", device="cpu")
