"""What an exported model's card says beyond the library's template, from the artifacts alone.

`augsbert export` writes the library's own card (sentence-transformers' template; the Cross-Bi-Encoder's),
then `apply` adds what augsbert's artifacts hold, at the level of sentence-transformers' cards:

- YAML metadata: `base_model` (the hub id the model was planned from, or the hub id of a packaged alias),
  `datasets` (the hub dataset of a loader that has one), `widget` (Bi-Encoders: training sentences),
  `model-index` (the test Spearman / Pearson correlations of this seed, as fractions, as sentence-transformers
  writes them);
- sections: the training data (size, by source, per-column statistics and samples), the loss and its
  parameters, the hyperparameters that differ from the Hugging Face trainer's defaults, the training log and
  the citations (SBERT, Augmented SBERT, the thesis and the loss);
- and leaves out the template's sections with nothing to say: those it writes commented out and its links to
  the library's own resources.

Nothing is computed that the artifacts do not hold: the statistics are those of the training pairs the
stage read (the data and labels artifacts), the log is the artifact's metrics.json.

It reads tables and rebuilds losses and trainer arguments (pandas, torch, transformers): `augsbert export`
imports it when it writes a card, not with the command line's parser.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pandas as pd
import yaml
from huggingface_hub import snapshot_download
from transformers import TrainingArguments

from ..data.pool import read_split
from ..training.pair_job import student_training_set
from ..store.model_refs import ALIAS_HUB_IDS, ALIASES, local_path, reference_kind
from ..models.student_losses import student_loss
from ..params import read_params
from ..reporting.layout import row_of, row_stages
from ..stages.runs import INPUT_DATA
from ..store.artifacts import read_json
from ..training.pairs import training_args
from ..training.trainers import cross_encoder_loss
from ..stages.data import HUB_DATASET_OF_LOADER

SBERT = """@inproceedings{reimers-2019-sentence-bert,
    title = "Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks",
    author = "Reimers, Nils and Gurevych, Iryna",
    booktitle = "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing",
    month = "11",
    year = "2019",
    publisher = "Association for Computational Linguistics",
    url = "https://arxiv.org/abs/1908.10084",
}"""
AUGSBERT = """@inproceedings{thakur-2021-augsbert,
    title = "Augmented {SBERT}: Data Augmentation Method for Improving Bi-Encoders for Pairwise Sentence Scoring Tasks",
    author = "Thakur, Nandan and Reimers, Nils and Daxenberger, Johannes and Gurevych, Iryna",
    booktitle = "Proceedings of the 2021 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies",
    month = "6",
    year = "2021",
    publisher = "Association for Computational Linguistics",
    url = "https://arxiv.org/abs/2010.08240",
}"""
THESIS = """@misc{reiml-2023-sentence-embeddings,
    title = "Sentence Embeddings in Various Supervision Settings",
    author = "Reiml, Johanna",
    howpublished = "Thesis, Ludwig-Maximilians-Universit{\\"a}t M{\\"u}nchen (LMU Munich)",
    year = "2023",
}"""
# Hugging Face TrainingArguments keys that describe the machine or the run, not the training: left out of
# "non-default hyperparameters" (the precision used is not recorded in the artifact).
RUN_KEYS = {"output_dir", "report_to", "run_name", "use_cpu", "disable_tqdm", "dataloader_num_workers", "ddp_backend",
            "bf16", "fp16", "tf32", "save_strategy", "save_steps", "save_total_limit", "logging_steps"}
SAMPLES = 3


def hub_base(params: dict) -> str | None:
    """The base model's hub id: the id it was planned from (`hub:<id>@<revision>`), or the hub id of the
    packaged alias (`minilm-l6`: sentence-transformers/all-MiniLM-L6-v2); a local directory has none."""
    identity = (params.get("model_identity") or {}).get("model") or ""
    if identity.startswith("hub:"):
        return params.get("model")
    return ALIAS_HUB_IDS.get(params.get("model"))


# The language of each built-in corpus (the card's `language`); a dataset of your own has none recorded
DATASET_LANGUAGES = {"lee": "en", "stsb": "en", "bws_cross_topic": "en", "bws_in_topic": "en", "spanish_sts": "es"}


def base_card_field(params: dict, field: str):
    """A field of the base model's own card header (its README.md), read where the model is on this machine
    (a packaged alias, a local directory, the Hugging Face cache); None where it is not or has no such field."""
    ref = params.get("model")
    try:
        kind = reference_kind(ref)
        if kind == "alias":
            folder = Path(ALIASES[ref]())
        elif kind == "path":
            folder = local_path(ref)
        else:
            folder = Path(snapshot_download(ref, local_files_only=True))  # never the network here
        text = (folder / "README.md").read_text(encoding="utf-8")
        header = yaml.safe_load(text[4:text.index("\n---", 4)]) if text.startswith("---\n") else {}
    except Exception:  # no card, no header, not in the cache: the field stays unknown
        return None
    return header.get(field) if isinstance(header, dict) else None


def licence_and_language(spec: dict, node_spec: dict) -> dict:
    """`license`: the base model's (a fine-tuned model keeps its base's terms; the training data's own terms are
    the user's to check); `language`: the target corpus' (DATASET_LANGUAGES). Unknown ones are left out."""
    found = {"license": base_card_field(node_spec["params"], "license"),
             "language": DATASET_LANGUAGES.get((spec.get("dataset") or {}).get("loader"))}
    return {k: v for k, v in found.items() if v}


def hub_datasets(spec: dict) -> list[str]:
    """Hub datasets of the experiment's data (a loader whose `download: true` layout is a hub dataset)."""
    loaders = [spec.get("dataset", {}).get("loader")]
    found = [HUB_DATASET_OF_LOADER[loader] for loader in loaders if loader in HUB_DATASET_OF_LOADER]
    return list(dict.fromkeys(found))


