"""The `pretrain` stage's typed params (augsbert.params), shared by its planning, its trainer and the losses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..params import Params, TrainingParams
from .objectives import entry


@dataclass(frozen=True, kw_only=True)
class PretrainParams(TrainingParams):
    """The `pretrain` stage's params: the `pretrain` section as `pretraining.objectives.resolved` leaves it: the
    schedule filled from the preset, and only the options the objective (and SimCSE variant) reads. The spec is
    flat; the objective's options are its entry's options class (`options`), read as attributes here too.

    `eval_batch_size` / `eval_max_length` encode the target's dev split (checkpoint selection and the
    results row), as the zero-shot row does; `regulators` is set by the job (RCL: its entropy inputs).
    """

    objective: str
    preset: str | None = None  # the preset the plan filled the schedule from (the job reads the schedule)
    max_steps: int
    scheduler: str
    warmup_steps: int | None = None  # set: the warm-up in steps (seed 000's 910), in place of warmup_ratio
    optimizer: Literal["adamw", "rmsprop"] = "adamw"  # rmsprop: the `ct` preset (TSDAE App. B)
    pooling: Literal["cls", "mean"]
    pool: Literal["all", "train", "unlabeled", "train+unlabeled"] = "all"
    exclude_eval_sentences: bool
    held_out: float
    eval_steps: int
    eval_max_length: int | None = None  # None: the trained max_length
    selection: Literal["target_dev", "held_out_loss", "last"]
    triples: str | list[str] | None = None
    triples_digest: str | list[str] | None = None
    triples_format: Literal["triples", "nli"] | None = None
    options: Params | None = None  # the objective's own options (its entry's options class), read from the same level
    regulators: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict, where: str = "params") -> PretrainParams:
        """The flat spec: the objective's options are read (and checked) by its entry's options class."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        options = entry(data.get("objective")).options
        own = {f.name for f in dataclasses.fields(options)}
        unknown = sorted(set(data) - own - {f.name for f in dataclasses.fields(cls)})
        if unknown:  # an option of another objective, or of no version of the stage
            raise ConfigError(f"{where}: unknown parameter {unknown[0]!r} for objective {data['objective']!r} "
                              "(written by another version of the stage? plan it again)")
        common = super().from_json({k: v for k, v in data.items() if k not in own}, where)
        return common.replace(options=options.from_json({k: v for k, v in data.items() if k in own}, where))

    def to_json(self) -> dict:
        values = super().to_json()
        values.update(values.pop("options") or {})
        return values

    def __getattr__(self, name: str):
        # only for names the class lacks: the objective's options read as `params.temperature`
        options = self.__dict__.get("options")
        if options is not None and name in options.__dataclass_fields__:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__} of objective {self.__dict__.get('objective')!r} has no {name!r}")
