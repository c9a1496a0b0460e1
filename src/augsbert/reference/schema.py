"""The config schema's stage sections, written from the stages' options classes.

A stage's config section is declared once, as an options class in its module (`augsbert.stages.<stage>`): a
`Params` subclass with `SECTION` (the section's name), `SECTION_DESCRIPTION` and fields made with
`augsbert.params.option(default, description, **bounds)`; the stage's params class derives from it. This module
writes each such section into `workflow/schemas/config.schema.yaml` between the lines

    # >>> generated section <name> (...)
    # <<< generated section <name>

so the schema stays one file a user reads, with its hand-written parts (top level, grids) as they are. A section
without its block yet goes at the end of `stage_options` (before `# <<< stage sections`).

An experiment's own keys among its stage options (`base_model`, `models`, ...: `augsbert.stages.runs.
ExperimentOptions`) are no section but properties of `stage_options` itself: written the same way, between

    # >>> generated properties experiment (...)
    # <<< generated properties experiment

(and one of a teacher ensemble's members, `$defs.teacher_member`: the teacher options it may override, each
nullable, with the bounds of the `teacher` section's).

A dataset definition (`$defs.dataset`) is written whole from the classes of `augsbert.config.datasets` and the
loaders' registry, between

    # >>> generated definition dataset (...)
    # <<< generated definition dataset

its keys of every loader from `DatasetOptions` (the `loader` enum: the registry's names), then one
`if: {loader: X} then: properties` block per options class declaring options of its own, in the registry's
order (a base class several loaders' classes derive from, BWS' `path`: one block for them, `enum` of their names).

    python -m augsbert.reference.schema --write   # or: make schema
    python -m augsbert.reference.schema --check   # exit 1 when the checked-in file is stale (tests/test_schema_gen.py)
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING
import re
import sys
from pathlib import Path

import yaml

from ..config.datasets import DatasetOptions
from ..data.loaders import LOADERS
from ..params import Params, option_fields, options_schema, section_class, section_schema, slice_of
from ..stages import REGISTRY
from ..stages.runs import ExperimentOptions
from ..stages.teacher import TeacherMemberOptions

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
REGENERATE = "python -m augsbert.reference.schema --write"
_BEGIN = "# >>> generated {kind} {name} ({cls}; edit the class, then `make schema`)"
_END = "# <<< generated {kind} {name}"
_NEW = "# <<< stage sections"
_BLOCK = re.compile(r"^(?P<indent> *)# >>> generated (?P<kind>section|properties|definition) (?P<name>\w+) "
                    r".*?^(?P=indent)# <<< generated (?P=kind) (?P=name)\n", re.S | re.M)
# blocks of properties written from a class where their marker lines stand: `experiment` straight into
# `stage_options.properties`, `teacher_member` into `$defs.teacher_member.properties` {block name: options class}
PROPERTIES: dict[str, type[Params]] = {"experiment": ExperimentOptions, "teacher_member": TeacherMemberOptions}


def own_options(cls: type[Params]) -> list[str]:
    """The options `cls` declares itself (not those of a base class)."""
    inherited = {name for base in cls.__mro__[1:] for name in getattr(base, "__dataclass_fields__", {})}
    return [f.name for f in option_fields(cls) if f.name not in inherited]


def loader_blocks(loaders: dict | None = None) -> list[tuple[list[str], type[Params]]]:
    """(loaders, options class) of each `if loader ... then` block of `$defs.dataset`: every class in a loader's
    options class's ancestry (bases first) that declares options of its own, once, in the registry's order, with
    the loaders whose options class is it or derives from it."""
    loaders = LOADERS if loaders is None else loaders
    for name, loader in loaders.items():
        options = getattr(loader, "options_class", None)
        if not (isinstance(options, type) and issubclass(options, Params)):
            raise ValueError(f"loader {name!r} ({type(loader).__name__}) names no options class (`options_class`: "
                             "a Params subclass of augsbert.config.datasets)")
    blocks: list[tuple[list[str], type[Params]]] = []
    for loader in loaders.values():
        for cls in reversed(loader.options_class.__mro__):
            if isinstance(cls, type) and issubclass(cls, Params) and cls is not Params and own_options(cls) \
                    and all(cls is not seen for _, seen in blocks):
                blocks.append(([n for n, other in loaders.items() if issubclass(other.options_class, cls)], cls))
    return blocks


def dataset_schema(loaders: dict | None = None) -> dict:
    """`$defs.dataset`: a dataset definition's schema, from `DatasetOptions` and the loaders' options classes."""
    loaders = LOADERS if loaders is None else loaders
    properties = options_schema(DatasetOptions, "datasets.<name>")
    properties["loader"] = {"type": "string", "enum": list(loaders),
                            **{k: v for k, v in properties["loader"].items() if k != "type"}}
    branches = []
    for names, cls in loader_blocks(loaders):
        own = slice_of(cls, *own_options(cls))
        required = [f.name for f in option_fields(own)
                    if f.default is MISSING and f.default_factory is MISSING]
        condition = {"const": names[0]} if len(names) == 1 else {"enum": names}
        branches.append({"if": {"properties": {"loader": condition}},
                         "then": {**({"required": required} if required else {}),
                                  "properties": options_schema(own, f"datasets.<name> ({' / '.join(names)})")}})
    return {"type": "object", "description": " ".join(DatasetOptions.SECTION_DESCRIPTION.split()),
            "required": [f.name for f in option_fields(DatasetOptions)
                         if f.default is MISSING and f.default_factory is MISSING],
            "unevaluatedProperties": False, "properties": properties, "allOf": branches}


# definitions of `$defs` written whole {name: what writes it}
DEFINITIONS = {"dataset": (dataset_schema, "augsbert.config.datasets, and each loader's `options_class`")}


def section_classes() -> dict[str, type[Params]]:
    """{section: options class} of every registered stage whose params class derives from a section's class."""
    found: dict[str, type[Params]] = {}
    for stage in REGISTRY.values():
        cls = section_class(stage.params)
        if cls is None:
            continue
        if found.setdefault(cls.SECTION, cls) is not cls:
            raise ValueError(f"config section {cls.SECTION!r} declared by two classes: "
                             f"{found[cls.SECTION].__qualname__} and {cls.__qualname__}")
    return found


