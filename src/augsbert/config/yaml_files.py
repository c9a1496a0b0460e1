"""Reading config YAML files: duplicate keys refused with file and line, YAML errors named by file, line and
column, a file given as a config that is not one (a target, a results file) explained, and which files the
CLI's `--config` reads."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from . import reading
from .reading import check_depth, read_text
from .schema import SAFE_LOADER, load_schema


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _duplicate_key(node, path: str = "", seen: set | None = None) -> tuple[int, str, int] | None:
    """The first key written twice in one mapping of the node tree: (line, key path, line of its first use).

    YAML keeps the last of two equal keys without a word, so a setting changed further down a long file
    would silently replace (or be replaced by) one written earlier. Anchored nodes are walked once (an alias
    bomb stays cheap); `<<` merge keys are not duplicates (explicit keys override merged ones by design).
    """
    seen = set() if seen is None else seen
    if id(node) in seen or not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        return None
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        children = [(f"{path}[{i}]", item) for i, item in enumerate(node.value)]
    else:
        first: dict = {}
        children = []
        for key, value in node.value:
            if key.tag == _MERGE_TAG:
                children.append((path, value))
                continue
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            where = f"{path}.{name}" if path and name is not None else (name if name is not None else path)
            if name is not None:
                line = key.start_mark.line + 1
                if (key.tag, name) in first:
                    return line, where, first[(key.tag, name)]
                first[(key.tag, name)] = line
            children.append((where, value))
    for where, child in children:
        found = _duplicate_key(child, where, seen)
        if found:
            return found
    return None


def _load_yaml(text: str, path: Path):
    """`text` as YAML (the safe loader), refusing a key written twice in one mapping (naming file, line, key)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicate = _duplicate_key(node)
        if duplicate:
            line, key, first = duplicate
            key = key if len(key) <= 80 else key[:77] + "..."
            raise ConfigError(f"{path}:{line}: duplicate key {key} (first written at line {first}); YAML would "
                              "silently keep only the last one: remove or merge one of them")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: Path):
    text = read_text(path, "config file", reading.CONFIG_LIMIT)  # a regular utf-8 file of bounded size
    try:
        loaded = _load_yaml(text, path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        if mark is not None:  # file:line:column and the problem, not the parser's "<unicode string>" lines
            started = getattr(err, "context_mark", None)
            context = (f" ({err.context}" + (f" at line {started.line + 1}, column {started.column + 1}" if started
                                              else "") + ")") if getattr(err, "context", None) else ""
            raise ConfigError(f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {err.problem}{context}") from None
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: mappings and lists nested too deep to read; no setting is nested like that: is "
                          "it the right file?") from None
    check_depth(loaded, str(path))
    return loaded


def check_duplicate_keys(path: str | Path) -> None:
    """Raise ConfigError if the YAML file `path` writes a key twice in one mapping (Snakemake's own reading of
    a --configfile keeps the last one silently; the workflow calls this for each config file it read)."""
    read_yaml(Path(path))


RESULTS_KEYS = {"config_hash", "models", "experiment"}  # top-level keys of results/<experiment>.json


# Snakemake's --configfile takes every path after it up to the next option, so a target written after it is
# read as one more config file; these are the workflow's targets (workflow/rules/*.smk)
TARGET_PATTERN = r"(results/[^/]+\.json|results/tables/[^/]+\.(md|csv|png)|models/[^/]+/[^/]+/?)"


ARTIFACT_TARGET = r"artifacts/[^/.][^/]*/[^/]+/?"  # artifacts/<stage>/<key>: a target too
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def is_target(word: str) -> bool:
    """Whether `word`, given where config files are, is a workflow target rather than a config file: a target path
    (results/<experiment>.json, results/tables/<grid>.md, models/..., artifacts/<stage>/<key>), or a name (an
    experiment or grid: no folder, no config suffix) that is no file."""
    posix = Path(word).as_posix().removeprefix("./")
    if re.fullmatch(TARGET_PATTERN, posix) or re.fullmatch(ARTIFACT_TARGET, posix):
        return True
    return "/" not in posix and not posix.endswith(CONFIG_SUFFIXES) and not Path(word).exists()


def check_config_file(path: str | Path, body: Any = None, option: str = "--configfile") -> None:
    """Refuse a file given as a config that is not one, saying what happened and where the target goes.

    `body` is the file as read (None: read it here). A results file or a target path read as a config would
    otherwise end in "unknown key config_hash, created, ..." from the validator, which does not say why."""
    text = str(path)
    if Path(text).is_absolute() and not os.path.relpath(text).startswith(".."):
        text = os.path.relpath(text)  # Snakemake passes its config files as absolute paths: as the user wrote it
    if option == "--config" and body is None and is_target(text) and not re.fullmatch(
            TARGET_PATTERN, Path(text).as_posix().removeprefix("./")):  # a name or an artifact after --config
        what = "a folder, not a config file" if Path(text).exists() else "no such config file"
        raise ConfigError(f"{option} {text}: {what}; {option} takes config YAML files{AFTER_CONFIG}")
    if re.fullmatch(TARGET_PATTERN, Path(text).as_posix().removeprefix("./")) or (
            isinstance(body, Mapping) and RESULTS_KEYS <= set(body)):
        what = "a results file" if text.endswith(".json") else "a target of the workflow"
    else:
        body = read_yaml(Path(path)) if body is None else body
        if body is None or (isinstance(body, Mapping) and set(body) & set(load_schema()["properties"])):
            return  # empty, or a config (what else is wrong in it the validator says)
        if isinstance(body, Mapping) and RESULTS_KEYS <= set(body):
            what = "a results file"
        else:
            keys = list(body)[:4] if isinstance(body, Mapping) else []
            what = (f"not a config (top-level keys {', '.join(map(str, keys))}{', ...' if len(body) > 4 else ''}; a "
                    f"config has {', '.join(load_schema()['properties'])})" if keys else
                    f"not a config (a {type(body).__name__}, not a mapping of config sections)")
    if option == "--configfile":
        raise ConfigError(
            f"{text} was read as a config file, but it is {what}. Snakemake's --configfile takes every path after "
            f"it up to the next option, so a target written after it becomes one more config file: end the config "
            f"files with `--` (snakemake -n --configfile my.yaml -- {text}) or name the targets first")
    target = what in ("a results file", "a target of the workflow")  # typed after --config (it takes several)?
    raise ConfigError(f"{option} {text}: it is {what}; {option} takes config YAML files (config/config.yaml, "
                      f"a file of your own){AFTER_CONFIG if target else ''}")


def config_needs(option: str, config: list[str] | None) -> str:
    """The message for `--config` given without `option` (--experiment, --grid); where its last word is a name or a
    target, how it was read (`export --config my.yaml demo_cbe`: the name went to --config)."""
    last = (config or [""])[-1]
    if last and is_target(last):
        name = Path(last).stem if "/" in last else last
        return (f"--config needs {option}; --config took {last} as one more config file (it takes every word after "
                f"it up to the next option): write {option} {name}")
    return f"--config needs {option}"


# `--config` of the CLI takes several files: every word after it up to the next option (issue 56 R8)
AFTER_CONFIG = (", and every word after it up to the next option: write a name or a target before --config, or as "
                "the option it is (e.g. --experiment NAME)")


def configfile_args(argv: list[str]) -> list[str]:
    """The paths a Snakemake command line gives to `--configfile` / `--configfiles` (each takes every word after
    it up to the next option)."""
    paths, taking = [], False
    for word in argv:
        if word.startswith("-"):
            flag, eq, value = word.partition("=")
            taking = flag in ("--configfile", "--configfiles") and not eq
            if flag in ("--configfile", "--configfiles") and eq:
                paths.append(value)
        elif taking:
            paths.append(word)
    return paths


def check_configfile_syntax(argv: list[str] | None = None) -> None:
    """Stop with one message naming file, line and column when a `--configfile` of this Snakemake command line
    is not readable YAML (exit 2). Snakemake reads those files before any code of the workflow runs and says
    only "Config file is not valid JSON or YAML"; the workflow profile (profiles/default) calls this while
    Snakemake parses it, which is earlier. A missing file is left to Snakemake's own message."""
    import sys

    for path in configfile_args(sys.argv[1:] if argv is None else argv):
        try:
            # `--configfile my.yaml results/x.json` without `--`: the target is read as a config file, and when it
            # does not exist yet Snakemake ends in a traceback (FileNotFoundError) before any workflow code runs
            if re.fullmatch(TARGET_PATTERN, Path(path).as_posix().removeprefix("./")):
                check_config_file(path)
            if Path(path).is_file():
                read_yaml(Path(path))
        except ConfigError as err:
            print(f"augsbert: error: {err}", file=sys.stderr)
            sys.exit(2)  # as the workflow's other config errors


# What the Snakefile reads first (`configfile:`), relative to the directory the workflow runs in
SHIPPED_CONFIG = Path("config") / "config.yaml"


def config_files(given: list[str | Path] | None) -> list[Path]:
    """The config files the CLI's `--config` reads, in order, as Snakemake reads its: the shipped
    config/config.yaml (when the current directory has one), then each given file, every file once."""
    files = [SHIPPED_CONFIG] if SHIPPED_CONFIG.is_file() else []
    given = [given] if isinstance(given, (str, Path)) else given  # one file, as --config took it before
    for path in map(Path, given or []):
        if not any(path.resolve() == seen.resolve() for seen in files):
            files.append(path)
    if not files:
        raise ConfigError(f"no config: {SHIPPED_CONFIG} is not in the current directory (run from the repository "
                          "root) and no --config FILE was given")
    return files
