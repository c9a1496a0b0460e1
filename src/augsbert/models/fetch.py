"""`augsbert fetch --experiment X`: put every hub model and dataset an experiment needs into the local cache.

Compute nodes of many clusters have no internet. Run this where there is (the login node), then run the
jobs with `HF_HUB_OFFLINE=1` (profiles/slurm sets it): they find everything in the Hugging Face cache
(`HF_HOME`, default ~/.cache/huggingface, which must be on a file system the compute nodes see).

What an experiment references is read from its plan, so it is exactly what its jobs will load: the
`model` / `semantic_model` of every node it uses (base models, a teacher's or student's own
`base_model`, pre-training and sampling encoders), at the revision `hub_revisions` pins, and the hub
datasets of its data stage (`download: true`) and of its STS suite (`suite.sts_hub`). Local
directories and packaged aliases (`minilm-l6`) need no download and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import DataError
from . import ModelResolutionError
from ..store.model_refs import reference_kind
from ..stages import REGISTRY
from ..planning.graph import SEMANTIC_CHOICES


@dataclass(frozen=True, order=True)
class HubItem:
    repo_type: str  # "model" or "dataset"
    repo_id: str
    revision: str | None = None


def experiment_nodes(plan, name: str) -> list:
    """Every node the experiment's runs use, with everything upstream of them, in key order."""
    exp = plan.experiment(name)
    todo = [key for roles in exp.runs.values() for key in roles.values()]
    seen: dict[str, object] = {}
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        node = plan.nodes[key]
        seen[key] = node
        todo.extend(upstream for _, upstream in node.inputs)
    return [seen[key] for key in sorted(seen)]


def hub_items(plan, name: str) -> list[HubItem]:
    """The hub models and datasets experiment `name` needs, sorted (models and datasets by id)."""
    revisions = plan.config.get("hub_revisions") or {}
    items: set[HubItem] = set()
    for node in experiment_nodes(plan, name):
        settings = node.settings
        # a GPL chain's generator, retrievers and false-negative filter are models too
        refs = [settings.get(f) for f in ("model", "semantic_model", "generator", "cross_encoder")]
        for ref in refs + list(settings.get("retrievers") or []):
            if isinstance(ref, str) and ref not in SEMANTIC_CHOICES and reference_kind(ref) == "hub":
                items.add(HubItem("model", ref, revisions.get(ref)))
        hub_datasets = REGISTRY[node.stage].hub_datasets  # the data's download, the STS suite's hub tasks
        items.update(HubItem("dataset", repo) for repo in (hub_datasets(node) if hub_datasets else ()))
    return sorted(items)


def _snapshot_download(item: HubItem) -> str:
    from huggingface_hub import snapshot_download

    return snapshot_download(item.repo_id, repo_type=item.repo_type, revision=item.revision, etag_timeout=10)


def fetch(plan, name: str, download: Callable[[HubItem], str] = _snapshot_download,
          report: Callable[[str], None] = print) -> list[HubItem]:
    """Download every item of `hub_items` (already cached files are not fetched again); return them.

    The first failure ends the run with one message naming the item (a model failure as
    ModelResolutionError, a dataset failure as DataError: exit code 2 from the CLI).
    """
    items = hub_items(plan, name)
    if not items:
        report(f"experiment '{name}' needs nothing from the Hugging Face hub (local models and data only)")
    for item in items:
        at = f" at revision {item.revision}" if item.revision else ""
        try:
            path = download(item)
        except Exception as err:  # network errors come in many types
            first = str(err).splitlines()[0] if str(err) else ""
            message = (f"cannot download {item.repo_type} '{item.repo_id}'{at} from the Hugging Face hub "
                       f"({type(err).__name__}: {first}); run `augsbert fetch` where the hub is reachable "
                       "(e.g. the login node), with HF_HOME on a file system the compute nodes share")
            if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
                message += "; HF_HUB_OFFLINE is set here: unset it for the download"
            if item.repo_type == "model":
                raise ModelResolutionError(message) from None
            raise DataError(message) from None
        report(f"{item.repo_type} {item.repo_id}{at}: {path}")
    return items
