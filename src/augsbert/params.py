"""Typed stage parameters: the `params` of a stage spec as a frozen dataclass, checked when it is read.

A stage declares its parameters as a subclass of `Params` beside its declaration
(`augsbert.stages.<module>`); the job reads them with `Spec.read(spec)` (or `<Class>.from_json`) and
its code uses attributes (`params.lr`), so a misspelt name fails when the module is imported or
linted, not in the middle of a run. Reading checks every value against the field's annotation and
refuses unknown and missing names, naming the spec and the parameter: a spec written by another
version of a stage, or edited by hand, stops before anything is computed.

The planning hooks still write plain JSON (the artifact keys are made from it, and stay unchanged);
a test plans the shipped config and reads every spec back through its stage's class, so the two
cannot drift.

Annotations understood: int, float (an int is accepted and converted), bool, str, `X | None`,
`list[X]`, `dict[str, X]`, `Literal[...]`, `Any`, and nested `Params` classes.
A field with a default may be absent from the JSON; a field without one must be present.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
import types
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from .errors import ConfigError

P = TypeVar("P", bound="Params")

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _describe(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _check(tp: Any, value: Any, where: str) -> Any:
    """`value` as annotation `tp` says (ints become floats where a float is asked), or a ConfigError."""
    if tp is Any:
        return value
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _check(option, value, where)
            except ConfigError as err:
                errors.append(err)
        raise errors[-1] if len(options) == 1 else ConfigError(
            f"{where}: expected {_describe(tp)}, got {type(value).__name__} {_short(value)}")
    if origin is Literal:
        if value in args and not isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected one of {', '.join(map(repr, args))}, got {_short(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {_short(value)}")
        return [_check(args[0] if args else Any, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected an object, got {type(value).__name__} {_short(value)}")
        item = args[1] if args else Any
        return {k: _check(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Params):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected an object, got {type(value).__name__} {_short(value)}")
        return tp.from_json(value, where)
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp in (bool, str):
        if isinstance(value, tp):
            return value
    else:
        raise TypeError(f"unsupported annotation {tp!r} at {where}")
    raise ConfigError(f"{where}: expected {_describe(tp)}, got {type(value).__name__} {_short(value)}")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True, kw_only=True)
class Params:
    """Base of the stages' parameter classes (frozen, keyword-only dataclasses).

    A class with `OPEN = True` keeps names it does not declare in its `options` field (a dict) instead
    of refusing them: the data stage, whose loaders each take their own options (the config schema
    checks those, per loader).
    """

    OPEN: typing.ClassVar[bool] = False
    # an options class of a config section: the section's name and description (the schema's section is written
    # from the class: augsbert.face.schema)
    SECTION: typing.ClassVar[str] = ""
    SECTION_DESCRIPTION: typing.ClassVar[str] = ""

    @classmethod
    def from_json(cls: type[P], data: dict, where: str = "params") -> P:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if cls.OPEN:
            data = {**{k: v for k, v in data.items() if k not in unknown}, "options": {k: data[k] for k in unknown}}
        elif unknown:
            raise ConfigError(f"{where}: unknown parameter {unknown[0]!r} for {cls.__name__} (written by another "
                              "version of the stage? plan it again)")
        missing = [name for name, f in fields.items() if name not in data
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(f"{where}: missing parameter {missing[0]!r} for {cls.__name__}")
        hints = _hints(cls)
        return cls(**{name: _check(hints[name], value, f"{where}.{name}") for name, value in data.items()})

    def to_json(self) -> dict:
        """The parameters as JSON values (nested classes as objects)."""
        def plain(value):
            if isinstance(value, Params):
                return value.to_json()
            if isinstance(value, list):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value
        values = {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if self.OPEN:
            values.update(values.pop("options"))
        return values

    def replace(self: P, **changes) -> P:
        return dataclasses.replace(self, **changes)

    @classmethod
    def schema_properties(cls) -> dict[str, dict]:
        """The schema properties an options class writes (augsbert.face.schema): one per option. A class whose
        keys are declared elsewhere too adds them here (`pretrain`: the objectives' own options and choices)."""
        return options_schema(cls, cls.SECTION or cls.__name__)


def override_schema(prop: dict, description: str) -> dict:
    """An option's schema `prop` as an override of it (null, the default, = the option's value): its types and
    enum with null added, its bounds kept, `description` in place of its own (e.g. `See teacher.lr.`)."""
    prop = {k: v for k, v in prop.items() if k not in ("default", "description")}
    types_ = prop.get("type", [])
    types_ = [types_] if isinstance(types_, str) else list(types_)
    if types_ and "null" not in types_:
        prop["type"] = [*types_, "null"]
    if "enum" in prop and None not in prop["enum"]:
        prop["enum"] = [*prop["enum"], None]
    return {**prop, "default": None, "description": description}


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def option(default: Any, description: str, *, keyed_default: bool = True, **schema: Any) -> Any:
    """A field of an options class: its default, its schema description and bounds (minimum, enum, items, ...).

    `keyed_default=False`: the option enters the artifact key only when set to another value than the default
    (an option added after keys were planned: runs that do not set it keep their keys).

    A nested options class (a `Params` subclass whose fields are options) as `default`: the option is an object
    of those options (schema default `{}`: each nested option's default fills it)."""
    meta = {"description": " ".join(description.split()), "schema": schema, "keyed_default": keyed_default}
    if default is dataclasses.MISSING:  # a required option (of a nested options object: the schema's `required`)
        return field(metadata=meta)
    if isinstance(default, type) and issubclass(default, Params):
        return field(default_factory=default, metadata=meta)
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def _json_type(tp: Any) -> tuple[list[str], list | None, dict | None]:
    """(JSON types, enum or None, items schema or None) of a field annotation."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        types_, enum, items = [], None, None
        for arg in args:
            if arg is type(None):
                types_.append("null")
                enum = None if enum is None else [*enum, None]
                continue
            t, enum, items = _json_type(arg)
            types_ += t
        return types_, enum, items
    if origin is Literal:
        return ["string"], list(args), None
    if origin is list:
        item_types, item_enum, _ = _json_type(args[0]) if args else ([], None, None)
        items = {"enum": item_enum} if item_enum is not None else {"type": item_types[0]}
        return ["array"], None, items
    if origin is dict or tp is dict:
        return ["object"], None, None
    return [_JSON_TYPES[tp]], None, None


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _default(f: dataclasses.Field) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


def _nested(tp: Any) -> type[Params] | None:
    """The options class of a nested options field's annotation (`X` or `X | None`), else None."""
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) in (typing.Union, types.UnionType) \
        else [tp]
    return args[0] if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Params) else None


