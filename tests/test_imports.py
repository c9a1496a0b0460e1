"""The package's import graph: no import circles, no private names taken from another module.

The graph is read from the source with `ast` (nothing is imported, so the test is fast and sees
imports that only run inside functions). An edge is any import of one of the package's modules by
another: module-level or function-local (the deferred imports that keep `augsbert --help` and planning
free of torch count too: a circle through them still means two modules that cannot be understood or
tested apart), relative or absolute, `from pkg import submodule` resolved to the submodule, and
`__import__` / `importlib.import_module` of a literal module name.

A parent package's `__init__` is not an edge of its submodules' imports: by the time a submodule runs,
its package is already being initialised, so that order cannot make a circle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "augsbert"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    local: bool  # inside a function (or class) body rather than at module level


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the package rooted at `root` (`pkg/__init__.py` -> `pkg`)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a `from X import ...` reads from, made absolute."""
    if not node.level:
        return node.module or ""
    parts = _package_of(module, path).split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _imports(module: str, path: Path, tree: ast.Module, modules: dict[str, Path]):
    """(node, target module, imported name or None) for every import of a package module in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield node, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:  # `from pkg import submodule`
                    yield node, submodule, None
                elif base in modules:
                    yield node, base, alias.name
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and node.args[0].value in modules
              and (getattr(node.func, "id", None) == "__import__" or getattr(node.func, "attr", None) == "import_module")):
            yield node, node.args[0].value, None


def _module_level(tree: ast.Module) -> set[int]:
    """ids of the nodes that run when the module is imported (not inside a def or class body)."""
    found, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.add(id(node))
        todo.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[Edge], list[str]]:
    """(module -> modules it imports, every edge, every private name imported from another module)."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    edges, private = [], []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top = _module_level(tree)
        for node, target, name in _imports(module, path, tree, modules):
            if target == module:
                continue
            graph[module].add(target)
            edges.append(Edge(module, target, node.lineno, id(node) not in top))
            if name and name.startswith("_") and not name.startswith("__"):
                private.append(f"{module}:{node.lineno} imports {name} from {target}")
        private += _private_attributes(module, path, tree, modules)
    return graph, edges, private


