"""What an exported multilingual student's model card says (the `multilingual` stage's `card`, written by `augsbert
export` through augsbert.export.model_card): its languages and their figures, its parallel data and its loss.

The figures are the ones the export found for this model (the results file's, else its metrics.json's test): per
language, the `language_suite`'s figures x 100 (`<figure>@<language>`, or the unsuffixed ones for the experiment's
`multilingual.language`); a language without figures says so."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..stages.multilingual import TARGETS, MultilingualOptions
from ..store.artifacts import read_json

PAPER = """@inproceedings{reimers-2020-multilingual-sentence-bert,
    title = "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation",
    author = "Reimers, Nils and Gurevych, Iryna",
    booktitle = "Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing",
    month = "11",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://arxiv.org/abs/2004.09813",
}"""
FIGURES = {"sts_l_l": "l-l STS ρ", "sts_en_l": "en-l STS ρ", "sts_l_en": "l-en STS ρ",
           "translation_acc": "translation acc.", "unk_share": "[UNK] %"}
SAMPLES = 3
SCHEDULE = ("epochs", "max_steps", "batch_size", "lr", "warmup_ratio", "weight_decay", "max_length", "max_per_language")


def _cell(value) -> str:
    return "–" if not isinstance(value, (int, float)) or value != value else f"{value:.2f}"


def language_figures(spec: dict, test: dict, languages: list[str]) -> list[str]:
    """The figures table: a row per language, a column per figure."""
    reported = ((spec.get("config") or {}).get(MultilingualOptions.SECTION) or {}).get("language")
    lines = ["| language | " + " | ".join(FIGURES.values()) + " |", "|---" * (len(FIGURES) + 1) + "|"]
    for language in languages:
        values = [test.get(f"{figure}@{language}", test.get(figure) if language == reported else None)
                  for figure in FIGURES]
        lines.append(f"| {language} | " + " | ".join(_cell(v) for v in values) + " |")
    return lines


def card(spec: dict, artifact: Path, test: dict) -> tuple[dict, list[str], list[tuple[str, str]]]:
    """The card's metadata (`language`: the source language and the student's), its training section and the
    paper's citation, from the student's artifact and the one of its targets (`source_embeddings`)."""
    node_spec, metrics = read_json(artifact / "spec.json"), read_json(artifact / "metrics.json")
    targets = Path(node_spec["inputs"][TARGETS])
    target_metrics = read_json(targets / "metrics.json")
    parallel = read_json(Path(read_json(targets / "spec.json")["inputs"]["parallel"]) / "metrics.json")
    source = (parallel.get("info") or {}).get("source_language", "en")
    languages = list(metrics.get("pairs_per_language") or {})
    pairs = pd.read_parquet(targets / "pairs.parquet")
    params = node_spec["params"]
    per_language = ", ".join(f"{k} {v}" for k, v in (metrics.get("pairs_per_language") or {}).items())
    lines = ["### Languages and their figures", "",
             f"The student maps {source} and {', '.join(languages)} sentences into its teacher's {source} vector "
             f"space. Figures × 100 on the parallel dataset `{parallel.get('dataset')}`'s test split: monolingual STS "
             f"(l-l) and cross-lingual STS ({source}-l, l-{source}) Spearman, translation retrieval accuracy (each "
             f"{source} test sentence: is its own translation the nearest of all the language's test sentences) and "
             "the share of [UNK] tokens in the language's test sentences (what the vocabulary cannot read).", "",
             *language_figures(spec, test, languages), "",
             "### Training data", "",
             f"`{parallel.get('dataset')}`: {metrics.get('train_pairs')} parallel pairs ({per_language}) of "
             f"{target_metrics.get('sources')} distinct {source} originals, embedded once by the teacher "
             f"(`{target_metrics.get('teacher_model')}`, {target_metrics.get('dimension')} dimensions); "
             f"{target_metrics.get('dropped', 0)} pairs holding a dev or test sentence were dropped.", "",
             "Samples (the first pairs):", "", "| language | source | target |", "| --- | --- | --- |",
             *[f"| {r.language} | {str(r.source).replace('|', chr(92) + '|')} | "
               f"{str(r.target).replace('|', chr(92) + '|')} |" for r in pairs.head(SAMPLES).itertuples()], "",
             "### Loss", "",
             "`sentence_transformers.MSELoss`: the mean of MSE(M̂(s), M(s)) and MSE(M̂(t), M(s)) over a batch of "
             "parallel pairs (s, t), M the teacher, M̂ the student (multilingual knowledge distillation"
             + ("; a trained linear layer maps the student's dimensions to the teacher's" if metrics.get("projection")
                else "") + ").", "",
             "### Settings", "",
             *[f"- `{k}`: {params[k]}" for k in SCHEDULE if k in params], "",
             "### Training logs", "",
             f"{metrics.get('steps')} steps, final mean training loss {metrics.get('train_loss')}.", ""]
    return {"language": [source, *languages]}, lines, [("Making Monolingual Sentence Embeddings Multilingual using "
                                                       "Knowledge Distillation", PAPER)]
