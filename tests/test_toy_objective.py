"""A worked example: a new pre-training objective with one option is two files (docs/development.md).

The test writes exactly the two files a developer would add, under the package names they would have:

- `augsbert/objectives/toy.py`: the entry (columns, pooling, in-batch negatives, options class,
  loss) and its options class, whose one field carries the option's default, description and bounds;
- `augsbert/losses/toy.py`: the loss class, in sentence-transformers' losses/ style.

In a copy of the project, with the two files written there, `make schema` (`python -m augsbert.reference.schema
--write`) writes the option into the schema's `pretrain` section (the check says it is stale before); no other
file is edited. The test shows that the option is then in the schema with its description, that the config is
checked against it and that the option enters the pretrain node's key only when the objective is chosen. The same
two files, written to temporary folders added to the two packages' `__path__` here (the registry lists its
package's modules), show that the job reads the planned spec through the options class, and the loss's exact
value.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import augsbert.losses as losses_package
import augsbert.objectives as objectives
from augsbert.config.schema import load_schema
from augsbert.params import read_params
from augsbert.stages.pretrain import PretrainParams
from augsbert.training.pretrain import build_encoder
from workflow_helpers import checkout

ENTRY = '''
    """`toy`: pulls each anchor towards its positive until their cosine reaches the margin (an example)."""

    from __future__ import annotations

    from dataclasses import dataclass

    from ..params import Params
    from .base import Objective, load, option


    @dataclass(frozen=True, kw_only=True)
    class ToyOptions(Params):
        toy_margin: float = option(0.5, "`toy`: the cosine each anchor and its positive should reach.",
                                   minimum=0, maximum=2)


    @dataclass(frozen=True)
    class Toy(Objective):
        def build(self, model, params, head_source: str):
            return load(self.loss)(model, margin=params.toy_margin)


    ENTRIES = (Toy("toy", ("anchor", "positive"), "mean", False, ToyOptions, "augsbert.losses.toy:ToyLoss"),)
'''

LOSS = '''
    """The toy objective's loss (augsbert.objectives.toy)."""

    from __future__ import annotations

    from collections.abc import Iterable
    from typing import Any

    import torch
    from torch import Tensor, nn


    class ToyLoss(nn.Module):
        """A hinge on the cosine of each (anchor, positive) pair: mean_i max(0, margin - cos(f(a_i), f(p_i))).

        Inputs: (anchor, positive) text pairs. No labels.
        """

        def __init__(self, model, margin: float = 0.5) -> None:
            super().__init__()
            self.model = model
            self.margin = margin

        def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
            anchors, positives = (self.model(f)["sentence_embedding"] for f in sentence_features)
            return torch.relu(self.margin - nn.functional.cosine_similarity(anchors, positives)).mean()

        def get_config_dict(self) -> dict[str, Any]:
            return {"margin": self.margin}

        @property
        def citation(self) -> str:
            return "@misc{toy, title={A toy objective}, note={the worked example of docs/development.md}}"
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The two files of the toy objective, registered as a real one is: by being in the registry's package."""
    entries, losses = tmp_path / "objectives", tmp_path / "losses"
    entries.mkdir()
    losses.mkdir()
    written = [entries / "toy.py", losses / "toy.py"]
    written[0].write_text(textwrap.dedent(ENTRY))
    written[1].write_text(textwrap.dedent(LOSS))
    monkeypatch.setattr(objectives, "__path__", [*objectives.__path__, str(entries)])
    monkeypatch.setattr(losses_package, "__path__", [*losses_package.__path__, str(losses)])
    objectives.discover()
    yield written
    monkeypatch.undo()
    for name in ("augsbert.objectives.toy", "augsbert.losses.toy"):
        sys.modules.pop(name, None)
    objectives.discover()