def _private_attributes(module: str, path: Path, tree: ast.Module, modules: dict[str, Path]) -> list[str]:
    """`mod._name` where `mod` is a name this module bound to another package module."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
    return [f"{module}:{node.lineno} reads {node.value.id}.{node.attr} ({bound[node.value.id]})"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
            and bound[node.value.id] != module and node.attr.startswith("_") and not node.attr.startswith("__")]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _describe(component: list[str], edges: list[Edge]) -> str:
    inside = set(component)
    lines = [f"  {e.source}:{e.line} -> {e.target}{' (in a function)' if e.local else ''}"
             for e in edges if e.source in inside and e.target in inside]
    return f"{', '.join(component)}\n" + "\n".join(sorted(set(lines)))


# ------------------------------------------------------------------ the package


def test_the_package_has_no_import_circles():
    graph, edges, _ = import_graph(SRC)
    found = cycles(graph)
    assert not found, ("import circles (move what both sides share into a module both can import):\n"
                       + "\n".join(_describe(component, edges) for component in found))


def test_no_module_imports_another_modules_private_names():
    _, _, private = import_graph(SRC)
    assert not private, ("private names used across modules (make them public where they are shared):\n  "
                         + "\n  ".join(private))


def test_the_graph_covers_the_package():
    graph, edges, _ = import_graph(SRC)
    assert "augsbert.config.load" in graph and "augsbert.jobs.pretrain" in graph
    assert any(e.local for e in edges) and any(not e.local for e in edges)


# ------------------------------------------------------------------ the checks themselves


def test_cycles_finds_a_circle_and_only_its_members():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}, "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == [["a", "b", "c"], ["f", "g"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_graph_resolves_every_import_form(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from .b import value\n\ndef f():\n    from . import c\n",
        "b.py": "import pkg.sub.d\nvalue = 1\n",
        "c.py": "from pkg.sub import d as dd\nfrom .b import _hidden\n\ndef g():\n    return dd._secret\n",
        "sub/__init__.py": "",
        "sub/d.py": "import json\n\nclass K:\n    def m(self):\n        return __import__('pkg.a')\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph, edges, private = import_graph(pkg)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b", "pkg.c"}, "pkg.b": {"pkg.sub.d"}, "pkg.c": {"pkg.sub.d", "pkg.b"},
                     "pkg.sub": set(), "pkg.sub.d": {"pkg.a"}}
    assert {(e.source, e.target): e.local for e in edges} == {
        ("pkg.a", "pkg.b"): False, ("pkg.a", "pkg.c"): True, ("pkg.b", "pkg.sub.d"): False,
        ("pkg.c", "pkg.sub.d"): False, ("pkg.c", "pkg.b"): False, ("pkg.sub.d", "pkg.a"): True}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]
    assert private == ["pkg.c:2 imports _hidden from pkg.b", "pkg.c:5 reads dd._secret (pkg.sub.d)"]


# ------------------------------------------------------------------ the layers (docs/development.md "Layout")

# Which part of the package may import which (besides itself and the package's own __init__). A part is a
# folder of the package, a module of its root, or one of the few modules named on their own below (light
# declarations the lower parts read). Read bottom-up: declarations and the store below planning, planning
# and scheduling below the models, trainers and jobs, the user's face on top.
BELOW_JOBS = ("errors", "params", "objectives", "config", "data", "store",
              "stages", "planning", "scheduling", "reporting", "models", "evaluation", "sampling", "pretraining",
              "training")
LAYERS: dict[str, tuple[str, ...]] = {
    "augsbert": (),
    "errors": (),
    "params": ("errors",),
    "objectives": ("errors", "params"),
    "config": ("errors", "params", "objectives"),
    "data": ("errors", "config"),
    "store": ("errors", "params", "config"),
    "stages": ("errors", "params", "config", "data", "store", "objectives"),
    "planning": ("errors", "params", "config", "store", "stages"),
    "scheduling": ("errors", "params", "config", "store", "stages", "planning"),
    "reporting": ("errors", "config", "store", "stages", "planning"),
    "models": ("errors", "params", "config", "data", "store", "stages", "scheduling"),
    "evaluation": ("errors", "params", "config", "data", "store", "models"),
    "sampling": ("errors", "params", "data", "store", "models"),
    "pretraining": ("errors", "params", "config", "data", "store", "stages", "models", "objectives"),
    "training": ("errors", "params", "config", "data", "store", "stages", "scheduling", "models", "evaluation",
                 "sampling", "pretraining", "objectives"),
    "jobs": BELOW_JOBS,
    "face": (*BELOW_JOBS, "jobs"),
    "__main__": ("face",),
    "warm_server": (),  # the former module path's pointer (imports nothing)
}
OWN_PARTS: tuple[str, ...] = ()  # modules that are a part of their own


def part_of(module: str) -> str:
    """The part of the package `module` belongs to (a key of LAYERS)."""
    inner = module.removeprefix("augsbert").removeprefix(".")
    for own in OWN_PARTS:
        if inner == own or inner.startswith(own + "."):
            return own
    return inner.split(".")[0] if inner else "augsbert"


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (annotations only: no import happens at run time)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            found.update(id(n) for n in ast.walk(node))
    return found


def layering_violations(root: Path) -> list[str]:
    modules = module_names(root)
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_only(tree)
        for node, target, _ in _imports(module, path, tree, modules):
            source_part, target_part = part_of(module), part_of(target)
            if id(node) in skip or target_part in (source_part, "augsbert"):
                continue
            if target_part not in LAYERS.get(source_part, ()):
                found.append(f"{module}:{node.lineno} ({source_part}) imports {target} ({target_part})")
    return sorted(set(found))


def test_every_part_is_in_the_layering_table():
    parts = {part_of(m) for m in module_names(SRC)}
    assert parts <= set(LAYERS), f"parts missing from LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_import_goes_against_the_layers():
    found = layering_violations(SRC)
    assert not found, "imports against the layering table (tests/test_imports.py LAYERS):\n  " + "\n  ".join(found)


def test_the_layering_check_finds_an_upward_import(tmp_path):
    pkg = tmp_path / "augsbert"
    (pkg / "store").mkdir(parents=True)
    (pkg / "stages").mkdir()
    for name, text in {"__init__.py": "", "store/__init__.py": "", "stages/__init__.py": "",
                       "stages/a.py": "from ..store import b\n",
                       "store/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..stages import a\n",
                       "store/c.py": "def f():\n    from ..stages import a\n"}.items():
        (pkg / name).write_text(text)
    assert layering_violations(pkg) == ["augsbert.store.c:2 (store) imports augsbert.stages.a (stages)"]


# ------------------------------------------------------------------ the shape of the package

MAX_FUNCTION_LOCAL_IMPORTS = 40  # of the package's own modules (issue 40): only where a module is heavy


def function_local_imports(root: Path) -> list[str]:
    """`module:line` of every import of one of the package's modules inside a function body."""
    return sorted({f"{e.source}:{e.line}" for e in import_graph(root)[1] if e.local})


def test_function_local_imports_are_few():
    found = function_local_imports(SRC)
    assert len(found) <= MAX_FUNCTION_LOCAL_IMPORTS, "\n".join(found)


def test_the_package_root_shows_its_parts():
    """At most 8 modules in the root; every folder is a package whose docstring says in one line what it holds."""
    assert len(list(SRC.glob("*.py"))) <= 8, sorted(p.name for p in SRC.glob("*.py"))
    for folder in sorted(p for p in SRC.iterdir() if p.is_dir() and p.name not in ("__pycache__", "schemas")):
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.name}/ has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert doc and doc.splitlines()[0].strip(), f"{folder.name}/__init__.py: no one-line docstring"


def stage_names_in(path: Path, names: set[str]) -> list[str]:
    """String constants (and, in the rules, words of quoted strings) in `path` that are a stage's name."""
    import io
    import tokenize

    found = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.STRING:
            text = token.string.strip("rbfRBF").strip("'\"")
            if text in names:
                found.append(f"{path.name}:{token.start[0]}: {token.string}")
    return found


def test_the_plan_resources_and_rules_name_no_stage():
    """What differs between stages is in their declarations: the planning loop, the job sizing and the rules
    read the registry and never branch on a stage's name."""
    from augsbert.stages import REGISTRY

    names = set(REGISTRY)
    files = [SRC / "planning" / "plan.py", SRC / "scheduling" / "resources.py",
             *sorted((SRC.parents[1] / "workflow").rglob("*.smk")), SRC.parents[1] / "workflow" / "Snakefile"]
    found = [hit for path in files for hit in stage_names_in(path, names)]
    assert not found, "\n".join(found)
