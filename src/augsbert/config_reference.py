"""Render the config schema as the Markdown reference in config/README.md.

The schema is the single source of every key's description and default; the
reference is generated from it (`augsbert config-reference > config/README.md`)
and a test fails when the two drift apart.
"""

from __future__ import annotations

import json

from .config import load_schema, resolve_ref

HEADER = """# Configuration reference

Generated from `workflow/schemas/config.schema.yaml` by
`augsbert config-reference > config/README.md`; do not edit by hand.

`config/config.yaml` holds the defaults and the named experiments. Each
experiment deep-merges its own section over `defaults`. Override from the
command line with `--configfile my.yaml` (a YAML file merged over
config/config.yaml) or `--config 'experiments={demo_zeroshot: {evaluation: {batch_size: 32}}}'`
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


def _rows(properties: dict, prefix: str, root: dict) -> list[str]:
    rows = []
    for name, sub in properties.items():
        sub = resolve_ref(sub, root)
        key = f"{prefix}{name}"
        desc = " ".join(str(sub.get("description", "")).split()).replace("|", "\\|")
        rows.append(f"| `{key}` | {_type(sub)} | {_fmt(sub.get('default'))} | {desc} |")
        if sub.get("type") == "object" and "properties" in sub:
            rows.extend(_rows(sub["properties"], f"{key}.", root))
    return rows


def _table(title: str, intro: str, rows: list[str]) -> str:
    head = "| key | type | default | meaning |\n| --- | --- | --- | --- |"
    return f"\n## {title}\n\n{intro}\n\n{head}\n" + "\n".join(rows) + "\n"


def render() -> str:
    schema = load_schema()
    defs = schema["$defs"]
    top = {k: v for k, v in schema["properties"].items() if k not in ("defaults", "experiments", "datasets")}
    out = [HEADER, _table("Top level", " ".join(schema["description"].split()), _rows(top, "", schema))]
    out.append(_table("Stage options (`defaults.*`, or per experiment)",
                      "Set under `defaults:` for all experiments or inside one experiment.",
                      _rows(defs["stage_options"]["properties"], "", schema)))
    out.append(_table("Experiment-only keys (`experiments.<name>.*`)",
                      " ".join(defs["experiment"]["description"].split()),
                      _rows(defs["experiment"]["properties"], "", schema)))
    dataset = defs["dataset"]
    out.append(_table("Datasets (`datasets.<name>.*`): keys of every loader",
                      " ".join(dataset["description"].split()), _rows(dataset["properties"], "", schema)))
    for branch in dataset["allOf"]:
        cond = branch["if"]["properties"]["loader"]
        loaders = cond.get("enum") or [cond["const"]]
        required = branch["then"].get("required", [])
        intro = f"Loader {', '.join(f'`{x}`' for x in loaders)}." + (
            f" Required: {', '.join(f'`{r}`' for r in required)}." if required else "")
        out.append(_table(f"Dataset keys for {' / '.join(loaders)}", intro,
                          _rows(branch["then"]["properties"], "", schema)))
    return "".join(out)