def option_fields(options: type[Params]) -> list[dataclasses.Field]:
    """The fields of `options` made with `option()` (a params class also holds what its planning hook adds)."""
    return [f for f in dataclasses.fields(options) if "description" in f.metadata]


def options_schema(options: type[Params], section: str = "pretrain") -> dict[str, dict]:
    """The schema properties of an options class's fields (type, enum and items from the annotation; the
    description, default and bounds from `option()`), in declaration order. Every field must be an option:
    every config key has a description (the reference is made from them)."""
    hints = get_type_hints(options)
    properties = {}
    for f in dataclasses.fields(options):
        if "description" not in f.metadata:
            raise ValueError(f"{section}.{f.name}: declare it with option(default, description, ...) in "
                             f"{options.__qualname__}")
        nested = _nested(hints[f.name])
        if nested is not None:  # an object of options (or null, its default null): written from its class
            default = None if f.default is None else {}
            required = [g.name for g in dataclasses.fields(nested) if not _has_default(g)]
            properties[f.name] = {"type": "object" if default == {} else ["object", "null"], **f.metadata["schema"],
                                  "default": default, "additionalProperties": False,
                                  **({"required": required} if required else {}),
                                  "description": f.metadata["description"],
                                  "properties": options_schema(nested, f"{section}.{f.name}")}
            continue
        types_, enum, items = _json_type(hints[f.name])
        if enum is not None and "null" in types_ and None not in enum:
            enum = [*enum, None]
        prop: dict[str, Any] = {} if "$ref" in f.metadata["schema"] else {  # a $ref (e.g. #/$defs/seed) says it
            "type": types_[0] if len(types_) == 1 else types_}
        if enum is not None:
            prop["enum"] = enum
        if items is not None:
            prop["items"] = items
        prop.update(f.metadata["schema"])
        if _has_default(f):
            prop["default"] = _default(f)
        prop["description"] = f.metadata["description"]
        properties[f.name] = prop
    return properties


def section_class(params: type | None) -> type[Params] | None:
    """The options class of a config section among `params`' bases: the one that declares `SECTION`."""
    for cls in getattr(params, "__mro__", ()):
        if "SECTION" in vars(cls) and cls.SECTION:
            return cls
    return None


def section_schema(options: type[Params]) -> dict:
    """The schema of the config section `options.SECTION` (an object of its options, nothing else)."""
    return {"type": "object", "default": {}, "additionalProperties": False,
            "description": " ".join(options.SECTION_DESCRIPTION.split()),
            "properties": options.schema_properties()}


