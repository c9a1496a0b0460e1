"""Stage `language_suite`: a Bi-Encoder's figures per language of a parallel dataset (augsbert.evaluation.multilingual),
for the experiment's `multilingual.language` (figures as named) or every language (named `<figure>@<language>`)."""

from __future__ import annotations

from pathlib import Path

from ..data import DataError
from ..data.parallel import dataset_languages
from ..evaluation.multilingual import language_figures
from ..evaluation.similarity import Encoder
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..models.inference import tokenizer_of
from ..params import read_params
from ..stages.language_suite import LanguageSuiteParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(LanguageSuiteParams, spec), spec["inputs"]
    parallel = inputs["parallel"]
    languages = dataset_languages(parallel)
    if params.language and params.language not in languages:
        raise DataError(f"multilingual.language: {params.language!r} is not a language of {parallel} "
                        f"({', '.join(languages)})")
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        ref = str(Path(inputs["model"]) / "model") if "model" in inputs else model_path(params, params.model)
        model = load_bi_encoder(ref, device, params.max_length)
        encode = Encoder(model, params.batch_size, show_progress=False)
        summary, skipped, details = {}, {}, {}
        for language in [params.language] if params.language else languages:
            figures, details[language], passed = language_figures(encode, tokenizer_of(model), parallel, language)
            suffix = "" if params.language else f"@{language}"
            summary.update({f"{figure}{suffix}": value for figure, value in figures.items()})
            skipped.update({f"{figure}{suffix}": why for figure, why in passed.items()})
        metrics = {"model": params.model or inputs["model"], "device": device, "languages": list(details),
                   "summary": summary, "skipped": skipped, "details": details}
        write_json(tmp / "metrics.json", metrics)
    return metrics
