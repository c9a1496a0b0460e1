"""The documents users read stay true to the code.

README.md is the first screen; docs/ (MkDocs, `mkdocs.yml`) holds the rest. Every command in their code
blocks (and in inline code that starts with `augsbert`, `snakemake` or `make`) must name an existing CLI
subcommand and option value, experiment, grid, Makefile target or file; the configuration reference is
generated from the schema while the site is built.
"""

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from augsbert.config.reference import MissingDescription, render
from conftest import REPO

README_MAX_LINES = 150
SHELL = {"bash", "sh", "shell", "console"}
# programs a shell block may call without a check of its arguments (system and cluster tools)
UNCHECKED = {"git", "cd", "mkdir", "export", "sbatch", "squeue", "scancel", "sinfo", "hf", "tensorboard", "tail", "cat",
             "kill", "pip", "apt-get"}
# paths in inline code are checked when they start with one of these (the repository's own folders and files)
REPO_PREFIXES = ("src/", "tests/", "workflow/", "config/", "benchmarks/", "profiles/", "docs/", ".test/", ".ci/",
                 "Makefile", "pyproject.toml", "mkdocs.yml", "LICENSE")
EXPORT_MODELS = ("student", "teacher", "lower_bound")  # models/<experiment>/<model> (workflow/rules/export.smk)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str


