"""`augsbert list` and `augsbert plan`'s table: what a config holds and plans, one line each.

Whether a dataset's data is present is asked the way planning asks it (`dataset_inputs`, the loader's
`inputs`): a dataset is present when every raw file its loader reads is there, and absent with the first
line of the MissingDataError the data job would stop with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config.grids import cells
from ..errors import DataError
from ..stages.data import dataset_inputs

KINDS = ("experiments", "grids", "datasets")


@dataclass(frozen=True)
class DataStatus:
    dataset: str
    present: bool
    problem: str = ""  # why it is not present: the first line of the loader's error, without the dataset's name

    def __str__(self) -> str:
        return f"{self.dataset}: {'present' if self.present else 'MISSING'}"


def data_status(config: dict, dataset: str) -> DataStatus:
    """Whether the raw files of `dataset` are where `config` says (nothing is read but their existence)."""
    if dataset not in (config.get("datasets") or {}):
        return DataStatus(dataset, False, "not a configured dataset")
    try:
        dataset_inputs(config, dataset)
    except DataError as err:  # MissingDataError, or a definition the loader refuses
        first = str(err).splitlines()[0]
        return DataStatus(dataset, False, first.removeprefix(f"dataset '{dataset}': "))
    return DataStatus(dataset, True)


def experiment_datasets(experiment: dict) -> list[str]:
    """The datasets an experiment reads: its target and, for domain transfer, its source."""
    names = [experiment.get("dataset"), experiment.get("source")]
    return list(dict.fromkeys(n for n in names if n))


def grid_datasets(config: dict, name: str) -> list[str]:
    """The datasets of every cell of grid `name`, in column order."""
    found: dict[str, None] = {}
    for cell in cells(name, config["grids"][name]):
        found.update(dict.fromkeys(experiment_datasets(config["experiments"][cell.experiment])))
    return list(found)


MIN_DESCRIPTION = 30  # characters a description column needs beside the others; narrower: below them


def table(header: tuple[str, ...], rows: list[tuple[str, ...]], width: int | None = None) -> str:
    """Left-aligned columns two spaces apart; the last column (a description) is not padded. Nothing is cut (a
    name cut short cannot be typed; a description cut to 24 characters said nothing: issue 56). `width` (the
    terminal's): the description is wrapped into its column; where the other columns leave it fewer than
    MIN_DESCRIPTION characters, each item's other cells make its first line and the description follows, indented
    by four and wrapped to `width`. None: one whole line per item."""
    import textwrap

    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    left = sum(widths) + 2 * len(widths)
    if width is None or width - left >= MIN_DESCRIPTION:
        room = None if width is None else width - left
        lines = []
        for r in [header, *rows]:
            first = "  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  "
            text = (textwrap.wrap(str(r[-1]), room, break_on_hyphens=False, break_long_words=False)
                    if room and r[-1] else [str(r[-1])])
            lines += [(first + text[0]).rstrip(), *(" " * left + t for t in text[1:])]
        return "\n".join(lines)
    lines = []
    for r in [header, *rows]:
        lines += textwrap.wrap("  ".join(str(c) for c in r[:-1]), max(width, 20), subsequent_indent="    ",
                               break_on_hyphens=False, break_long_words=False)
        if r[-1]:
            lines += textwrap.wrap(str(r[-1]), max(width, 20), initial_indent="    ", subsequent_indent="    ",
                                   break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def rows(config: dict, kind: str) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and one row per configured experiment, grid or dataset of `config`."""
    statuses: dict[str, DataStatus] = {}

    def status(names: list[str]) -> str:
        for n in names:
            statuses.setdefault(n, data_status(config, n))
        return ", ".join(str(statuses[n]) for n in names) or "none"

    if kind == "experiments":
        return ("EXPERIMENT", "DATA", "DESCRIPTION"), [
            (name, status(experiment_datasets(exp)), one_line(exp.get("description")))
            for name, exp in (config.get("experiments") or {}).items()]
    if kind == "grids":
        return ("GRID", "DATA", "DESCRIPTION"), [
            (name, status(grid_datasets(config, name)), one_line(grid.get("description")))
            for name, grid in (config.get("grids") or {}).items()]
    if kind == "datasets":
        from ..data import get_loader  # heavy (pandas): `augsbert --help` imports this module

        out = []
        for name, definition in (config.get("datasets") or {}).items():
            found = data_status(config, name)
            what = get_loader(definition["loader"]).what
            if definition.get("unlabeled"):
                what += f"; unlabeled text {definition['unlabeled']}"
            if definition.get("topic_corpus"):
                what += f"; topic corpus {definition['topic_corpus'].get('format')} {definition['topic_corpus'].get('path')}"
            out.append((name, definition["loader"], "present" if found.present else f"MISSING ({found.problem})",
                        what))
        return ("DATASET", "LOADER", "DATA", "DESCRIPTION"), out
    raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")


def render_list(config: dict, kinds: tuple[str, ...] = KINDS, width: int | None = None) -> str:
    """`augsbert list`: a table per kind (a heading above each when there are several); `width`: see `table`."""
    parts = []
    for kind in kinds:
        header, body = rows(config, kind)
        text = table(header, body, width)
        parts.append(f"# {kind} ({len(body)})\n{text}" if len(kinds) > 1 else text)
    return "\n\n".join(parts)


def render_plan(specs: dict[str, dict]) -> str:
    """`augsbert plan`'s table: per experiment, one row per planned (seed, role) with its artifact and whether
    that artifact is already built (its folder exists; Snakemake writes it last, through a .partial folder)."""
    parts = []
    for name, spec in specs.items():
        head = f"experiment {name} (config {spec['config_hash']}, seeds {', '.join(map(str, spec['seeds']))})"
        description = one_line(spec["config"].get("description"))
        body = [(seed, role, run["stage"], run["path"], "yes" if Path(run["path"]).is_dir() else "no")
                for seed, roles in spec["runs"].items() for role, run in roles.items()]
        parts.append("\n".join([head, *([f"  {description}"] if description else []),
                                table(("SEED", "ROLE", "STAGE", "ARTIFACT", "BUILT"), body)]))
    return "\n\n".join(parts)