class _Dumper(yaml.SafeDumper):
    """Long texts (descriptions) folded (`>`), as a person writes them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = ">" if len(value) > 60 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _block(name: str, cls, indent: str, kind: str = "section") -> str:
    """A section (`{name: its schema}`), a block of properties (`cls`'s options, each a key) or a definition
    (`{name: its schema}`, `cls` = (what writes it, what the marker names)) with its marker lines."""
    if kind == "definition":
        write, owner = cls
        data = {name: write()}
    else:
        owner = f"{cls.__module__}.{cls.__qualname__}"
        data = {name: section_schema(cls)} if kind == "section" else cls.schema_properties()
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)
    lines = [_BEGIN.format(kind=kind, name=name, cls=owner),
             *body.splitlines(), _END.format(kind=kind, name=name)]
    return "".join(f"{indent}{line}\n" if line else "\n" for line in lines)


def render(text: str, classes: dict[str, type[Params]] | None = None) -> str:
    """`text` (the schema file) with every generated section and block of properties written from its class."""
    classes = section_classes() if classes is None else classes
    seen = set()
    blocks = set()

    def replace(match: re.Match) -> str:
        kind, name = match["kind"], match["name"]
        owners = {"section": classes, "properties": PROPERTIES, "definition": DEFINITIONS}[kind]
        if name not in owners:
            raise ValueError(f"{SCHEMA_FILE.name}: generated {kind} {name!r} has no options class any more "
                             "(remove its block, or declare the class)")
        if kind == "section":
            seen.add(name)
        else:
            blocks.add((kind, name))
        return _block(name, owners[name], match["indent"], kind)

    text = _BLOCK.sub(replace, text)
    missing = [(kind, name) for kind, names in (("properties", PROPERTIES), ("definition", DEFINITIONS))
               for name in names if (kind, name) not in blocks]
    if missing:  # where an experiment's keys (or a definition) stand is written by hand, once
        kind, name = missing[0]
        raise ValueError(f"{SCHEMA_FILE.name}: no lines `{_BEGIN.split(' (')[0].format(kind=kind, name=name)}"
                         f" (...)` and `{_END.format(kind=kind, name=name)}` where its {kind} goes")
    new = [name for name in classes if name not in seen]
    if new:
        marker = re.search(rf"^(?P<indent> *){re.escape(_NEW)}\n", text, re.M)
        if marker is None:
            raise ValueError(f"{SCHEMA_FILE.name}: no `{_NEW}` line to add sections {new} before")
        added = "".join(_block(name, classes[name], marker["indent"]) for name in new)
        text = text[:marker.start()] + added + text[marker.start():]
    return text


def check_mode(argv: list[str] | None, prog: str, doc: str, written: str) -> bool:
    """The command line of a generated file's writer (`prog`, its module's `doc`): `--write` (False) or `--check`
    (True), one of them; `written`: what it writes."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"rewrite {written}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {written} differs from what it would write")
    return parser.parse_args(argv).check


def check_or_write(path: Path, fresh: str, text: str | None, check: bool, what: str, regenerate: str) -> int:
    """A checked-in generated file (`what` of `path`: its generated part) against its render `fresh`: `check`, exit
    status 1 and a line naming the command when it differs; else write it where it differs."""
    if check:
        if fresh != text:
            print(f"{path}: {what} stale; run `{regenerate}` (or `make schema`)", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        path.write_text(fresh, encoding="utf-8")
        print(f"{path}: {what} written")
    return 0


def main(argv: list[str] | None = None) -> int:
    check = check_mode(argv, "python -m augsbert.reference.schema", __doc__, "the schema's generated sections")
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    return check_or_write(SCHEMA_FILE, render(text), text, check, "stage sections", REGENERATE)


if __name__ == "__main__":
    sys.exit(main())