def code_blocks(path: Path) -> list[Block]:
    blocks, lines = [], path.read_text().split("\n")
    opened = None
    for i, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(\S*)", line)
        if fence and opened is None:
            opened, lang, body = i, fence.group(1), []
        elif fence:
            blocks.append(Block(path, opened, lang, "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
    assert opened is None, f"{path}:{opened}: a code block is not closed"
    return blocks


def inline_code(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every inline code span outside code blocks."""
    out, inside = [], False
    for i, line in enumerate(path.read_text().split("\n"), 1):
        if re.match(r"^\s*```", line):
            inside = not inside
            continue
        if not inside:
            out.extend((i, span) for span in re.findall(r"`([^`\n]+)`", line))
    return out


# --- what exists -------------------------------------------------------------------------------------------

@dataclass
class Known:
    experiments: set
    grids: set
    make_targets: set
    commands: dict  # augsbert subcommand (and alias) -> its argparse parser
    errors: list = field(default_factory=list)
    written: set = field(default_factory=set)  # files the page itself writes (`cat > my.yaml <<'EOF'`)


def known() -> Known:
    from augsbert.face.cli import build_parser
    from augsbert.config.load import read_config
    from augsbert.config.grids import expand_grids

    raw = read_config(REPO / "config" / "config.yaml")
    experiments = set(expand_grids(raw).get("experiments") or {})
    grids = set(raw.get("grids") or {})
    for extra in sorted((REPO / "config" / "measure").glob("*.yaml")):  # grids read with --configfile
        measured = read_config(extra).get("grids") or {}
        grids |= set(measured)
        experiments |= set(expand_grids({**raw, "grids": measured}).get("experiments") or {})
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w.-]*):(?!=)", makefile, re.M))
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return Known(experiments, grids, targets, dict(sub.choices))


# --- the checks -------------------------------------------------------------------------------------------

def placeholder(token: str) -> bool:
    """A token the reader replaces: <experiment>, DIR, ..., a variable."""
    return bool(re.search(r"[<>]|\.\.\.|\$|^[A-Z]+$", token))


def check_path(token: str, where: str, known_: Known) -> None:
    if placeholder(token) or re.search(r"[*{}]", token) or token in known_.written:
        return
    if not (REPO / token.rstrip("/")).exists():
        known_.errors.append(f"{where}: no file or folder {token}")


def check_target(token: str, where: str, known_: Known) -> None:
    """A Snakemake target: results/<experiment>.json, results/tables/<grid>.md, models/<experiment>/<model>."""
    if placeholder(token):
        return
    # a grid's table, its curve (rule active_curve) or its frontier (rule grid_frontier)
    if m := re.fullmatch(r"results/tables/([^/]+?)(?:\.curve|\.frontier)?\.(?:md|csv|json|png)", token):
        if m.group(1) not in known_.grids:
            known_.errors.append(f"{where}: {token}: no grid {m.group(1)!r} in config/grids/ or config/measure/")
    elif m := re.fullmatch(r"results/([^/]+)\.json", token):
        if m.group(1) not in known_.experiments:
            known_.errors.append(f"{where}: {token}: no experiment {m.group(1)!r} in config/config.yaml or a grid")
    elif m := re.fullmatch(r"models/([^/]+)/([^/]+?)(?:-(?:onnx|openvino)-int8(?:-seed\d+)?)?/?", token):  # export.smk
        if m.group(1) not in known_.experiments or m.group(2) not in EXPORT_MODELS:
            known_.errors.append(f"{where}: {token}: not models/<experiment>/<{'|'.join(EXPORT_MODELS)}>")
    else:
        known_.errors.append(f"{where}: {token}: not a target the workflow makes")


def option_values(tokens: list[str]) -> dict[str, list[str]]:
    """--opt value / --opt=value pairs (the value is the next token unless it is an option)."""
    out: dict[str, list[str]] = {}
    for i, token in enumerate(tokens):
        if token.startswith("--"):
            name, _, value = token.partition("=")
            if not value and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                value = tokens[i + 1]
            out.setdefault(name, []).append(value)
    return out


def check_augsbert(args: list[str], where: str, known_: Known) -> None:
    words = [a for a in args if not a.startswith("-")]
    if not words or placeholder(words[0]):
        return
    sub = words[0]
    if sub not in known_.commands:
        known_.errors.append(f"{where}: `augsbert {sub}`: no such subcommand")
        return
    parser = known_.commands[sub]
    options = {s: a for a in parser._actions for s in a.option_strings}
    for name, values in option_values(args[args.index(sub) + 1:]).items():
        action = options.get(name)
        if action is None:
            known_.errors.append(f"{where}: `augsbert {sub}` has no option {name}")
            continue
        for value in values:
            if not value or placeholder(value) or action.nargs == 0:
                continue
            if action.choices is not None and value not in action.choices:
                known_.errors.append(f"{where}: `augsbert {sub} {name} {value}`: choose from {list(action.choices)}")
            if name == "--experiment" and value not in known_.experiments:
                known_.errors.append(f"{where}: `augsbert {sub}`: no experiment {value!r}")
            if name == "--grid" and value not in known_.grids:
                known_.errors.append(f"{where}: `augsbert {sub}`: no grid {value!r}")
            if name == "--frontier" and "/" not in value and value not in known_.grids:  # a grid's name or a file
                known_.errors.append(f"{where}: `augsbert {sub} --frontier`: no grid {value!r}")
            if name == "--config" and value.endswith((".yaml", ".yml")):
                check_path(value, where, known_)


def configured_names(args: list[str]) -> tuple[set[str], set[str]]:
    """The grids and experiments the command's own config files of this repository define (`--configfile
    config/config.yaml config/measure/x.yaml`: a measurement's grids), grid cells included."""
    from augsbert.config.grids import cells

    grids, experiments = set(), set()
    if "--configfile" not in args:
        return grids, experiments
    for value in args[args.index("--configfile") + 1:]:
        if value.startswith("-"):
            break
        path = REPO / value
        if value.startswith(REPO_PREFIXES) and path.is_file() and path.suffix in (".yaml", ".yml"):
            body = yaml.safe_load(path.read_text()) or {}
            experiments |= set(body.get("experiments") or {})
            for name, grid in (body.get("grids") or {}).items():
                grids.add(name)
                experiments |= {cell.experiment for cell in cells(name, grid)}
    return grids, experiments


def check_snakemake(args: list[str], where: str, known_: Known) -> None:
    grids, experiments = configured_names(args)
    known_ = dataclasses.replace(known_, grids=known_.grids | grids, experiments=known_.experiments | experiments)
    skip_next = False
    for i, token in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        if token in ("--profile", "--directory", "--configfile"):
            for value in args[i + 1:]:
                if value.startswith("-"):
                    break
                if token != "--configfile" or value.startswith(REPO_PREFIXES):
                    check_path(value, where, known_)
                if token != "--configfile":
                    break
        elif token in ("--report",):
            skip_next = True
        elif re.match(r"(results|models)/", token):
            check_target(token, where, known_)


def check_make(args: list[str], where: str, known_: Known) -> None:
    for token in args:
        name, eq, value = token.partition("=")
        if eq and name == "DEMO":
            for target in value.split():
                check_target(target, where, known_)
        elif not eq and not token.startswith("-") and not placeholder(token):
            if token not in known_.make_targets:
                known_.errors.append(f"{where}: `make {token}`: no such target in the Makefile")


def check_python(args: list[str], where: str, known_: Known) -> None:
    if not args or args[0] == "-c":
        return
    if args[0] == "-m":
        if importlib.util.find_spec(args[1].split(".")[0]) is None:
            known_.errors.append(f"{where}: `python -m {args[1]}`: no such module")
    else:
        check_path(args[0], where, known_)


def check_command(tokens: list[str], where: str, known_: Known, strict: bool) -> None:
    """One simple command (no &&, |, ;): its program and arguments."""
    while tokens and re.fullmatch(r"[A-Za-z_]\w*=\S*", tokens[0]):  # VAR=value prefixes
        tokens = tokens[1:]
    if not tokens:
        return
    program, args = tokens[0], tokens[1:]
    program = program.removeprefix(".venv/bin/")
    if program == "augsbert":
        check_augsbert(args, where, known_)
    elif program == "snakemake":
        check_snakemake(args, where, known_)
    elif program == "make":
        check_make(args, where, known_)
    elif program in ("python", "python3"):
        check_python(args, where, known_)
    elif program == "bash":
        if args:
            check_path(args[0], where, known_)
    elif program == "sudo":  # the command it runs is checked as any other
        check_command(args, where, known_, strict)
    elif program == "mkdocs":
        if not args or args[0] not in ("build", "serve"):
            known_.errors.append(f"{where}: `mkdocs {' '.join(args)}`: use build or serve")
    elif program not in UNCHECKED and strict:
        known_.errors.append(f"{where}: `{program}`: a program the docs test does not know (add a check for it)")


def split_commands(line: str) -> list[list[str]]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&|;")  # not <>: placeholders are <name>
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands, current, redirect = [], [], False
    for token in lexer:
        if token in ("&&", "||", ";", "|", "&"):
            commands.append(current)
            current = []
        elif token in (">", ">>", "<", "2>", "&>"):
            redirect = True
        elif redirect:
            redirect = False
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")


def heredocs(text: str) -> list[str]:
    """The bodies of the here-documents (`cat > file <<'EOF' ... EOF`) of a shell block: file contents."""
    bodies, lines = [], text.split("\n")
    for i, line in enumerate(lines):
        if m := HEREDOC.search(line):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == m.group(1)), len(lines))
            bodies.append("\n".join(lines[i + 1:end]))
    return bodies


def check_shell(text: str, where: str, known_: Known, strict: bool = True) -> None:
    variables: dict[str, str] = {}
    until = None  # the terminator of a here-document being skipped (its lines are a file's content)
    for number, line in enumerate(text.replace("\\\n", " ").split("\n")):
        if until is not None:
            until = None if line.strip() == until else until
            continue
        if m := HEREDOC.search(line):
            until = m.group(1)
        if not line.strip():
            continue
        for name, value in re.findall(r"^([A-Za-z_]\w*)=(\S+)\s", line.strip() + " "):
            variables[name] = value
        for name, value in variables.items():
            line = line.replace(f"${name}", value)
        for command in split_commands(line):
            check_command(command, f"{where}+{number}", known_, strict)


VENV_PROGRAMS = ("augsbert", "snakemake", "mkdocs")  # installed in .venv only: a bare name needs an activated venv


def bare_programs(text: str) -> list[str]:
    """The commands of a shell block that call a program of the venv by its bare name (they fail as written
    from the repository root unless the venv is activated)."""
    found, until = [], None
    for line in text.replace("\\\n", " ").split("\n"):
        if until is not None:
            until = None if line.strip() == until else until
            continue
        if m := HEREDOC.search(line):
            until = m.group(1)
        for command in split_commands(line) if line.strip() else []:
            while command and re.fullmatch(r"[A-Za-z_]\w*=\S*", command[0]):
                command = command[1:]
            if command and command[0] in VENV_PROGRAMS:
                found.append(command[0])
    return found


def check_python_block(text: str, where: str, known_: Known) -> None:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("augsbert"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    known_.errors.append(f"{where}: {node.module} has no {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("augsbert") and importlib.util.find_spec(alias.name) is None:
                    known_.errors.append(f"{where}: no module {alias.name}")


def check_layout(text: str, where: str, known_: Known) -> None:
    """The Layout block: `path[, path]   what it is`; entries indented by two are under src/augsbert/."""
    for line in text.split("\n"):
        if not line.strip() or line.startswith(" " * 6):  # a description's continuation
            continue
        names, _, what = re.sub(r"\s{2,}", "\0", line.strip(), count=1).partition("\0")
        if "git-ignored" in what:
            continue
        for name in re.split(r",\s*|\s+", re.sub(r"\([^)]*\)", "", names)):
            if name:
                check_path(("src/augsbert/" if line.startswith("  ") else "") + name, where, known_)


def document_experiments(path: Path) -> set[str]:
    """Experiments a page defines itself, in a config file it writes (a here-document) or shows (yaml block)."""
    names = set()
    for block in code_blocks(path):
        bodies = heredocs(block.text) if block.lang in SHELL else [block.text] if block.lang == "yaml" else []
        for body in bodies:
            try:
                data = yaml.safe_load(body)
            except yaml.YAMLError:
                continue
            if isinstance(data, dict) and isinstance(data.get("experiments"), dict):
                names |= set(data["experiments"])
    return names


def check_document(path: Path, known_: Known) -> None:
    rel = path.relative_to(REPO)
    text = path.read_text()
    # the page's own experiments (my.yaml of docs/guide/own-data.md) are targets of its commands; errors shared
    written = {m for block in code_blocks(path) if block.lang in SHELL
               for m in re.findall(r"^\s*cat > (\S+) <<", block.text, re.M)}
    known_ = dataclasses.replace(known_, experiments=known_.experiments | document_experiments(path), written=written)
    layout_at = text.find("## Layout")
    for block in code_blocks(path):
        where = f"{rel}:{block.line}"
        if not block.lang:
            known_.errors.append(f"{where}: a code block without a language (bash, python, text, ...)")
        elif block.lang in SHELL:
            check_shell(block.text, where, known_)
            if "source .venv/bin/activate" not in text:  # issue 42: commands run as written from the root
                known_.errors += [f"{where}: `{program}` needs an activated venv; write .venv/bin/{program}"
                                  for program in bare_programs(block.text)]
        elif block.lang == "python":
            check_python_block(block.text, where, known_)
        elif block.lang == "text" and layout_at >= 0 and text.find(block.text) > layout_at:
            check_layout(block.text, where, known_)
    for line, span in inline_code(path):
        where = f"{rel}:{line}"
        if re.match(r"(\.venv/bin/)?(augsbert|snakemake|make) ", span):
            check_shell(span, where, known_, strict=False)
        elif re.fullmatch(r"(results|models)/\S+", span) and re.search(r"\.(json|md)$|^models/", span):
            check_target(span, where, known_)
        elif span.startswith(REPO_PREFIXES) and " " not in span:
            check_path(span.split(":")[0], where, known_)


def test_readme_is_one_screen_and_a_little():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (the rest: docs/)"


@pytest.fixture(scope="module")
def what_exists() -> Known:
    return known()


def fresh(known_: Known) -> Known:
    return dataclasses.replace(known_, errors=[])


def test_every_command_and_path_in_readme_and_docs_exists(what_exists):
    known_ = fresh(what_exists)
    for path in documents():
        check_document(path, known_)
    assert known_.errors == []


def test_the_command_check_finds_what_does_not_exist(what_exists):
    """The check above can fail: each line here names something that does not exist."""
    bad = {
        "augsbert no-such-command --experiment demo_cbe": "no such subcommand",
        "augsbert plan --experiment no_such_experiment": "no experiment 'no_such_experiment'",
        "augsbert render-table --grid no_such_grid": "no grid 'no_such_grid'",
        "augsbert export --experiment demo_cbe --model teachr --to DIR": "choose from",
        "augsbert data --no-such-option": "has no option --no-such-option",
        ".venv/bin/snakemake --cores 2 results/no_such_experiment.json": "no experiment",
        "snakemake -n results/tables/no_such_grid.md": "no grid",
        "snakemake models/demo_cbe/teachers": "not models/",
        "snakemake results/whatever.csv": "not a target",
        "snakemake --profile profiles/no_such_profile results/demo_cbe.json": "no file or folder",
        "make no-such-target": "no such target",
        "make demo DEMO=results/no_such_experiment.json": "no experiment",
        ".venv/bin/python benchmarks/no_such_bench.py": "no file or folder",
        "EXP=no_such_experiment\nsnakemake results/$EXP.json": "no experiment",
        "frobnicate --all": "does not know",
    }
    for text, message in bad.items():
        found = fresh(what_exists)
        check_shell(text, "t", found)
        assert len(found.errors) == 1 and message in found.errors[0], (text, found.errors)
    assert bare_programs("snakemake -n x\nX=1 augsbert list && .venv/bin/augsbert plan\ncat > f <<'EOF'\nsnakemake\nEOF") \
        == ["snakemake", "augsbert"]
    good = fresh(what_exists)
    check_shell("make demo DEMO=results/demo_zeroshot.json\nEXP=demo_cbe\n.venv/bin/snakemake results/$EXP.json "
                "--cache  # comment results/nothing.json\naugsbert export --experiment demo.bm25.lee --model student",
                "t", good)
    check_python_block("from augsbert.sampling import bm25_neighbors", "t", good)
    assert good.errors == []
    check_python_block("from augsbert.sampling import no_such_function", "t", good)
    check_layout("src/augsbert/               the package\n  no_such_module.py         x\n"
                 "artifacts/ results/        outputs (git-ignored)", "t", good)
    assert good.errors == ["t: augsbert.sampling has no no_such_function",
                           "t: no file or folder src/augsbert/no_such_module.py"]


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", readme, re.M) and re.search(r"^make test$", ci, re.M)
    assert re.search(r"^make demo\b", readme, re.M)


def test_every_rule_declares_threads_log_and_resources():
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        text = smk.read_text()
        for rule in re.split(r"\n(?=rule )", text)[1:]:
            name = rule.split(":")[0]
            for directive in ("threads:", "log:", "resources:", "shell:"):
                assert directive in rule, f"{smk.name}: {name} lacks {directive}"


# --- the MkDocs site --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """`mkdocs build --strict` (every broken link or anchor is an error) into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(REPO / "mkdocs.yml"), "--site-dir", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    items = node.values() if isinstance(node, dict) else node
    return [page for item in items for page in nav_pages(item)]


def test_mkdocs_build_strict_passes_and_every_page_is_in_the_nav(site):
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["theme"]["name"] == "material"
    listed = nav_pages(config["nav"])
    written = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert written - set(listed) == set(), "pages missing from the nav of mkdocs.yml"
    for page in listed:
        built = site / page.removesuffix(".md").removesuffix("index") / "index.html"
        assert built.exists(), page


def test_configuration_reference_is_generated_from_the_schema(site):
    """Formerly config/README.md, checked against render(); now built from the schema with the site."""
    assert not (REPO / "docs" / "reference" / "configuration.md").exists(), "generated at build time only"
    html = (site / "reference" / "configuration" / "index.html").read_text()
    keys = re.findall(r"^\| `([^`]+)` \|", render(), re.M)
    assert len(keys) > 100
    for key in keys:
        assert f"<code>{key}</code>" in html, f"{key} is not on the built configuration page"
    pointer = (REPO / "config" / "README.md").read_text()
    assert "augsbert config-reference" in pointer and "| key |" not in pointer, "config/README.md: a pointer only"


def test_a_schema_key_without_a_description_stops_the_reference_and_the_build(monkeypatch, tmp_path):
    import copy

    import augsbert.config.reference as reference

    schema = reference.load_schema()
    broken = copy.deepcopy(schema)
    del broken["$defs"]["stage_options"]["properties"]["teacher"]["properties"]["lr"]["description"]
    with pytest.raises(MissingDescription, match=r"teacher\.lr"):
        render(broken)
    monkeypatch.setattr(reference, "load_schema", lambda: broken)
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    with pytest.raises(MissingDescription, match=r"teacher\.lr"):
        build(config)


# --- pointers in the shipped config -----------------------------------------------------------------------

GENERATED_PAGES = {"docs/reference/configuration.md"}  # built from the schema with the site (no file in docs/)
POINTING_FILES = ("config/config.yaml", "config/grids/demo_quick.yaml", "profiles/default/config.yaml")


def pointers(text: str) -> list[tuple[int, str]]:
    """(line, pointer) of every repository path and README section named in a file's comments."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        comment = line.partition("#")[2]
        found += [(number, m) for m in re.findall(r"\b(?:docs|src|workflow|config|profiles|tests)/[\w./-]+\w", comment)]
        found += [(number, f'README "{m}"') for m in re.findall(r'README "([^"]+)"', comment)]
    return found


def test_pointers_in_the_shipped_config_lead_somewhere():
    """Issue 42: config.yaml pointed at README sections that had moved to docs/; every path named in the
    comments of the shipped config and profile exists, and no comment names a README section."""
    readme_sections = set(re.findall(r"^#+ (.+)$", (REPO / "README.md").read_text(), re.M))
    broken = []
    for name in POINTING_FILES:
        for line, pointer in pointers((REPO / name).read_text()):
            if pointer.startswith("README "):
                if pointer[8:-1] not in readme_sections:
                    broken.append(f"{name}:{line}: {pointer} (no such README section)")
            elif pointer not in GENERATED_PAGES and not (REPO / pointer).exists():
                broken.append(f"{name}:{line}: {pointer} does not exist")
    assert broken == []
    assert pointers('x: 1  # see README "Real data" and docs/guide/nothing.md') == [
        (1, "docs/guide/nothing.md"), (1, 'README "Real data"')]


def test_the_performance_page_holds_nothing_a_user_cannot_run():
    """issue 50 item 7: docs/performance.md speaks of what a user can run; comparisons of commits, issue numbers
    and the maintainers' GPU-machine commands (bundles, leases) live in docs/development.md."""
    text = (REPO / "docs" / "performance.md").read_text()
    for pattern in (r"\bissues? ?-?\d+", r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
                    r"\$(GPU_BUNDLE|STAGE|DEST|SHARED_DATA)\b", r"\bleases?\b", r"\bbundles?\b"):
        found = re.search(pattern, text, re.IGNORECASE)
        assert not found, f"docs/performance.md: {found.group(0)!r} (line {text[:found.start()].count(chr(10)) + 1})"


def test_the_suites_time_is_the_same_wherever_it_is_given():
    """issue 50 item 7: README and getting-started once gave 9 and 19 minutes for `make test`."""
    found = {page: re.findall(r"fresh clone about (\d+) min", (REPO / page).read_text())
             for page in ("README.md", "docs/getting-started.md")}
    assert all(found.values()) and len({m for ms in found.values() for m in ms}) == 1, found


def test_the_readmes_first_screen_names_make_setup_on_its_own():
    """Issue 56: the first screen named `make setup` only inside `make demo`'s comment; a newcomer who wants the
    environment without the demo had to read the Makefile. Its first command block now starts with it."""
    text = (REPO / "README.md").read_text()
    first_screen = text.splitlines()[:40]
    block = first_screen[first_screen.index("```bash") + 1:]
    assert block[0].startswith("make setup ") and block[1].startswith("make demo ")
