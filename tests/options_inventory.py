"""Where each stage option's default is written (issue 59): an inventory, printed, not a test (yet).

    PYTHONPATH=src python tests/options_inventory.py            # the summary and every finding
    PYTHONPATH=src python tests/options_inventory.py --brief    # the summary only

1. Declarations. For every registered stage, the classes of its params class's ancestry (the dataclasses of its
   MRO) that declare a field in their own body. A (stage, field) declared in two or more of them is listed with
   what each declaration says: its default (a default_factory is called), its annotation, and, for an option
   (`augsbert.params.option`), its description and schema bounds. Such a pair "differs" when any of these
   differ between its declarations (an option redeclared as a plain field counts: its description is gone).
2. Defaults restated in code. Calls in `src/augsbert` that name a stage option and give it a default of their own:
   `getattr(x, "<option>", <default>)`, `x.get("<option>", <default>)` and `x.pop("<option>", <default>)`, and
   `<literal> if <option> is None else <option>` (or the reverse). Each is printed with the default every class
   declaring that option gives it, so a restated value that disagrees shows.

The refactor's acceptance test ("a test lists every (stage, option) and fails when one is declared in two classes
or a default is written outside its class") can import `declarations()` and `restated_defaults()` from here.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from augsbert.params import Params, section_class
from augsbert.stages import REGISTRY

SRC = Path(__file__).resolve().parents[1] / "src" / "augsbert"
_NO_DEFAULT = "<required>"


@dataclasses.dataclass(frozen=True)
class Declaration:
    cls: str  # module.qualname of the declaring class
    default: Any
    annotation: str
    description: str | None  # None: a plain field (not an option)
    schema: str

    def facts(self) -> tuple:
        return (_fmt(self.default), self.annotation, self.description, self.schema)


def _fmt(value: Any) -> str:
    if isinstance(value, Params):
        return f"{type(value).__name__}()"
    return repr(value)


def _own_field(cls: type, name: str) -> Declaration:
    annotation = cls.__dict__["__annotations__"][name]
    value = cls.__dataclass_fields__[name]  # a field the class body declares: its own Field, not the inherited one
    meta = dict(value.metadata)
    if value.default is not dataclasses.MISSING:
        default = value.default
    elif value.default_factory is not dataclasses.MISSING:
        default = value.default_factory()
    else:
        default = _NO_DEFAULT
    return Declaration(f"{cls.__module__}.{cls.__qualname__}", default, str(annotation),
                       meta.get("description"), repr(meta.get("schema", {})))


def ancestry(params: type) -> list[type]:
    """The dataclasses of `params`'s MRO that declare fields in their own body, most derived first."""
    return [c for c in params.__mro__ if dataclasses.is_dataclass(c) and c.__dict__.get("__annotations__")]


def declarations() -> dict[tuple[str, str], list[Declaration]]:
    """(stage, field) -> its declarations in the stage's params class's ancestry, most derived first (the one
    that wins first)."""
    out: dict[tuple[str, str], list[Declaration]] = {}
    for stage in REGISTRY.values():
        if stage.params is None:
            continue
        by_field: dict[str, list[Declaration]] = defaultdict(list)
        for cls in ancestry(stage.params):
            for name in cls.__dict__["__annotations__"]:
                if name.isupper():  # SECTION, SECTION_DESCRIPTION: class constants, not fields
                    continue
                by_field[name].append(_own_field(cls, name))
        for name, found in by_field.items():
            out[(stage.name, name)] = found
    return out


def differences(found: list[Declaration]) -> list[str]:
    """What differs between a field's declarations: default, type, description (or option vs plain), bounds."""
    what = []
    for label, index in (("default", 0), ("type", 1), ("description", 2), ("bounds", 3)):
        if len({d.facts()[index] for d in found}) > 1:
            what.append(label)
    return what


