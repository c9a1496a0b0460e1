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

# The layers, bottom-up: each line a group of parts (a folder of the package or a module of its root) that may
# import only parts of the groups below it, never a part of its own group (docs/development.md "Layout"). Light
# declarations sit low (options, objectives, the config, the store, the plan graph the stages' hooks fill, the
# stages), then the plan (the module `plan`: the loop over the registry) and reporting over it, the models and the
# libraries over them (scheduling's GPU memory reads the models' sizes), the trainers, the job entries with the
# export and the running of jobs (warm starts, the rehearsal) beside them, the command line.
ORDER: tuple[tuple[str, ...], ...] = (
    # the package's root, its errors, a former module path's pointer, and the exact top-k search (numpy / faiss, no
    # model: the retrieval evaluation's and the samplers' search, so it sits below both)
    ("augsbert", "errors", "warm_server", "search"),
    ("params",),
    ("objectives",),
    ("config",),
    ("data", "store"),
    ("planning",),
    ("stages",),
    ("plan", "reporting", "reference"),
    ("models",),
    ("scheduling", "evaluation", "sampling", "losses"),
    ("training",),
    ("jobs", "export", "run"),
    ("face",),
    ("__main__",),
)

# Which part imports which (besides itself and the package's own __init__): exactly the pairs that are used, each
# going down ORDER. An import not listed fails test_no_import_goes_against_the_layers; a listed pair no import uses
# fails test_every_pair_of_the_layering_table_is_used; a pair going up or sideways fails
# test_the_layering_table_goes_down_the_order.
LAYERS: dict[str, tuple[str, ...]] = {
    "augsbert": (),
    "errors": (),
    "warm_server": (),
    "search": (),
    "params": ("errors",),
    "objectives": ("errors", "params"),
    "config": ("errors", "params"),
    "data": ("errors", "config"),
    "store": ("errors", "config"),
    "planning": ("store",),
    "stages": ("errors", "params", "objectives", "config", "data", "store", "planning"),
    "plan": ("config", "store", "planning", "stages"),
    "reporting": ("errors", "config", "data", "store", "planning", "stages"),  # data: `augsbert list`'s loaders
    # the generated reference (`make schema`): the schema's stage sections and docs/reference/stages.md
    "reference": ("params", "config", "data", "store", "stages"),
    "models": ("errors", "config", "data", "store", "planning", "stages"),  # planning: fetch's semantic choices
    "scheduling": ("store", "stages", "models"),
    "evaluation": ("data", "models", "search"),
    # sampling takes texts, embeddings and scores, never a model (issue 66): the jobs load and run the models and pass
    # sampling their outputs, so every sampling rule is tested without a model
    "sampling": ("errors", "params", "data", "store", "stages", "search"),  # stages: the options' defaults
    "losses": ("models",),
    "training": ("errors", "objectives", "data", "store", "stages", "models", "scheduling", "evaluation", "sampling"),
    "jobs": ("errors", "params", "objectives", "config", "data", "store", "planning", "stages", "models",
             "scheduling", "evaluation", "sampling", "losses", "training"),
    # the export, its card and backends, the frontier: over the trainers (the card names the loss and arguments)
    "export": ("params", "config", "data", "store", "stages", "plan", "reporting", "models", "training"),
    # running the jobs: warm starts (the server runs the command line by its name, warm_server.COMMAND), the rehearsal
    "run": ("errors", "config", "data", "store", "stages", "plan", "reporting", "models", "scheduling"),
    "face": ("errors", "config", "store", "planning", "stages", "plan", "reporting", "models", "scheduling", "training",
             "jobs", "export", "run"),
    "__main__": ("face",),
}


