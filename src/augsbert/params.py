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
A field with a default may be absent from the JSON; a field without one must be present. A field made with
`resolved(default, key)` is read from and written to the JSON under `key` (the name of the option whose resolved
form the planner writes there: the spec keeps its keys, the class one name per concept).

This module is the machinery (reading, checking, the options' schema) and the model identity every stage that
loads a model records (`ModelParams`). The options themselves are declared once, in the stages' options classes
(`augsbert.stages.<stage>`, the shared schedule in `augsbert.stages.training_options`), and a stage's params class
is its options class (or a slice of the classes it copies: `slice_of`) plus what its planning hook adds; a
section's own default of an option it inherits is `restate`d, never redeclared (tests/test_options.py).
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
    # from the class: augsbert.reference.schema)
    SECTION: typing.ClassVar[str] = ""
    SECTION_DESCRIPTION: typing.ClassVar[str] = ""
    # a class made by `slice_of`: the class whose options it copies (their declarations stay there)
    SLICE_OF: typing.ClassVar[type | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _restated_fields(cls)

    @classmethod
    def from_json(cls: type[P], data: dict, where: str = "params") -> P:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        fields = {spec_key(f): f for f in dataclasses.fields(cls)}  # by the name the JSON holds
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
        read = cls(**{fields[key].name: _check(hints[fields[key].name], value, f"{where}.{key}")
                      for key, value in data.items()})
        object.__setattr__(read, "_given", frozenset(data))  # what the spec holds (spec_json)
        return read

    def to_json(self) -> dict:
        """The parameters as JSON values (nested classes as objects), every field (its default where the spec left it
        out). `spec_json` is what the spec held."""
        def plain(value):
            if isinstance(value, Params):
                return value.to_json()
            if isinstance(value, list):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value
        values = {spec_key(f): plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if self.OPEN:
            values.update(values.pop("options"))
        return values

    def spec_json(self) -> dict:
        """The parameters the spec held (and what `replace` changed since), as JSON: what a resume fingerprint is
        made of, so an option added to the class later (read as its default) does not discard a half-done run.
        Parameters made otherwise than by `from_json` hold every field."""
        values = self.to_json()
        given = self.__dict__.get("_given")
        return values if given is None else {k: v for k, v in values.items() if k in given}

    def replace(self: P, **changes) -> P:
        new = dataclasses.replace(self, **changes)
        given = self.__dict__.get("_given")
        if given is not None:
            keys = {f.name: spec_key(f) for f in dataclasses.fields(self)}
            object.__setattr__(new, "_given", given | {keys[name] for name in changes})
        return new

    @classmethod
    def schema_properties(cls) -> dict[str, dict]:
        """The schema properties an options class writes (augsbert.reference.schema): one per option. A class whose
        keys are declared elsewhere too adds them here (`pretrain`: the objectives' own options and choices)."""
        return options_schema(cls, cls.SECTION or cls.__name__)


def resolved(default: Any, key: str) -> Any:
    """A field of a params class that holds what the planner resolved an option to, written in the spec under the
    option's name `key` (a suite spec's `topic` is the topic task found for the dataset): the artifact keys keep
    that name, and the field its own (`topic_task`), so no option's name stands for two types in one class."""
    return field(default=default, metadata={"key": key})


def spec_key(f: dataclasses.Field) -> str:
    """The name field `f` has in a spec's JSON: its own, or the option name a `resolved` field is written under."""
    return f.metadata.get("key", f.name)


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
    return _field(default, meta)


def _field(default: Any, meta: dict) -> Any:
    if default is dataclasses.MISSING:  # a required option (of a nested options object: the schema's `required`)
        return field(metadata=meta)
    if isinstance(default, type) and issubclass(default, Params):
        return field(default_factory=default, metadata=meta)
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


_KEEP = object()


@dataclass(frozen=True)
class Restated:
    """A section's own default (and words, bounds) of an option its class inherits: see `restate`."""

    default: Any
    description: str | None
    schema: dict


def restate(default: Any = _KEEP, description: str | None = None, **schema: Any) -> Any:
    """In an options class's body, without an annotation: the section's own default of an option it inherits (from
    the shared schedule, `augsbert.stages.training_options`), and its own words and bounds where given (the rest as
    declared). The option keeps its type, its `keyed_default` and its place; only a class that declares `SECTION`
    may restate (tests/test_options.py), so a params class never restates its section's default.

        class StudentOptions(TrainingOptions, StudentModelOptions):
            group_by_length = restate(True, "...")
    """
    return Restated(default, description, schema)


def _restated_fields(cls: type) -> None:
    """Turn the `restate(...)` values of `cls`'s body into fields (the inherited option's annotation and metadata,
    with the section's default, words and bounds), before @dataclass reads the body."""
    restated = {name: value for name, value in vars(cls).items() if isinstance(value, Restated)}
    if not restated:
        return
    annotations = cls.__dict__.get("__annotations__")
    if annotations is None:
        annotations = {}
        cls.__annotations__ = annotations
    for name, value in restated.items():
        if name in annotations:
            raise TypeError(f"{cls.__qualname__}.{name}: restate() takes no annotation (the option keeps its type)")
        base = next((b for b in cls.__mro__[1:] if name in getattr(b, "__dataclass_fields__", {})), None)
        if base is None or "description" not in base.__dataclass_fields__[name].metadata:
            raise TypeError(f"{cls.__qualname__}.{name}: restate() is for an option the class inherits")
        inherited = base.__dataclass_fields__[name]
        default = _option_default(inherited) if value.default is _KEEP else value.default
        description = inherited.metadata["description"] if value.description is None else \
            " ".join(value.description.split())
        meta = {**inherited.metadata, "description": description,
                "schema": {**inherited.metadata["schema"], **value.schema}, "restated": True}
        annotations[name] = _hints(base)[name]
        setattr(cls, name, _field(default, meta))


def slice_of(origin: type[P], *names: str, but: tuple[str, ...] = ()) -> type[P]:
    """A base class holding the options `names` of `origin` (or all its options `but` these) as `origin` declares
    them (type, default, words, bounds), in `origin`'s order: what a class that copies some of another's options
    derives from (the gpl stage from the `student` section, the margins from the `teacher`'s; a teacher spec from
    its section but the options that only plan nodes). A planning hook copies them with
    `section_options(<the slice>, section)`. The declarations stay `origin`'s (`SLICE_OF`)."""
    fields = {f.name: f for f in dataclasses.fields(origin)}
    if but:
        names = tuple(f.name for f in option_fields(origin) if f.name not in but)
    unknown = [n for n in (*names, *but) if n not in fields]
    if unknown:
        raise TypeError(f"slice_of({origin.__qualname__}): no option {unknown[0]!r}")
    hints = _hints(origin)
    kept = [n for n in fields if n in names]
    label = ", ".join(kept) if not but else "all but " + ", ".join(but)
    body: dict[str, Any] = {"__annotations__": {n: hints[n] for n in kept}, "SLICE_OF": origin,
                            "__module__": origin.__module__, "__qualname__": f"{origin.__qualname__}[{label}]"}
    for n in kept:
        f = fields[n]
        body[n] = _field(_option_default(f), dict(f.metadata))
    return dataclass(frozen=True, kw_only=True)(type(body["__qualname__"], (Params,), body))


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


def _option_default(f: dataclasses.Field) -> Any:
    """`f`'s default as `option()` takes it (a nested options class as its class), MISSING for none."""
    if not _has_default(f):
        return dataclasses.MISSING
    value = _default(f)
    return type(value) if isinstance(value, Params) else value


def _nested(tp: Any) -> type[Params] | None:
    """The options class of a nested options field's annotation (`X` or `X | None`), else None."""
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) in (typing.Union, types.UnionType) \
        else [tp]
    return args[0] if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Params) else None


def default_of(cls: type, name: str) -> Any:
    """The default `cls` declares for field `name`: what a reader of a spec that leaves the field out (an option
    keyed only when set, a spec planned before the option existed) takes, written once, in the class."""
    return _default({f.name: f for f in dataclasses.fields(cls)}[name])


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
    """The options class of a config section among `params`' bases: the first that declares `SECTION`, or whose
    options a slice among them copies (`slice_of`)."""
    for cls in getattr(params, "__mro__", ()):
        if "SECTION" in vars(cls) and cls.SECTION:
            return cls
        found = section_class(vars(cls).get("SLICE_OF"))
        if found is not None:
            return found
    return None


def section_schema(options: type[Params]) -> dict:
    """The schema of the config section `options.SECTION` (an object of its options, nothing else)."""
    return {"type": "object", "default": {}, "additionalProperties": False,
            "description": " ".join(options.SECTION_DESCRIPTION.split()),
            "properties": options.schema_properties()}


def section_options(options: type[Params], section: dict) -> dict:
    """What a planning hook passes of a config `section` into a spec: each field of `options` (an options class, or
    a slice of one) the section holds, an option declared with `keyed_default=False` only when it is set to another
    value than its default (so keys planned before it existed stay). A new option of the class reaches the spec
    without touching the hook; `Stage.runtime` says which of them stay out of the key."""
    out = {}
    for f in dataclasses.fields(options):
        if f.name not in section:
            continue
        if not f.metadata.get("keyed_default", True):
            default = _default(f)
            if section[f.name] == (default.to_json() if isinstance(default, Params) else default):
                continue
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
