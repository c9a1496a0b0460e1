"""Render the config schema as the Markdown configuration reference.

The schema is the single source of every key's description and default. The
reference page of the documentation (reference/configuration.md) is generated
from it while the site is built (docs/hooks/config_reference.py, a MkDocs
hook); `augsbert config-reference` prints the same page. Nothing keeps a copy.
A key without a description stops the rendering, and so the docs build.
"""

from __future__ import annotations

import json

from .schema import load_schema, resolve_ref

HEADER = """# Configuration reference

Generated from the config schema (`src/augsbert/schemas/config.schema.yaml`,
mirrored in `workflow/schemas/`) each time the documentation is built; the same
page is printed by `augsbert config-reference`. Change a description in the
schema, not here.

`config/config.yaml` holds the defaults and the named experiments. Each
experiment deep-merges its own section over `defaults`. Override from the
command line with `--configfile my.yaml` (a YAML file merged over
config/config.yaml) or `--config 'experiments={demo_zeroshot: {suite: {batch_size: 32}}}'`
(values are converted back to the types below). Unknown keys are errors.
"""


def _fmt(value) -> str:
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _type(schema: dict) -> str:
    t = schema.get("type", "")
    types = t if isinstance(t, list) else [t]
    text = " or ".join(x for x in types if x)
    if "enum" in schema:
        text += " (" + " \\| ".join(str(v) for v in schema["enum"]) + ")"
    return text


class MissingDescription(ValueError):
    """Schema keys without a description: the reference would show an empty row for them."""


def _rows(properties: dict, prefix: str, root: dict, missing: list[str]) -> list[str]:
    rows = []
    for name, sub in properties.items():
        sub = resolve_ref(sub, root)
        key = f"{prefix}{name}"
        desc = " ".join(str(sub.get("description", "")).split()).replace("|", "\\|")
        if not desc:
            missing.append(key)
        rows.append(f"| `{key}` | {_type(sub)} | {_fmt(sub.get('default'))} | {desc} |")
        if sub.get("type") == "object" and "properties" in sub:
            rows.extend(_rows(sub["properties"], f"{key}.", root, missing))
        items = resolve_ref(sub["items"], root) if isinstance(sub.get("items"), dict) else {}
        if sub.get("type") == "array" and "properties" in items:  # a list of objects (teacher.ensemble)
            rows.extend(_rows(items["properties"], f"{key}[].", root, missing))
    return rows


def _table(title: str, intro: str, rows: list[str]) -> str:
    head = "| key | type | default | meaning |\n| --- | --- | --- | --- |"
    return f"\n## {title}\n\n{intro}\n\n{head}\n" + "\n".join(rows) + "\n"


def render(schema: dict | None = None) -> str:
    """The reference page of `schema` (default: the package's config schema).

    Raises MissingDescription naming every key that has no description.
    """
    schema = load_schema() if schema is None else schema
    missing: list[str] = []
    defs = schema["$defs"]
    top = {k: v for k, v in schema["properties"].items() if k not in ("defaults", "experiments", "datasets")}
    out = [HEADER, _table("Top level", " ".join(schema["description"].split()), _rows(top, "", schema, missing))]
    out.append(_table("Stage options (`defaults.*`, or per experiment)",
                      "Set under `defaults:` for all experiments or inside one experiment.",
                      _rows(defs["stage_options"]["properties"], "", schema, missing)))
    out.append(_table("Experiment-only keys (`experiments.<name>.*`)",
                      " ".join(defs["experiment"]["description"].split()),
                      _rows(defs["experiment"]["properties"], "", schema, missing)))
    dataset = defs["dataset"]
    out.append(_table("Datasets (`datasets.<name>.*`): keys of every loader",
                      " ".join(dataset["description"].split()), _rows(dataset["properties"], "", schema, missing)))
    for branch in dataset["allOf"]:
        cond = branch["if"]["properties"]["loader"]
        loaders = cond.get("enum") or [cond["const"]]
        required = branch["then"].get("required", [])
        intro = f"Loader {', '.join(f'`{x}`' for x in loaders)}." + (
            f" Required: {', '.join(f'`{r}`' for r in required)}." if required else "")
        out.append(_table(f"Dataset keys for {' / '.join(loaders)}", intro,
                          _rows(branch["then"]["properties"], "", schema, missing)))
    if missing:
        raise MissingDescription("config schema keys without a description (add one to "
                                 "src/augsbert/schemas/config.schema.yaml): " + ", ".join(missing))
    return "".join(out)