def module_name(path: Path) -> str:
    """The dotted name of the package module at `path` (below SRC)."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """The part of the package `module` belongs to (a key of LAYERS)."""
    inner = module.removeprefix("augsbert").removeprefix(".")
    return inner.split(".")[0] if inner else "augsbert"


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (annotations only: no import happens at run time)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            found.update(id(n) for n in ast.walk(node))
    return found


def used_pairs(root: Path) -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) -> `module:line` of the imports that use it (run-time imports only: those
    under `if TYPE_CHECKING:` are annotations, and a part's imports of itself or of the package root are free)."""
    modules = module_names(root)
    found: dict[tuple[str, str], list[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_only(tree)
        for node, target, _ in _imports(module, path, tree, modules):
            source_part, target_part = part_of(module), part_of(target)
            if id(node) in skip or target_part in (source_part, "augsbert"):
                continue
            found.setdefault((source_part, target_part), []).append(f"{module}:{node.lineno} imports {target}")
    return found


def layering_violations(root: Path, layers: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Every import whose pair of parts the table does not hold."""
    layers = LAYERS if layers is None else layers
    return sorted(f"{where} ({source} -> {target}: add {target!r} to LAYERS[{source!r}] if {target} is below "
                  f"{source} in ORDER, else move the code)"
                  for (source, target), lines in used_pairs(root).items() if target not in layers.get(source, ())
                  for where in sorted(set(lines)))


def unused_pairs(root: Path, layers: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Every pair of the table that no import uses."""
    layers = LAYERS if layers is None else layers
    used = used_pairs(root)
    return [f"remove {target!r} from LAYERS[{source!r}]: no module of {source} imports {target}"
            for source, targets in layers.items() for target in targets if (source, target) not in used]


def against_the_order(layers: dict[str, tuple[str, ...]], order: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every pair of the table that does not go down the order (up, sideways within a group, or a part in no
    group or in two): a table that passes is acyclic, as each of its arrows lowers the group."""
    level: dict[str, int] = {}
    found = []
    for i, group in enumerate(order):
        for part in group:
            if part in level:
                found.append(f"{part!r} is in two groups of ORDER")
            level.setdefault(part, i)
    found += [f"{part!r} is in LAYERS but in no group of ORDER" for part in layers if part not in level]
    found += [f"{part!r} is in ORDER but not in LAYERS" for part in level if part not in layers]
    for source, targets in layers.items():
        for target in targets:
            if target not in level:
                found.append(f"LAYERS[{source!r}] names {target!r}, in no group of ORDER")
            elif source in level and level[target] >= level[source]:
                found.append(f"LAYERS[{source!r}] holds {target!r}, which is not below it in ORDER "
                             f"(group {level[target]} vs {level[source]})")
    return found


def test_every_part_is_in_the_layering_table():
    parts = {part_of(m) for m in module_names(SRC)}
    assert parts <= set(LAYERS), f"parts missing from LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_import_goes_against_the_layers():
    found = layering_violations(SRC)
    assert not found, "imports against the layering table (tests/test_imports.py LAYERS):\n  " + "\n  ".join(found)


def test_every_pair_of_the_layering_table_is_used():
    found = unused_pairs(SRC)
    assert not found, "pairs of the layering table no import uses (tests/test_imports.py):\n  " + "\n  ".join(found)


def test_the_layering_table_goes_down_the_order():
    found = against_the_order(LAYERS, ORDER)
    assert not found, "the layering table against ORDER (tests/test_imports.py):\n  " + "\n  ".join(found)
    assert cycles({part: set(targets) for part, targets in LAYERS.items()}) == []


def test_the_layering_check_finds_an_upward_import(tmp_path):
    pkg = tmp_path / "augsbert"
    (pkg / "store").mkdir(parents=True)
    (pkg / "stages").mkdir()
    for name, text in {"__init__.py": "", "store/__init__.py": "", "stages/__init__.py": "",
                       "stages/a.py": "from ..store import b\n",
                       "store/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..stages import a\n",
                       "store/c.py": "def f():\n    from ..stages import a\n"}.items():
        (pkg / name).write_text(text)
    layers = {"augsbert": (), "store": (), "stages": ("store",)}
    assert layering_violations(pkg, layers) == [
        "augsbert.store.c:2 imports augsbert.stages.a (store -> stages: add 'stages' to LAYERS['store'] if stages "
        "is below store in ORDER, else move the code)"]
    assert unused_pairs(pkg, layers) == []
    assert unused_pairs(pkg, {**layers, "stages": ("store", "errors")}) == [
        "remove 'errors' from LAYERS['stages']: no module of stages imports errors"]


def test_the_order_check_finds_an_arrow_up_or_sideways():
    order = (("errors",), ("store", "data"), ("stages",))
    assert against_the_order({"errors": (), "store": ("errors",), "data": (), "stages": ("store", "errors")}, order) == []
    assert against_the_order({"errors": ("stages",), "store": ("data",), "data": (), "stages": (), "jobs": ()}, order) == [
        "'jobs' is in LAYERS but in no group of ORDER",
        "LAYERS['errors'] holds 'stages', which is not below it in ORDER (group 2 vs 0)",
        "LAYERS['store'] holds 'data', which is not below it in ORDER (group 1 vs 1)"]
    assert against_the_order({"errors": (), "stages": ()}, (("errors",), ("errors", "stages"))) == [
        "'errors' is in two groups of ORDER"]


# ------------------------------------------------------------------ the shape of the package

# of the package's own modules (issue 40): only where a module is heavy or an import-time order needs it (issue 66:
# 40 -> 28; 28 -> 22 with face/'s split, the export's light imports at the top of its modules)
MAX_FUNCTION_LOCAL_IMPORTS = 22


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


BRANCHING = (ast.Compare, ast.For, ast.comprehension, ast.Assign, ast.AnnAssign)  # a name compared, iterated, kept


def stage_branches_in(path: Path, names: set[str]) -> list[str]:
    """Where `path` (Python) branches on a stage's name: a string constant that is a stage's name, compared
    (`==`, `in`), looked up (`x["teacher"]`, `.get("data")`), a key of a dict literal, iterated over, or kept in a
    constant (`TRAINING = ("teacher", ...)`), alone or inside a tuple, list or set. A name in a message, a
    docstring or a table cell is text, not a branch."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names):
            continue
        inner, up = node, parent.get(node)
        while isinstance(up, (ast.Tuple, ast.List, ast.Set)):
            inner, up = up, parent.get(up)
        lookup = (isinstance(up, ast.Subscript) and up.slice is inner) or (
            isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and up.args and up.args[0] is inner
            and up.func.attr in ("get", "pop", "setdefault"))
        key = isinstance(up, ast.Dict) and any(k is inner for k in up.keys)
        if lookup or key or isinstance(up, BRANCHING):
            where = path.relative_to(SRC.parent) if path.is_relative_to(SRC.parent) else path.name
            found.append(f"{where}:{node.lineno}: {node.value!r}")
    return found


# Where a stage's name may be branched on: its declaration and its job entry (config/: issue 48's config split)
STAGE_NAMES_ALLOWED = ("stages", "jobs")
# words that happen to be a stage's name, by file: what they are there
NOT_A_STAGE = {
    "augsbert/reporting/layout.py": {"labels"},  # grids.<grid>.labels: the axis values' display names
    "augsbert/reporting/frontier.py": {"labels"},  # grids.<grid>.labels (as above)
    # grids.<grid>.labels (as above) and the results file's `data` section (the ceiling's gold labels)
    "augsbert/reporting/curves.py": {"labels", "data"},
    "augsbert/models/cross_bi_encoder.py": {"labels"},  # a batch's `labels` tensor (transformers' name)
    "augsbert/models/mlm.py": {"labels"},
    "augsbert/training/mlm.py": {"labels"},
    "augsbert/sampling/hard_negatives.py": {"queries"},  # BEIR's queries (a file, a count)
    "augsbert/evaluation/beir_retrieval.py": {"queries"},
    "augsbert/evaluation/retrieval.py": {"queries"},
    "augsbert/evaluation/useb.py": {"queries"},
    "augsbert/data/beir.py": {"queries"},
    "augsbert/data/loaders.py": {"queries"},
    # the results file's `data` section (results.schema.yaml); the roles it reads come from the declarations
    "augsbert/reporting/results.py": {"data"},
    "augsbert/models/teacher.py": {"teacher"},  # a labelling spec's `teacher` input
    # a labelling spec's `candidates` input; its statistics' `candidates` / `teacher` fields and the pairs'
    # `teacher` column; `labels.kde_reference: teacher`
    "augsbert/sampling/labelled_pairs.py": {"candidates", "teacher"},
    "augsbert/sampling/mining.py": {"candidates"},  # the `candidates` column of GPL's candidate lists
    # columns of GPL's mined / margins tables (`negatives`, `margins`, `candidates`: arrays per pair)
    "augsbert/training/gpl_data.py": {"negatives", "margins", "candidates"},
    "augsbert/training/pair_job.py": {"data", "labels"},  # a teacher / student spec's `data` and `labels` inputs
    "augsbert/training/pretrain_rows.py": {"data"},  # a pretrain / rcl_entropy spec's `data` input
}


# What the sizing formulas (the scheduler's resources and time estimate, the GPU memory) may read of the stage layer:
# the registry, what a stage is and the counting every stage's hooks share (issue 59). A stage's own constants
# (`DATA.name`, `BM25`, ...) stay in its module: what differs is declared on the Stage (its cost terms).
SIZING = ("augsbert.scheduling", "augsbert.models.gpu_memory")
SIZING_READS = ("augsbert.stages", "augsbert.stages.base", "augsbert.stages.sizes")


def stage_modules_imported(root: Path, importers: tuple[str, ...] = SIZING,
                           allowed: tuple[str, ...] = SIZING_READS) -> list[str]:
    """`module:line` of every import by `importers` (modules, or the modules of a package) of a module of the stage
    layer other than `allowed`: a stage's own module, its constants."""
    package = root.name
    modules = module_names(root)
    found = []
    for module, path in modules.items():
        if not any(module == m or module.startswith(m + ".") for m in importers):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, target, name in _imports(module, path, tree, modules):
            if target.startswith(f"{package}.stages") and target not in allowed:
                found.append(f"{module}:{node.lineno} imports {target}{'.' + name if name else ''}")
    return sorted(found)


# Sampling takes texts, embeddings and scores (issue 66): beside importing no module of models/ (LAYERS), none of its
# modules imports a model library, so a job loads and runs the model and hands sampling what it computed.
MODEL_LIBRARIES = ("sentence_transformers", "transformers", "peft")


def model_library_imports(root: Path, part: str = "sampling") -> list[str]:
    """`module:line imports library` of every import (module level or in a function) of a model library by `part`."""
    found = []
    for module, path in module_names(root).items():
        if part_of(module) != part:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{module}:{node.lineno} imports {name}" for name in names
                      if name.split(".")[0] in MODEL_LIBRARIES]
    return sorted(found)


def test_sampling_loads_no_model():
    found = model_library_imports(SRC)
    assert not found, ("sampling imports a model library (load and run the model in the job, pass sampling the "
                       "embeddings or scores):\n  " + "\n  ".join(found))


def test_the_model_library_check_finds_one(tmp_path):
    pkg = tmp_path / "augsbert"
    for name, text in {"__init__.py": "", "sampling/__init__.py": "", "sampling/a.py": "import numpy\n",
                       "sampling/b.py": "def f():\n    from sentence_transformers import CrossEncoder\n",
                       "models/c.py": "import transformers\n"}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert model_library_imports(pkg) == ["augsbert.sampling.b:2 imports sentence_transformers"]


def test_sizing_imports_no_stage_constant():
    found = stage_modules_imported(SRC)
    assert not found, ("the sizing formulas import a stage's own module (declare the cost term on its Stage, or count "
                       "in its `counts` hook):\n  " + "\n  ".join(found))


def test_the_sizing_check_finds_a_stage_constant(tmp_path):
    pkg = tmp_path / "augsbert"
    for name, text in {"__init__.py": "", "stages/__init__.py": "REGISTRY = {}\n", "stages/sizes.py": "",
                       "stages/negatives.py": "BM25 = 'bm25'\n", "scheduling/__init__.py": "",
                       "scheduling/estimate.py": "from ..stages import REGISTRY\nfrom ..stages.sizes import *\n"
                                                 "from ..stages.negatives import BM25\n"}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert stage_modules_imported(pkg, ("augsbert.scheduling",)) == [
        "augsbert.scheduling.estimate:3 imports augsbert.stages.negatives.BM25"]


def test_the_plan_resources_and_rules_name_no_stage():
    """What differs between stages is in their declarations: outside stages/ and jobs/ (the planning loop, the job
    sizing and estimates, the reports, the export, the command line, the libraries) the package reads the
    registry and never branches on a stage's name, and the rules name none."""
    from augsbert.stages import REGISTRY

    names = set(REGISTRY)
    rules = [*sorted((SRC.parents[1] / "workflow").rglob("*.smk")), SRC.parents[1] / "workflow" / "Snakefile"]
    found = [hit for path in [SRC / "plan.py", SRC / "scheduling" / "resources.py", *rules]
             for hit in stage_names_in(path, names)]
    found += [hit for path in sorted(SRC.rglob("*.py")) if part_of(module_name(path)) not in STAGE_NAMES_ALLOWED
              for hit in stage_branches_in(path, names)
              if hit.rsplit(": ", 1)[1].strip("'") not in NOT_A_STAGE.get(hit.split(":")[0], ())]
    assert not found, ("stage names branched on outside stages/ and jobs/ (declare what differs on the Stage, its Row "
                       "or stages/runs.py):\n  " + "\n  ".join(found))


def test_every_allowance_of_the_stage_name_check_is_used():
    """NOT_A_STAGE holds only words its files use: an allowance left behind after a move would hide a new branch."""
    from augsbert.stages import REGISTRY

    used = {(hit.split(":")[0], hit.rsplit(": ", 1)[1].strip("'")) for path in sorted(SRC.rglob("*.py"))
            for hit in stage_branches_in(path, set(REGISTRY))}
    stale = sorted(f"{file}: {word!r}" for file, words in NOT_A_STAGE.items() for word in words
                   if (file, word) not in used)
    assert not stale, "allowances of NOT_A_STAGE no file needs (remove them):\n  " + "\n  ".join(stale)


def test_the_stage_name_check_finds_a_branch(tmp_path):
    path = tmp_path / "probe.py"
    text = ('TRAINED = ("teacher", "student")\n'
            'def f(node, inputs, rows):\n'
            '    if node.stage == "labels" or "data" in inputs or node.stage in ("suite",):\n'
            '        return inputs["teacher"], inputs.get("data"), {"zero_shot": 1}\n'
            '    for role in ("student",):\n'
            '        rows.append(("teacher", "the teacher, in a table cell"))\n'
            '    raise ValueError("teacher")\n')
    path.write_text(text)
    found = stage_branches_in(path, {"teacher", "student", "labels", "data", "suite", "zero_shot"})
    assert sorted(found) == sorted(f"probe.py:{hit}" for hit in (
        "1: 'teacher'", "1: 'student'", "3: 'labels'", "3: 'data'", "3: 'suite'", "4: 'teacher'", "4: 'data'",
        "4: 'zero_shot'", "5: 'student'"))