def section_options(options: type[Params], section: dict) -> dict:
    """What a planning hook passes of a config `section` into a spec: each option of `options` the section holds,
    an option declared with `keyed_default=False` only when it is set to another value than its default (so
    keys planned before it existed stay). A new option of the class reaches the spec without touching the hook;
    `Stage.runtime` says which of them stay out of the key."""
    out = {}
    for f in option_fields(options):
        default = _default(f)
        default = default.to_json() if isinstance(default, Params) else default
        if f.name in section and (f.metadata["keyed_default"] or section[f.name] != default):
            out[f.name] = section[f.name]
    return out


def read_params(cls: type[P], spec: dict, where: str = "spec") -> P:
    """The `params` of a stage `spec` as `cls`, checked (a ConfigError names the spec and the parameter)."""
    return cls.from_json(spec.get("params"), f"{where} params")


# The description of `torch_compile`, an option of each section that trains a model (one text for all of them)
TORCH_COMPILE = """
        Train the model compiled by `torch.compile` (PyTorch's inductor backend; sequence lengths vary,
        so after the first recompile the compiled code takes any length). Off by default: compiling
        costs time before the first step and changes results in the last float digits; what it gains
        depends on the GPU and the model (`benchmarks/bench_overhead.py --torch-compile` measures it).
        Enters the artifact key only when set."""


# What several stages share. A stage's class lists every parameter its planning hook can write: the
# config section it copies (the schema says each option) plus what the hook adds.

@dataclass(frozen=True, kw_only=True)
class ModelParams(Params):
    """A stage that loads a model: its reference (path, alias or hub id) and what the plan recorded of it."""

    model: str
    model_identity: dict[str, str] = field(default_factory=dict)  # what enters the key for `model` (by content)
    hub_revisions: dict[str, str] = field(default_factory=dict)  # ref -> the revision the config pins
    config_kwargs: dict[str, Any] | None = None  # model config overrides (for tests and standalone specs)


@dataclass(frozen=True, kw_only=True)
class SeedOptimization(Params):
    """Thesis 5.1: `trials` seeds each train `fraction` of an epoch; the best on dev trains fully (0: off). The
    options of the `seed_optimization` object of a training section (augsbert.stages.training_options)."""

    trials: int = option(0, "Number of seeds tried (thesis 10).", minimum=0)
    fraction: float = option(0.3, "Fraction of the first epoch each trial trains.", exclusiveMinimum=0, maximum=1)


@dataclass(frozen=True, kw_only=True)
class TrainingParams(ModelParams):
    """The optimiser schedule every trained stage has."""

    batch_size: int
    lr: float
    warmup_ratio: float
    weight_decay: float = 0.0
    max_length: int
    seed: int
    checkpoint_steps: int = 500
    eval_batch_size: int = 64
    group_by_length: bool = False
    megabatch: int = 50  # length-grouped batches: sentences sorted within chunks of `megabatch` batches
    topic_prompt: str | None = None  # the topic delimiter when the texts carry topic prompts (thesis 4.4)
    torch_compile: bool = False  # train the compiled model (teacher, student, adapt_mlm, pretrain); keyed when set


@dataclass(frozen=True, kw_only=True)
class PairTrainingParams(TrainingParams):
    """What fitting a pair model reads (augsbert.training.pairs.fit), for every architecture; the teacher's
    and the student's classes (augsbert.stages.teacher, augsbert.stages.student) add what their stage reads, and
    their options classes come first among their bases, so a spec without an option reads its section's default
    (the defaults here serve direct use: tests, benchmarks).

    `loss` and its options: a Cross-Encoder's `bce` (default) or `mse`, with its `activation`; a
    Bi-Encoder's `cosine` (default), `cosent`, `angle`, `mnrl` or `margin_mse`, with the options that loss
    reads (the planner drops the others: None here).
    """

    epochs: int
    max_steps: int | None = None  # set: optimizer steps instead of epochs (student.max_steps, thesis 5.4.3)
    freeze_embeddings: bool = False
    seed_optimization: SeedOptimization = field(default_factory=SeedOptimization)
    early_stopping_patience: int = 0  # epochs without a better dev Spearman before training stops; 0 = off
    loss: str | None = None
    activation: Literal["sigmoid", "tanh", "identity"] = "sigmoid"
    scale: float | None = None
    positive_threshold: float | None = None
    hard_negatives: bool = False
    negative_threshold: float | None = None
    similarity: Literal["cos", "dot"] = "cos"  # margin_mse / kl_div: the student's score (keyed only when dot)
