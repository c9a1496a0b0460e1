"""The config schema: loading it (the package's copy of workflow/schemas/config.schema.yaml), resolving its
references, and converting command-line strings back to the types it declares (`coerce`).

Its stage sections are written from the stages' options classes (augsbert.reference.schema), the `pretrain`
section with the objectives' options (augsbert.objectives): the file holds every key, nothing is added to it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import yaml

from ..errors import ConfigError


SCHEMA_RESOURCE = "schemas/config.schema.yaml"


# libyaml's safe loader where PyYAML was built with it: the same documents, ~8x faster on the schema,
# which every dry run and CLI call reads
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_schema(resource: str = SCHEMA_RESOURCE) -> dict:
    """A JSON schema shipped in the package (mirrored in workflow/schemas): the config's by default."""
    text = resources.files("augsbert").joinpath(resource).read_text()
    return yaml.load(text, Loader=SAFE_LOADER)


def not_mapping(value: Any, where: str) -> str:
    """What stands where a mapping belongs; for a string (a `snakemake --config` value, read as YAML by
    Snakemake, stays a string when it does not parse: `experiments={a`), why it did not parse."""
    if not isinstance(value, str) or value.strip()[:1] not in ("{", "["):  # a plain string: meant as no mapping
        return type(value).__name__
    try:
        yaml.safe_load(value)
        why = "it is no {key: value} mapping"
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        why = (f"it is not valid YAML: {getattr(err, 'problem', None) or err}"
               + (f" at column {mark.column + 1}" if mark is not None else ""))
    top, _, rest = where.partition(".")
    if value.strip()[:1] == "[":
        why, example = why.replace("no {key: value} mapping", "no list"), f"{where}=[...]"
    elif rest:
        example = f"{top}={{{rest}: {{option: value}}}}"
    else:
        example = f"{top}={{name: {{option: value}}}}"
    return (f"the string {value!r} ({why}); a --config value is YAML in flow style: quote the whole argument, "
            f"e.g. --config '{example}'")


# ---------------------------------------------------------------- coercion
def resolve_ref(schema: dict, root: dict) -> dict:
    """Follow local `$ref`s (`#/...`), keeping sibling keywords."""
    while "$ref" in schema and schema["$ref"].startswith("#/"):
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _branches(schema: dict, root: dict) -> list[dict]:
    """The schema plus every sub-schema that may add properties (allOf, then)."""
    schema = resolve_ref(schema, root)
    out = [schema]
    for sub in schema.get("allOf", []):
        out.extend(_branches(sub, root))
        if "then" in sub:
            out.extend(_branches(sub["then"], root))
    return out


def _types(schema: dict) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


_TRUE = {"true", "yes", "on"}


_FALSE = {"false", "no", "off"}


def _coerce_scalar(value: str, types: list[str], path: tuple = ()) -> Any:
    """Convert a command-line string to the first schema type it parses as (a list or mapping that is no valid
    YAML, `--config 'seeds=[1'`: one message naming the key; it ended in a YAML traceback)."""
    text = value.strip()
    unparsed = False
    if "null" in types and text.lower() in {"null", "none", "~"}:
        return None
    if "string" in types:
        return value
    for t in types:
        try:
            if t == "integer":
                return int(text)
            if t == "number":
                number = float(text)
                return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            if t == "boolean" and text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            if t == "null" and text.lower() in {"null", "none", "~", ""}:
                return None
            if t in ("array", "object"):
                try:
                    parsed = yaml.safe_load(text)
                except yaml.YAMLError:
                    if text[:1] in "[{":  # meant as a list or mapping: said below, outside this `except ValueError`
                        unparsed = True
                    continue
                if isinstance(parsed, list if t == "array" else dict):
                    return parsed
        except ValueError:
            continue
    if unparsed:
        where = format_path(list(path))
        raise ConfigError(f"{where}: {not_mapping(value, where)}")
    return value  # leave it; validation reports the type error with its path


def coerce(value: Any, schema: dict, root: dict | None = None, path: tuple = ()) -> Any:
    """Return `value` with strings converted to the types `schema` declares (`path`: where `value` stands)."""
    root = root if root is not None else schema
    branches = _branches(schema, root)
    types = [t for b in branches for t in _types(b)]
    if isinstance(value, str) and types and (types != ["string"]):
        value = _coerce_scalar(value, types, path)
    if isinstance(value, dict):
        props: dict[str, dict] = {}
        extra: list[dict] = []
        for b in branches:
            props.update(b.get("properties", {}))
            if isinstance(b.get("additionalProperties"), dict):
                extra.append(b["additionalProperties"])
        return {
            k: coerce(v, props[k], root, (*path, k)) if k in props
            else (coerce(v, extra[0], root, (*path, k)) if extra else v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), None)
        return [coerce(v, items, root, (*path, i)) for i, v in enumerate(value)] if items else value
    return value


def format_path(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def allowed_keys(schema: dict, instance: Mapping, root: dict) -> set[str]:
    """Property names `schema` declares for `instance`: its own, those of allOf / $ref, and of each
    `then` whose `if` holds (a dataset's keys depend on its loader)."""
    from jsonschema import Draft202012Validator

    schema = resolve_ref(schema, root)
    names = set(schema.get("properties", {}))
    for sub in schema.get("allOf", []):
        names |= allowed_keys(sub, instance, root)
    if "if" in schema and "then" in schema and Draft202012Validator(schema["if"]).is_valid(instance):
        names |= allowed_keys(schema["then"], instance, root)
    return names