# run in the project copy, after `make schema`: the schema's option, the config's check, the pretrain nodes' keys
CHECK = '''
import json
from augsbert.config.load import deep_merge, prepare_config, read_config
from augsbert.config.schema import load_schema
from augsbert.errors import ConfigError
from augsbert.plan import Plan

def pretrain_key(pretrain):
    raw = read_config("config/config.yaml")
    raw["grids"] = {}
    plan = Plan(prepare_config(deep_merge(raw, {"experiments": {"x": {"dataset": "lee", "pretrain": pretrain}}}),
                               lazy=True))
    node = plan.node(plan.experiment("x").runs[42]["pretrained"])
    return [node.key, node.params]

try:
    pretrain_key({"objective": "toy", "toy_margin": 3})
    refused = ""
except ConfigError as err:
    refused = str(err)
pretrain = load_schema()["$defs"]["stage_options"]["properties"]["pretrain"]["properties"]
print(json.dumps({"choices": pretrain["objective"]["enum"], "option": pretrain["toy_margin"], "refused": refused,
                  "chosen": pretrain_key({"objective": "toy", "toy_margin": 0.25}),
                  "default": pretrain_key({"objective": "toy"}), "simcse": pretrain_key({"objective": "simcse"}),
                  "simcse_set": pretrain_key({"objective": "simcse", "toy_margin": 0.25})}))
'''


def test_a_toy_objective_is_two_files_and_works_end_to_end(toy, tiny_model, tmp_path):
    assert len(toy) == 2 and all(path.is_file() for path in toy)
    # the developer's steps in a copy of the project: the two files, then `make schema`
    root = checkout(tmp_path / "project", ("workflow", "config", "src"))
    (root / "src" / "augsbert" / "objectives" / "toy.py").write_text(textwrap.dedent(ENTRY))
    (root / "src" / "augsbert" / "losses" / "toy.py").write_text(textwrap.dedent(LOSS))
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "HF_HUB_OFFLINE": "1"}

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)

    stale = python("-m", "augsbert.reference.schema", "--check")
    assert stale.returncode == 1 and "make schema" in stale.stderr
    for args in (("-m", "augsbert.reference.schema", "--write"), ("-c", CHECK)):
        proc = python(*args)
        assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.splitlines()[-1])
    # the option is in the written schema, with its bounds and description; the objective is a choice
    assert "toy" in found["choices"]
    assert found["option"] == {"type": "number", "minimum": 0, "maximum": 2, "default": 0.5,
                               "description": "`toy`: the cosine each anchor and its positive should reach."}
    # the config is checked against it
    assert "toy_margin" in found["refused"] and "3 is greater than the maximum of 2" in found["refused"]
    # it enters the key of the objective that reads it, at its default too, and no other objective's key
    (chosen_key, chosen), (default_key, default) = found["chosen"], found["default"]
    assert chosen["objective"] == "toy" and chosen["toy_margin"] == 0.25 and default["toy_margin"] == 0.5
    assert chosen_key != default_key
    (simcse_key, simcse), (simcse_set_key, _) = found["simcse"], found["simcse_set"]
    assert "toy_margin" not in simcse and simcse_set_key == simcse_key
    # the job reads the planned spec through its options class, and the entry builds the loss with it
    params = read_params(PretrainParams, {"params": {**chosen, "model": tiny_model}})
    assert params.options == objectives.OBJECTIVES["toy"].options(toy_margin=0.25) and params.toy_margin == 0.25
    model = build_encoder(tiny_model, params.pooling, 16, "cpu")
    loss = objectives.build_loss("toy", model, params, tiny_model)
    assert type(loss).__name__ == "ToyLoss" and loss.margin == 0.25 and "toy" in loss.citation
    # its exact value on a tiny batch: cos = 1, 0 and -1 against the margin 0.25
    fixed = lambda features: {"sentence_embedding": features["emb"]}  # noqa: E731  (a stand-in encoder)
    anchors = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    positives = torch.tensor([[2.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    value = objectives.build_loss("toy", fixed, params, "")([{"emb": anchors}, {"emb": positives}])
    assert math.isclose(float(value), (0.0 + 0.25 + 1.25) / 3, abs_tol=1e-7)
    # and on the tiny model: the hinge of the cosines of its own embeddings
    texts = ["a cat sat on the mat", "a dog ran in the park"]
    batch = [model.tokenize(texts[:1] * 2), model.tokenize(texts)]
    with torch.no_grad():
        value = loss(batch)
        a, p = (model(dict(b))["sentence_embedding"] for b in batch)
    expected = torch.relu(0.25 - torch.nn.functional.cosine_similarity(a, p)).mean()
    assert torch.equal(value, expected)


def test_without_the_files_the_registry_and_schema_are_as_shipped():
    assert "toy" not in objectives.OBJECTIVES
    assert "toy_margin" not in load_schema()["$defs"]["stage_options"]["properties"]["pretrain"]["properties"]