def training_table(role: str, node_spec: dict) -> tuple[pd.DataFrame, str]:
    """The pairs the stage trained on and what they are: a Bi-Encoder's training set as the student stage
    builds it (gold and / or teacher-labelled pairs, by source), a teacher's gold train split."""
    inputs = node_spec["inputs"]
    if row_of(role).bi_encoder:
        table = student_training_set(inputs, bool(node_spec["params"]["use_gold_labels"]))
        return table, "the Bi-Encoder's training pairs, by source"
    table = read_split(inputs[INPUT_DATA], "train")
    symmetric = node_spec["params"].get("symmetric")
    return table.assign(source="gold"), "the gold train pairs" + (" (trained in both orders)" if symmetric else "")


def _words(texts: pd.Series) -> str:
    counts = texts.astype(str).str.split().str.len()
    return f"min: {int(counts.min())}, mean: {counts.mean():.2f}, max: {int(counts.max())} words"


def data_section(table: pd.DataFrame, what: str, dataset: str) -> list[str]:
    scores = table["score"].astype(float)
    lines = ["### Training data", "", f"`{dataset}`: {what}; {len(table)} pairs"
             + (" (" + ", ".join(f"{k} {v}" for k, v in table["source"].value_counts(sort=False).items()) + ")"
                if "source" in table else "") + ".", "",
             "| | sentence1 | sentence2 | score |", "| --- | --- | --- | --- |",
             "| type | string | string | float |",
             f"| details | {_words(table['sentence1'])} | {_words(table['sentence2'])} | "
             f"min: {scores.min():.4g}, mean: {scores.mean():.4g}, max: {scores.max():.4g} |", "",
             "Samples (the first pairs):", "", "| sentence1 | sentence2 | score |", "| --- | --- | --- |"]
    for row in table.head(SAMPLES).itertuples():
        cells = [str(row.sentence1).replace("|", "\\|"), str(row.sentence2).replace("|", "\\|"), f"{row.score:.4g}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _params(role: str, node_spec: dict):
    return read_params(row_stages()[role].params, node_spec, "spec.json")


def loss_of(arch: str, role: str, node_spec: dict, model) -> tuple[str, dict, str | None]:
    """The loss the stage trained with: its class, its parameters and its citation (if it has one)."""
    if arch == "cbe":
        return ("torch.nn.MSELoss (Hugging Face Trainer)",
                {"prediction": "cosine of the two segments' mean embeddings", "target": "the gold score"}, None)
    if arch == "be":
        loss = student_loss(model, _params(role, node_spec))
    else:
        loss = cross_encoder_loss(model, _params(role, node_spec))
    name = f"{type(loss).__module__.split('.')[0]}.{type(loss).__name__}"
    return name, loss.get_config_dict(), getattr(loss, "citation", None)


def non_default_hyperparameters(role: str, node_spec: dict, metrics: dict) -> dict:
    """The trainer arguments the stage set that differ from Hugging Face TrainingArguments' defaults (as
    sentence-transformers' cards list them), rebuilt from the stage's params and its recorded training size
    and seed."""
    params = _params(role, node_spec)
    if (metrics.get("static_lr_sweep") or {}).get("chosen") is not None:  # the rate the sweep chose on dev
        params = dataclasses.replace(params, lr=metrics["static_lr_sweep"]["chosen"])
    args = training_args(params, Path("."), int(metrics.get("seed", params.seed)), "cpu", "fp32",
                         int(metrics["train_pairs"]))
    defaults = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    return {k: v for k, v in args.items() if k not in RUN_KEYS and defaults.get(k, object()) != v}


def log_section(metrics: dict) -> list[str]:
    history = metrics.get("dev_history") or []
    if history:
        best = metrics.get("best_epoch")
        rows = [f"| {h['epoch']} | {h['step']} | {_num(h.get('train_loss'))} | {_num(h.get('dev_spearman'), 2)}"
                f"{' (chosen)' if h['epoch'] == best else ''} |" for h in history]
        return ["### Training logs", "", "| epoch | step | training loss | dev Spearman × 100 |",
                "| --- | --- | --- | --- |", *rows, ""]
    losses = metrics.get("loss_log") or []
    if losses:
        return ["### Training logs", "", "| step | training loss |", "| --- | --- |",
                *[f"| {h['step']} | {_num(h['loss'])} |" for h in losses], ""]
    return []


def _num(value, digits: int = 4) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def model_index(name: str, dataset: str, test: dict, arch: str) -> list[dict]:
    """`model-index` of the test correlations (stored × 100; written as fractions, as sentence-transformers)."""
    suffix = "_cosine" if arch == "be" else ""
    metrics = [{"type": f"{m}{suffix}", "value": round(float(test[m]) / 100, 6),
                "name": f"{m.capitalize()}{' Cosine' if suffix else ''}"}
               for m in ("pearson", "spearman") if isinstance(test.get(m), (int, float))]
    if not metrics:
        return []
    return [{"name": name, "results": [{"task": {"type": "semantic-similarity", "name": "Semantic Similarity"},
                                        "dataset": {"name": dataset, "type": dataset, "split": "test"},
                                        "metrics": metrics}]}]


def widget(table: pd.DataFrame) -> list[dict]:
    """A sentence-similarity widget: the first training sentence against the first partners."""
    partners = list(dict.fromkeys(table["sentence2"].astype(str).head(SAMPLES)))
    return [{"source_sentence": str(table["sentence1"].iloc[0]), "sentences": partners}]


def build(spec: dict, role: str, artifact: Path, arch: str, model, test: dict, title: str) -> tuple[dict, str, str]:
    """The metadata to merge into the card's YAML header, the training sections and the citation section."""
    node_spec, metrics = read_json(artifact / "spec.json"), read_json(artifact / "metrics.json")
    dataset = spec["config"]["dataset"]
    if row_stages()[role].card:  # a model whose stage writes its card's sections (the multilingual student)
        own, training, cited = row_stages()[role].load_card()(spec, artifact, test)
        metadata = {"base_model": hub_base(node_spec["params"]), **licence_and_language(spec, node_spec), **own,
                    "model-index": model_index(title, dataset, test, arch)}
        return {k: v for k, v in metadata.items() if v}, "\n".join(training), "\n".join(citations(cited))
    table, what = training_table(role, node_spec)
    loss, loss_config, loss_citation = loss_of(arch, role, node_spec, model)
    hyper = non_default_hyperparameters(role, node_spec, metrics)
    metadata: dict = {"base_model": hub_base(node_spec["params"]), "datasets": hub_datasets(spec),
                      **licence_and_language(spec, node_spec), "model-index": model_index(title, dataset, test, arch)}
    if arch == "be":
        metadata["widget"] = widget(table)
    training = [*data_section(table, what, dataset),
                "### Loss", "", f"`{loss}` with these parameters:", "", "```json",
                json.dumps(loss_config, indent=4, sort_keys=True), "```", "",
                "### Non-default hyperparameters", "",
                "The Hugging Face trainer arguments the stage set that differ from their defaults:", "",
                *[f"- `{k}`: {v}" for k, v in sorted(hyper.items())], "",
                *log_section(metrics)]
    cited = [(loss.rsplit(".", 1)[-1], loss_citation.strip())] if loss_citation else []
    return {k: v for k, v in metadata.items() if v}, "\n".join(training), "\n".join(citations(cited))


def citations(cited: list[tuple[str, str]]) -> list[str]:
    """The citation section: SBERT, Augmented SBERT, the thesis, then each (title, bibtex) of `cited`."""
    lines = ["## Citation", "", "### BibTeX", "", "#### Sentence Transformers (SBERT)", "", "```bibtex", SBERT,
             "```", "", "#### Augmented SBERT", "", "```bibtex", AUGSBERT, "```", "",
             "#### Sentence Embeddings in Various Supervision Settings (the thesis this implementation follows)",
             "", "```bibtex", THESIS, "```", ""]
    for title, bibtex in cited:
        lines += [f"#### {title}", "", "```bibtex", bibtex, "```", ""]
    return lines


def _cut_section(body: str, heading: str, until: str = "\n## ") -> str:
    """`body` without its section `heading` (up to the next heading that starts with `until`: by default the
    next second-level one)."""
    start = body.find(f"\n{heading}\n")
    if start < 0:
        return body
    ends = [at for at in (body.find(until, start + 1), body.find("\n<!--\n## ", start + 1)) if at >= 0]
    return body[:start + 1] + (body[min(ends) + 1:] if ends else "")


def unused_removed(body: str) -> str:
    """The template's sections and lines with nothing to say: those it writes commented out (`<!-- ... -->`:
    the training dataset, language and license when unknown, out-of-scope use, bias, glossary, card authors and
    contact); blank lines where they stood are collapsed."""
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"<!--.*?-->[ \t]*\n?", "", body, flags=re.S))


def apply(readme: Path, metadata: dict, training: str, citation: str) -> None:
    """Merge `metadata` into the card's YAML header, put `training` at the end of the augsbert training section
    and `citation` in place of the template's citation section, at the end. Of the rest only what
    `unused_removed` and the two cuts name goes: a second-level section another step of the export adds (a
    deployment section, say) stays where it was put."""
    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{readme}: the card has no YAML header")
    end = text.index("\n---\n", 4)
    header = yaml.safe_load(text[4:end]) or {}
    header.update(metadata)
    body = _cut_section(text[end + 5:], "## Citation")
    body = _cut_section(unused_removed(body), "## Additional Resources")  # the library's blog posts, not this model
    body = _cut_section(body, "### Model Sources", "\n#")  # the library's links, not this model's
    ours = body.find("## Training (augsbert)")
    at = body.find("\n## ", ours + 1) if ours >= 0 else -1
    body = body.rstrip() + "\n\n" + training if at < 0 else body[: at + 1] + training + "\n" + body[at + 1:]
    readme.write_text("---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000) + "---\n"
                      + body.rstrip() + "\n\n" + citation, encoding="utf-8")