def option_defaults() -> dict[str, set[str]]:
    """Option name -> the defaults written for it by any declaring class of any stage (as printed)."""
    out: dict[str, set[str]] = defaultdict(set)
    for (_, name), found in declarations().items():
        for d in found:
            out[name].add(_fmt(d.default))
    for stage in REGISTRY.values():  # a section's options its params class does not carry (the suite's resolved ones)
        section = section_class(stage.params)
        for f in dataclasses.fields(section) if section else ():
            if "description" in f.metadata:
                out[f.name].add(_fmt(_own_field(_declaring(section, f.name), f.name).default))
    return out


def _declaring(cls: type, name: str) -> type:
    """The class of `cls`'s MRO whose own body declares field `name`."""
    return next(c for c in cls.__mro__ if name in c.__dict__.get("__annotations__", {}))


def _literal(node: ast.AST) -> str | None:
    try:
        return repr(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError):
        return None


def restated_defaults(names: set[str] | None = None) -> list[tuple[str, int, str, str, str]]:
    """(file, line, form, option, default) of every default a call or conditional in src/ gives a stage option
    (see the module's docstring), with literal defaults only."""
    names = set(option_defaults()) if names is None else names
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parents[1]).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func, args = node.func, node.args
                if isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3:
                    key, default, form = args[1], args[2], "getattr"
                elif isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and len(args) == 2:
                    key, default, form = args[0], args[1], f".{func.attr}"
                else:
                    continue
                if isinstance(key, ast.Constant) and key.value in names:
                    value = _literal(default)
                    if value is not None and value != "None":
                        found.append((rel, node.lineno, form, key.value, value))
            elif isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare):
                test = node.test
                if (isinstance(test.left, ast.Name) and test.left.id in names and len(test.ops) == 1
                        and isinstance(test.ops[0], ast.Is | ast.IsNot)
                        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
                    branch = node.body if isinstance(test.ops[0], ast.Is) else node.orelse
                    value = _literal(branch)
                    if value is not None:
                        found.append((rel, node.lineno, "if None", test.left.id, value))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brief", action="store_true", help="the summary only")
    args = parser.parse_args(argv)
    decl = declarations()
    multi = {k: v for k, v in decl.items() if len(v) > 1}
    differing = {k: differences(v) for k, v in multi.items() if differences(v)}
    unique_multi = {(tuple(d.cls for d in v), k[1]) for k, v in multi.items()}
    kinds: dict[str, int] = defaultdict(int)
    for what in differing.values():
        for w in what:
            kinds[w] += 1
    restated = restated_defaults()
    defaults = option_defaults()
    print(f"stages with a params class: {sum(1 for s in REGISTRY.values() if s.params is not None)} of "
          f"{len(REGISTRY)}; (stage, field) pairs: {len(decl)}")
    value_differs = [k for k, what in differing.items() if {"default", "type"} & set(what)]
    print(f"(stage, field) declared in two or more classes of its ancestry: {len(multi)} "
          f"({len(unique_multi)} distinct (ancestry, field))")
    print(f"  differing in default or type: {len(value_differs)} (default {kinds['default']}, type {kinds['type']}); "
          f"in anything, an option redeclared as a plain field included: {len(differing)} "
          f"(description {kinds['description']}, bounds {kinds['bounds']})")
    print(f"defaults restated in code (literal defaults given to an option's name): {len(restated)}")
    if args.brief:
        return 0
    print("\n== declared in two or more classes (most derived first); * = differs")
    for (stage, name), found in sorted(multi.items()):
        mark = "*" if (stage, name) in differing else " "
        what = f"  [{', '.join(differing[(stage, name)])}]" if mark == "*" else ""
        print(f"{mark} {stage}.{name}{what}")
        for d in found:
            kind = "option" if d.description is not None else "field "
            print(f"      {kind} {d.cls.removeprefix('augsbert.')}: default {_fmt(d.default)}, type {d.annotation}")
    print("\n== defaults restated in code: file:line  form  option = default   (defaults its classes declare)")
    for rel, line, form, name, value in restated:
        declared = ", ".join(sorted(defaults.get(name, ())))
        flag = "" if value in defaults.get(name, ()) else "   <- not a declared default"
        print(f"{rel}:{line}  {form}  {name} = {value}   ({declared}){flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
