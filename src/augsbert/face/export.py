"""`augsbert export`: copy a finished model out of its hashed artifact into a named directory.

Bi-Encoders (student, lower bound) are written as sentence-transformers
`SentenceTransformer` directories, Cross-Encoder teachers as `CrossEncoder`
directories, Cross-Bi-Encoder teachers with `CrossBiEncoder.save_pretrained`.
Each gets a model card: the library's own card (sentence-transformers'
template; the CBE's card for a CBE) plus a section with what augsbert knows of
the model: base model, data, teacher, sampling and silver counts, the settings
that entered the artifact keys of the model and its inputs, the test metrics of
the results file, the config hash and the commands that reproduce it (a config
pruned to the options that give the model its key: augsbert.face.recipe); augsbert.face.model_card adds the training data's
statistics and samples, the loss, the non-default hyperparameters, the training
log, the citations and the YAML metadata (base_model, datasets, widget,
model-index). `augsbert_export.json` beside it says where it
came from.

An experiment may have several seeds: the first is exported unless `seed` is
given. The target is written under a temporary name and renamed when
complete; an existing non-empty target is never touched without `force`, and
`force` replaces only a directory an earlier export wrote: its marker lists each file
with its digest, and a file added there (an empty folder too) or edited since is named
and kept (nothing is replaced) unless `discard_edits` allows replacing the edited ones.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
from pathlib import Path

import yaml

from ..config.load import load_configs
from ..config.names import check_name
from ..config.yaml_files import config_needs
from ..plan import Plan
from ..store.artifacts import (
    FORBIDDEN,
    FULL_OR_READ_ONLY,
    check_artifact,
    partial_name,
    read_json,
    write_failure,
    write_json,
    writing,
)
from ..reporting.results import labelling_artifact
from ..store.keys import is_key
from ..store.manifests import MANIFEST, file_digest, problems
from ..store.results_files import read_results
from .backends import (BACKENDS, CALIBRATION_SENTENCES, ONNX_CONFIGS, PARITY_MIN_COSINE, PARITY_SENTENCES,
                       QUANTIZATIONS, backend_available)
from ..jobs.specs import check_aggregate_spec, load_spec
from ..reporting.layout import row_stages, table_rows
from ..stages import REGISTRY
from ..stages.candidates import CANDIDATES
from ..stages.runs import INPUT_DATA, INPUT_LABELS, INPUT_TEACHER
from ..stages.student import STUDENT
from .recipe import prune, recipe_name

log = logging.getLogger(__name__)

# What `--model` can name (the rows whose stage declares them exportable, `Row.export`: the card's title), the
# default, and the Snakemake wildcard pattern of models/<experiment>/<model>/.
ROLE_TITLES = {role: row.export for role, row in sorted(table_rows().items(), key=lambda item: -item[1].place)
               if row.export}
EXPORT_MODELS = tuple(ROLE_TITLES)
DEFAULT_MODEL = STUDENT.roles[0]
MODEL_WILDCARD = "|".join(EXPORT_MODELS)
MARKER = "augsbert_export.json"  # provenance of an export; also what lets --force replace a directory
ARCH_TITLES = {"be": "Bi-Encoder (SentenceTransformer)", "ce": "Cross-Encoder", "cbe": "Cross-Bi-Encoder"}


class ExportError(ValueError):
    """An export that cannot be done as asked (no such model or seed, unfinished artifact, occupied target)."""


def select(spec: dict, model: str, seed: int | None) -> tuple[int, dict]:
    """The seed (first of the experiment unless given) and the run node of `model` for it."""
    seeds = [int(s) for s in spec["seeds"]]
    seed = seeds[0] if seed is None else seed
    runs = spec["runs"].get(str(seed))
    if runs is None:
        raise ExportError(f"experiment '{spec['experiment']}' has no seed {seed} (seeds: {seeds})")
    if model not in runs:
        models = [r for r in EXPORT_MODELS if r in runs]
        raise ExportError(f"experiment '{spec['experiment']}' has no {model} model (it has: "
                          f"{', '.join(models) or 'none of ' + ', '.join(EXPORT_MODELS)}; see its `models` option)")
    return seed, runs[model]


def _finished(node: dict) -> Path:
    path = Path(node["path"])
    if (path / "ensemble.json").is_file():
        raise ExportError(f"{path} is a teacher ensemble (teacher.ensemble): it has no model of its own; export "
                          "its members' artifacts (the results' teacher_member_<k> entries) one by one")
    if path.is_dir() and (incomplete := problems(path)[:1]) and incomplete[0].startswith("incomplete"):
        # Snakemake takes the folder for built and plans nothing for it (issue 64, V1): it must go first
        raise ExportError(f"{path} is {incomplete[0]}; move it aside with `augsbert verify --repair`, then build it "
                          f"(`augsbert run <your config> {path}`)")
    if not (path / "metrics.json").is_file() or not (path / "model").is_dir():
        raise ExportError(f"{path} is not a finished artifact: train it first, e.g. "
                          f"`snakemake --cores 2 {path}` (or the experiment's results file)")
    return path


def _results_metrics(results: dict | None, role: str, seed: int, artifact: Path) -> tuple[dict | None, dict | None]:
    """This seed's metrics and the summary over seeds from the results file, if it describes this very artifact."""
    if results is None:
        return None, None
    entry = (results.get("models") or {}).get(role) or {}
    recorded = ((entry.get("artifacts") or {}).get(str(seed)) or {}).get("model")
    if recorded is None or os.path.normpath(recorded) != os.path.normpath(str(artifact)):
        return None, None  # the results file is older than the artifact (another config): its numbers are not this model's
    return entry["per_seed"][str(seed)], entry.get("summary")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    if isinstance(value, (bool, dict, list)) or value is None:
        return "`" + json.dumps(value, sort_keys=True) + "`"
    return f"`{value}`" if isinstance(value, str) else str(value)


def _table(rows: list[tuple[str, str]]) -> list[str]:
    return ["| | |", "| --- | --- |", *[f"| {k} | {v} |" for k, v in rows]]


def _base_model(params: dict, inputs: dict) -> str:
    text = f"`{params.get('model')}`"
    identity = (params.get("model_identity") or {}).get("model")
    if identity:
        text += f" ({identity})"
    init = inputs.get("init")
    if init:
        stage = Path(init).parent.name  # artifacts/<stage>/<key>
        what = (REGISTRY[stage].checkpoint if stage in REGISTRY else "") or stage
        text += f", started from the {what} checkpoint `{Path(init).name}`"
    return text


def training_facts(spec: dict, role: str, seed: int, node: dict, results: dict | None,
                   results_path: str | None, to_hint: str) -> tuple[str, dict]:
    """The augsbert section of the model card (Markdown) and the facts as JSON for augsbert_export.json."""
    artifact = Path(node["path"])
    node_spec, metrics = read_json(artifact / "spec.json"), read_json(artifact / "metrics.json")
    params, inputs = node_spec["params"], node_spec["inputs"]
    config = spec["config"]
    arch = metrics.get("arch", "be")
    name = spec["experiment"]
    facts: dict = {"experiment": name, "model": role, "seed": seed, "seeds": spec["seeds"], "arch": arch,
                   "artifact": str(artifact), "key": node["key"], "config_hash": spec["config_hash"]}
    rows = [("experiment", f"`{name}`" + (f": {config['description']}" if config.get("description") else "")),
            ("model", f"{ROLE_TITLES[role]}, {ARCH_TITLES[arch]}"),
            ("seed", f"{seed} (the experiment's seeds: {', '.join(map(str, spec['seeds']))}; "
                     f"{'the first, exported by default' if seed == spec['seeds'][0] else 'chosen with --seed'})"),
            ("base model", _base_model(params, inputs))]
    dataset = config["dataset"]
    source = config.get("source")
    if source and source != dataset:
        rows.append(("data", f"teacher and gold from `{source}`, silver sentences and test split from `{dataset}` "
                             "(domain transfer)"))
    else:
        rows.append(("data", f"`{dataset}` (train / dev / test splits)"))
    data_metrics = read_json(Path(inputs[INPUT_DATA]) / "metrics.json") if INPUT_DATA in inputs else {}
    if data_metrics.get("sizes"):
        sizes = data_metrics["sizes"]
        rows.append(("data sizes", ", ".join(f"{k} {v}" for k, v in sizes.items())))
        facts["data_sizes"] = sizes
    if metrics.get("train_pairs") is not None:
        rows.append(("training pairs", str(metrics["train_pairs"])))
    if INPUT_LABELS in inputs:  # the student (the lower bound and the teacher have no labels)
        labels = labelling_artifact(Path(inputs[INPUT_LABELS]))  # under any stage that refines the labels
        stats = read_json(labels / "sampling_stats.json")
        teacher = Path(read_json(labels / "spec.json")["inputs"][INPUT_TEACHER])
        teacher_test = read_json(teacher / "metrics.json").get("test", {})
        rows.append(("teacher", f"{ARCH_TITLES.get(stats.get('teacher_arch'), stats.get('teacher_arch'))} "
                                f"`{teacher.name}`, test Spearman {_fmt(teacher_test.get('spearman'))}"))
        candidate_options = config.get(CANDIDATES.section, {})
        rows.append(("sampling", ", ".join(f"{k} {_fmt(candidate_options[k])}" for k in
                                           ("strategies", "top_k", "pool", "semantic_model") if k in candidate_options)))
        per_strategy = {("relabelled gold" if s == "gold" else s): v.get("after_dedup", v.get("kept"))
                        for s, v in stats.get("strategies", {}).items()}
        rows.append(("silver pairs (teacher-labelled)",
                     ", ".join(f"{s} {n}" for s, n in per_strategy.items()) + f"; {stats.get('pairs')} in total"))
        facts.update(teacher=teacher.name, silver=per_strategy)
    if metrics.get("training_set"):
        rows.append(("training set by source", ", ".join(f"{k} {v}" for k, v in metrics["training_set"].items())))
        facts["training_set"] = metrics["training_set"]
    data_spec = Path(inputs[INPUT_DATA]) / "spec.json" if INPUT_DATA in inputs else None
    data_dir = read_json(data_spec)["params"].get("data_dir") if data_spec and data_spec.is_file() else None
    recipe, own, unpruned = reproduce_recipe(spec, role, seed, node, data_dir)
    chain = keyed_settings(artifact)
    if metrics.get("best_epoch") is not None:
        rows.append(("chosen epoch", chosen_epoch(metrics, params)))
    if metrics.get("static_lr_sweep"):
        rows.append(("learning rate", chosen_rate_text(metrics["static_lr_sweep"])))
        facts["static_lr"] = metrics["static_lr_sweep"]["chosen"]
    rows.append(("config hash", f"`{spec['config_hash']}` (artifact `{node['key']}`)"))
    facts["settings"] = chain[0][2]  # the keyed params of the model's stage; of all it was built from:
    facts["built_from"] = [{"key": key, "stage": stage, "settings": options} for key, stage, options in chain[1:]]

    per_seed, summary = _results_metrics(results, role, seed, artifact)
    if per_seed is not None:
        source_text = f"from `{results_path}`"
        values = {k: v for k, v in per_seed.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    else:
        source_text = (f"from the artifact's metrics.json ({'no results file' if results is None else 'the results file'}"
                       f"{'' if results is None else ' describes another artifact for this model'}; run "
                       f"`snakemake results/{name}.json` for the evaluation suite)")
        values = dict(metrics.get("test", {}))
        summary = None
    facts["test_metrics"] = values
    section = recipe["experiments"][own].get(row_stages()[role].section) or {}
    mark = {"selection": " (what the recipe's `selection: null` means here)"} \
        if section.get("selection", "unset") is None else {}
    warnings = chain_warnings(artifact)
    facts["warnings"] = warnings
    lines = ["## Training (augsbert)", "", *_table(rows), "",
             *(["### Warnings", "",
                "Recorded by the jobs this model was built from (its data, its silver pairs); a test pair also seen "
                "in training inflates the test scores below.", "",
                *[f"- {w}" for w in warnings], ""] if warnings else []),
             "### Settings (what entered the artifact keys)", "",
             "The options of this model's stage and of each artifact it was built from, as planned (their key hashes "
             "them; runtime settings such as the evaluation batch size are left out).", "",
             "| artifact | stage | settings |", "| --- | --- | --- |",
             *[f"| `{key}` | {stage} | " + ", ".join(f"{k} {_fmt(v)}{mark.get(k, '') if at == 0 else ''}"
                                                     for k, v in options.items()).replace("|", "\\|") + " |"
               for at, (key, stage, options) in enumerate(chain)], "",
             f"### Test metrics ({source_text})", "",
             "Correlations × 100 with gold on the target test split (cosine of the embeddings for Bi-Encoders, the "
             "teacher's own score for Cross-Encoders and Cross-Bi-Encoders).", ""]
    spreads = {}  # mean ± std over seeds, where more than one seed has the metric (one seed: no spread to show)
    for metric in values:
        over = (summary or {}).get(metric)
        if over and over.get("mean") is not None and (over.get("n") or 0) > 1:
            spreads[metric] = f"{_fmt(over['mean'])} ± {_fmt(over['std'])} (n={over['n']})"
    if spreads:
        lines += ["| metric | this seed | mean ± std over seeds |", "| --- | --- | --- |",
                  *[f"| {metric} | {_fmt(value)} | {spreads.get(metric, '–')} |" for metric, value in values.items()]]
    else:
        lines += ["| metric | this seed |", "| --- | --- |",
                  *[f"| {metric} | {_fmt(value)} |" for metric, value in values.items()]]
    lines += reproduce_section(spec, role, seed, node, to_hint, recipe, own, unpruned)
    return "\n".join(lines), facts


def chosen_rate_text(sweep: dict) -> str:
    """A static student's learning rate as its `static_lr_sweep` chose it: the rate, and each candidate's dev
    Spearman."""
    runs = ", ".join(f"{r['lr']:g} ({_fmt(r['dev_spearman'])})" for r in sweep["rates"])
    how = f"runs of {sweep['steps']:,} steps, then the chosen rate's full schedule" if sweep.get("steps") else \
        "each the full schedule, the best run kept"
    return f"{sweep['chosen']:g}, chosen on the dev split among {runs} (dev Spearman; {how}; `static_lr_sweep`)"


def chosen_epoch(metrics: dict, params: dict) -> str:
    """The epoch the dev split chose, with its step: a pass cut short by `max_steps` is said to be (issue 56: "chosen
    epoch 1" for a run stopped at step 60 of the epoch's 277)."""
    best = metrics["best_epoch"]
    entry = next((h for h in metrics.get("dev_history") or () if h.get("epoch") == best), {})
    step, pairs, batch = entry.get("step"), metrics.get("train_pairs"), params.get("batch_size")
    score = f"dev Spearman {_fmt(metrics.get('dev_spearman'))}"
    if not isinstance(step, int) or not isinstance(pairs, int) or not isinstance(batch, int) or batch < 1:
        return f"{best} ({score})"
    per_epoch = max(1, -(-pairs // batch))  # optimizer steps of one pass, as the trainer counts them
    done = step - (best - 1) * per_epoch
    if 0 < done < per_epoch:
        cap = f"max_steps {params['max_steps']}" if params.get("max_steps") else "training"
        return (f"{best}, a partial pass: stopped at step {step:,} ({cap}), {done:,} of the epoch's {per_epoch:,} "
                f"steps ({100 * done // per_epoch} % of the {pairs:,} training pairs seen in it) ({score})")
    return f"{best}, at step {step:,} ({per_epoch:,} steps an epoch) ({score})"


def chain_warnings(artifact: Path) -> list[str]:
    """The warnings the artifact and every artifact it was built from recorded (their metrics.json `warnings`:
    the data's pairs shared by train and test, duplicates, a small silver pool), each once, an artifact's after
    those of what it was built from (the data's first, as the results file lists them)."""
    found: list[str] = []
    done: set[str] = set()

    def visit(path: Path) -> None:
        if path.name in done or not (path / "spec.json").is_file():
            return
        done.add(path.name)
        for upstream in (read_json(path / "spec.json").get("inputs") or {}).values():
            if isinstance(upstream, str):
                visit(Path(upstream))
        try:
            warnings = read_json(path / "metrics.json").get("warnings") or ()
        except (OSError, ValueError, AttributeError):
            return
        found.extend(w for w in warnings if isinstance(w, str) and w not in found)

    visit(Path(artifact))
    return found


def keyed_settings(artifact: Path) -> list[tuple[str, str, dict]]:
    """(key, stage, keyed params) of the artifact and of every artifact it was built from, each once, the model's
    first: what its spec.json records (its `runtime` settings are no part of the key: left out)."""
    found: dict[str, tuple[str, str, dict]] = {}
    todo = [Path(artifact)]
    while todo:
        path = todo.pop(0)
        if path.name in found or not (path / "spec.json").is_file():
            continue
        node_spec = read_json(path / "spec.json")
        runtime = set(node_spec.get("runtime") or ())
        params = {k: v for k, v in sorted((node_spec.get("params") or {}).items()) if k not in runtime}
        found[path.name] = (path.name, node_spec.get("stage") or path.parent.name, params)
        todo += [Path(p) for p in (node_spec.get("inputs") or {}).values() if isinstance(p, str)]
    return list(found.values())


def reproduce_recipe(spec: dict, role: str, seed: int, node: dict, data_dir: str | None) -> tuple[dict, str, str | None]:
    """The config file of the card's recipe: `data_dir`, the seeds, the dataset definition and the experiment's
    options that give this model its artifact key (augsbert.face.recipe); its experiment's name; and why it
    holds the full effective config instead (None where it is pruned)."""
    config = spec["config"]
    own = recipe_name(spec["experiment"])  # one no experiment of a clone has (the name is no part of any key)
    recipe: dict = {}
    if data_dir:
        recipe["data_dir"] = data_dir
    if config.get("seeds") is None:  # the top-level seeds it ran with (its own `seeds` unset)
        recipe["seeds"] = spec["seeds"]
    if spec.get("dataset"):
        recipe["datasets"] = {config["dataset"]: spec["dataset"]}
    recipe["experiments"] = {own: config}
    recipe, unpruned = prune(recipe, own, seed, role, node["key"])
    return recipe, own, unpruned


def reproduce_section(spec: dict, role: str, seed: int, node: dict, to_hint: str, recipe: dict, own: str,
                      unpruned: str | None) -> list[str]:
    """A recipe that runs as written in a clone of augsbert: one config file (`reproduce_recipe`) and the
    commands that train and export."""
    config = spec["config"]
    models = recipe["experiments"][own].get("models")
    what = (f"the dataset and only the options of what the command below builds: "
            + (f"this model (artifact key `{node['key']}`), what it is built from and its evaluation (`models: "
               f"[{role}]`)" if models == [role] else
               f"the experiment's models (`models`), this one's artifact key `{node['key']}` among them")
            + "; read over config/config.yaml it plans those very artifact keys, as checked when this card was "
              "written; every option left out never reached them or has config/config.yaml's value"
            if unpruned is None else
            f"the dataset and the whole experiment config as trained, config hash `{spec['config_hash']}`; it could "
            f"not be cut to the options this model used: {unpruned}")
    stage = node.get("stage", Path(node["path"]).parent.name)
    source = config.get("source")
    return [
        "", "### Reproduce", "",
        "In a clone of augsbert (`make setup`), with the raw data where `data_dir` says, save this as "
        f"`reproduce.yaml` ({what}"
        + (f"; the source dataset `{source}` is read from config/config.yaml" if source and source != config[
            "dataset"] else "") + "):", "",
        "```yaml", yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True).rstrip(), "```", "",
        "then, from the clone's root (`--` ends the list of config files):", "",
        "```bash",
        f".venv/bin/snakemake --cores 2 --configfile reproduce.yaml -- results/{own}.json   # trains this {stage} "
        + ("and what it is built from, then scores it" if unpruned is None and models == [role] else
           "and everything the results need"),
        f".venv/bin/augsbert export --config reproduce.yaml --experiment {own} --model {role} --seed {seed} "
        f"--to {shlex.quote(str(to_hint))}",  # a path with spaces or quotes stays one word (issue 56 X4)
        "```", ""]


def _insert_section(card: str, section: str) -> str:
    """Put the augsbert section before the card's first second-level heading (after its title and intro)."""
    at = card.find("\n## ")
    return card.rstrip() + "\n\n" + section if at < 0 else card[: at + 1] + section + "\n" + card[at + 1 :]


def _save_sentence_transformers(arch: str, source: Path, target: Path, title: str, section: str, tags: list[str],
                                base: str | None, model_id: str | None):
    """Load with the library class, fill its model card data, save; then add our section to its card."""
    if arch == "be":
        from sentence_transformers import SentenceTransformer as cls
    else:
        from sentence_transformers import CrossEncoder as cls
    model = cls(str(source), device="cpu", local_files_only=True)  # local: no hub look-ups for the card
    card = model.model_card_data
    card.model_name = title  # (train_datasets stays empty: the template wants the trainer's column statistics;
    card.add_tags(tags)       # the data are in our section)
    if base:
        card.base_model = base
    if model_id:  # the hub repository it is pushed to: the card's usage snippet loads it from there
        card.model_id = model_id
    model._model_card_text = None  # write a fresh card from the card data, not the artifact's stored one
    model.save(str(target))
    readme = target / "README.md"
    if not readme.is_file():  # the library logs its card error and skips the card: not an export we hand out
        raise RuntimeError(f"sentence-transformers wrote no model card for {source} (see its error above)")
    text = _insert_section(readme.read_text(encoding="utf-8"), section)
    if not model_id:  # a local folder: the library's usage snippet must not say it downloads from the hub
        text = text.replace("# Download from the \U0001f917 Hub", "# Load the exported folder")
    readme.write_text(text, encoding="utf-8")
    return model


def export(spec: dict, model: str, to: str | Path, seed: int | None = None, force: bool = False,
           results_path: str | Path | None = None, model_id: str | None = None, discard_edits: bool = False,
           backend: str = "torch", quantize: str | None = None, quantize_config: str = "avx512_vnni",
           accept_parity_loss: bool = False) -> dict:
    """Write the experiment's `model` (of `seed`, default the first) to `to`; returns the provenance record.

    `model_id` (a hub repository) goes into the card's usage example instead of a placeholder path.
    `backend` / `quantize`: a Bi-Encoder also in ONNX or OpenVINO format, int8 if asked (augsbert.face.backends),
    refused below the parity gate unless `accept_parity_loss`.
    """
    from . import model_card  # heavy (pandas, torch): `augsbert --help` imports this module, not the card's

    check_name(spec.get("experiment"), "experiment")
    if model not in EXPORT_MODELS:
        raise ExportError(f"--model {model!r}: choose one of {', '.join(EXPORT_MODELS)}")
    seed, node = select(spec, model, seed)
    artifact = _finished(node)
    _check_read(artifact, node)
    target = Path(to)
    _check_outside_artifacts(target, artifact, spec["experiment"], model)
    _check_target(target, force, discard_edits)
    results_path = str(results_path) if results_path else f"results/{spec['experiment']}.json"
    # its numbers go into the card and augsbert_export.json: only as collected; a folder or a device of that name
    # is refused (a folder was silently taken for no results)
    results = read_results(results_path) if Path(results_path).exists() else None
    section, facts = training_facts(spec, model, seed, node, results, results_path, str(to))
    arch = facts["arch"]
    name = spec["experiment"]
    deploy = _deploy_check(backend, quantize, arch, read_json(artifact / "spec.json")["params"])
    missing = backend_available(backend) if deploy else None
    if missing:  # before the card is built: the one line that says how to make the deploy environment
        raise ExportError(missing)
    title = f"augsbert {name}: {model.replace('_', ' ')} ({ARCH_TITLES[arch]}, seed {seed})"
    tags = ["augsbert", "augmented-sbert", model.replace("_", "-")]
    base = model_card.hub_base(read_json(artifact / "spec.json")["params"])

    with writing(target):  # a read-only or full location: one message naming it
        return _write(spec, model, artifact, target, section, facts, title, tags, base, model_id, seed, name,
                      deploy and {"backend": backend, "quantize": quantize, "config": quantize_config,
                                  "accept": accept_parity_loss})


def _deploy_check(backend: str, quantize: str | None, arch: str, params: dict) -> bool:
    """Whether the export adds a backend's files; an ExportError for what cannot be asked."""
    if backend == "torch":
        if quantize:
            raise ExportError("--quantize needs --backend onnx or openvino")
        return False
    if arch != "be":
        raise ExportError(f"--backend {backend}: Bi-Encoders only (student, lower bound); this model is a "
                          f"{ARCH_TITLES[arch]}")
    if params.get("arch") == "static":
        raise ExportError(f"--backend {backend}: a static student is a table of token vectors (no Transformer to "
                          "convert); export it without --backend: it is already fast on a CPU")
    return True


def _write(spec, model, artifact, target, section, facts, title, tags, base, model_id, seed, name,
           deploy: dict | None = None) -> dict:
    from . import model_card  # heavy (pandas, torch), as in export

    arch = facts["arch"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_name(target)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if arch == "cbe":
            from ..models.cross_bi_encoder import CrossBiEncoder  # heavy (torch): only a CBE export needs it

            card_data = {"tags": tags, **({"base_model": base} if base else {})}
            CrossBiEncoder.from_pretrained(artifact / "model").save_pretrained(
                tmp, model_card_kwargs={"model_name": title, "model_id": model_id or str(target), "training_facts": section,
                                        **card_data})
            loaded = None
        else:
            loaded = _save_sentence_transformers(arch, artifact / "model", tmp, title, section, tags, base, model_id)
    except Exception as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _unreadable_model(err):
            raise
        raise ExportError(f"cannot load the model in {artifact / 'model'} ({type(err).__name__}: "
                          f"{(str(err).splitlines() or [''])[0][:200]}): the artifact is damaged (a file cut short?) "
                          f"or was written by another version; check it with `augsbert verify`, or delete it "
                          f"(`rm -r {artifact}`) and train it again") from None
    try:
        model_card.apply(tmp / "README.md", *model_card.build(spec, model, artifact, arch, loaded,
                                                              facts["test_metrics"], title))
        readme = tmp / "README.md"  # the usage snippet loads the export itself, not a placeholder id
        readme.write_text(readme.read_text(encoding="utf-8").replace(
            '"sentence_transformers_model_id"', json.dumps(model_id or str(target))), encoding="utf-8")
        if deploy:  # ONNX / OpenVINO files beside the weights, and the card's deployment section
            facts["deployment"] = _deploy(tmp, deploy, artifact, model_id or str(target), loaded)
        # the files this export wrote: all that a later `--force` may replace (files you add are never deleted)
        written = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        facts["files"] = sorted([*written, MARKER])
        # what each held when written: a later `--force` replaces only files still as written
        facts["digests"] = {name: file_digest(tmp / name, 0) for name in written}
        write_json(tmp / MARKER, facts)
        readable(tmp)
        if target.exists():  # empty, or (with force) an earlier export: checked above
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("exported %s of %s (seed %d, %s) to %s", model, name, seed, artifact, target)
    return {"target": str(target), **facts}


def _deploy(folder: Path, deploy: dict, artifact: Path, path: str, model) -> dict:
    """The backend's files in the export `folder` (made in the deploy environment), checked against the PyTorch
    `model` by the parity gate, and its section at the end of the card."""
    from ..data.pool import read_split
    from .backends import (BackendError, calibration_sentences, card_section, check_parity, parity_provenance,
                           parity_sentences, run_conversion)

    calibration = calibration_sentences(artifact) if deploy["backend"] == "openvino" and deploy["quantize"] else []
    inputs = read_json(artifact / "spec.json").get("inputs") or {}
    data = inputs.get("eval", inputs.get(INPUT_DATA))
    test, dev = read_split(data, "test", required=False), read_split(data, "dev", required=False)
    # the gate's sentences: none the calibration saw (test and dev first, which it never reads)
    sentences = parity_sentences(test, dev, read_split(data, "train"), calibration=calibration)
    if not sentences:
        raise ExportError(f"--backend {deploy['backend']}: no sentence for the parity gate: {data} has no test or dev "
                          "sentence, and the int8 calibration took every training one")
    reference = model.encode(sentences, batch_size=64, show_progress_bar=False)
    torch_spearman = (read_json(artifact / "metrics.json").get("test") or {}).get("spearman")
    pairs = {} if test is None else {"sentence1": test["sentence1"].tolist(),
                                     "sentence2": test["sentence2"].tolist(),
                                     "score": test["score"].astype(float).tolist()}
    try:
        record = run_conversion(folder, deploy["backend"], deploy["quantize"], deploy["config"], calibration,
                                sentences, reference, pairs)
        record["parity"] = {**record.get("parity", {}), **parity_provenance(sentences, calibration, test, dev)}
        record = check_parity(record, torch_spearman, deploy.get("accept", False))
    except BackendError as err:
        raise ExportError(str(err)) from None
    readme = folder / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").rstrip() + "\n\n" + card_section(record, path),
                      encoding="utf-8")
    return record


def _unreadable_model(err: Exception) -> bool:
    """A failure to load the artifact's model (not a failure to write the target, which `writing` reports)."""
    if isinstance(err, OSError):
        return err.errno not in FULL_OR_READ_ONLY | FORBIDDEN
    if write_failure(err) is not None:
        return False
    return isinstance(err, (ValueError, RuntimeError, EOFError)) or type(err).__name__ == "SafetensorError"


def _check_read(artifact: Path, node: dict) -> None:
    """The model's artifact, and those the card reads (data sizes, teacher, silver statistics), are what their
    names say and hold what they held when written (augsbert.store.manifests): nothing edited or damaged is exported."""
    if node.get("key") and artifact.name != node["key"]:
        raise ExportError(f"{artifact}: the experiment's spec names key {node['key']} for it")
    check_artifact(artifact, "model artifact")  # every file: the model is read whole
    inputs = (read_json(artifact / "spec.json").get("inputs") or {}) if (artifact / "spec.json").is_file() else {}
    for role, path in inputs.items():
        if isinstance(path, str):
            check_artifact(path, f"input `{role}` of the model", only={"metrics.json", "spec.json",
                                                                        "sampling_stats.json"})
            if role == INPUT_LABELS and (Path(path) / "spec.json").is_file():
                teacher = (read_json(Path(path) / "spec.json").get("inputs") or {}).get(INPUT_TEACHER)
                if isinstance(teacher, str):
                    check_artifact(teacher, "the labels' teacher", only={"metrics.json", "spec.json"})


def readable(folder: Path) -> None:
    """Give the export's files and folders the modes a new file gets (0644 / 0755 under umask 022): atomic
    writes through temporary files leave some at 0600, unreadable to the group that is to use the model."""
    mask = os.umask(0)
    os.umask(mask)
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


def _check_outside_artifacts(target: Path, artifact: Path, experiment: str, model: str) -> None:
    """Refuse an export into the artifacts folder (the exported artifact's `artifacts/`) or into any artifact folder
    (one named like a key, holding a spec.json or manifest.json): a model written into an artifact is a file its
    manifest does not list, so `augsbert verify` called the artifact damaged and `--repair` would have moved the
    export away with it; the artifacts folder holds what the workflow writes and nothing else."""
    where = Path(os.path.realpath(target))
    root = Path(os.path.realpath(artifact)).parent.parent
    inside = next((folder for folder in [where, *where.parents] if folder == root or (
        is_key(folder.name) and any((folder / name).is_file() for name in ("spec.json", MANIFEST)))), None)
    if inside is not None:
        what = (f"inside the artifacts folder {artifact.parent.parent}/" if inside == root
                else f"inside the artifact {inside}")
        raise ExportError(f"--to {target}: {what}, which holds what the workflow writes and nothing else "
                          f"(`augsbert verify` would call it damaged); export outside it, e.g. --to "
                          f"models/{experiment}/{model}")


def _check_target(target: Path, force: bool, discard_edits: bool = False) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):  # a file, a link, /dev/null
        raise ExportError(f"--to {target}: exists and is not a directory; name a new or empty directory")
    if not target.is_dir() or not any(target.iterdir()):
        return
    if not force:
        raise ExportError(f"--to {target}: the directory exists and is not empty; refusing to overwrite it "
                          "(use --force to replace an earlier export)")
    try:
        written = read_json(target / MARKER) if (target / MARKER).is_file() else None
    except (OSError, ValueError):
        written = None
    listed = written.get("files") if isinstance(written, dict) else None
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise ExportError(f"--to {target}: --force replaces only a directory written by `augsbert export` (its "
                          f"{MARKER} lists the files it wrote); this one has {'no' if written is None else 'no usable'} "
                          f"{MARKER}, so remove or rename it yourself")
    present = {p.relative_to(target).as_posix() for p in target.rglob("*") if not p.is_dir() or p.is_symlink()}
    folders = {parent.as_posix() for name in listed for parent in Path(name).parents if parent != Path(".")}
    empty = {p.relative_to(target).as_posix() + "/" for p in target.rglob("*")  # a folder the user added, empty
             if p.is_dir() and not p.is_symlink() and not any(p.iterdir())
             and p.relative_to(target).as_posix() not in folders}
    added = sorted((present - set(listed)) | empty)
    if added:
        raise ExportError(f"--to {target}: holds {len(added)} file(s) the earlier export did not write "
                          f"({', '.join(added[:3])}{' ...' if len(added) > 3 else ''}); --force replaces only an "
                          "export's own files: move them out, or export to another --to")
    digests = written.get("digests")
    if not isinstance(digests, dict):
        if not discard_edits:
            raise ExportError(f"--to {target}: its {MARKER} (an earlier version's) records no digests, so edits of its "
                              "files cannot be told from what the export wrote; check them, then replace it with "
                              "--force --discard-edits, or export to another --to")
        return
    edited = sorted(name for name in listed if name != MARKER and name in present
                    and digests.get(name) != file_digest(target / name, 0))
    if edited and not discard_edits:
        raise ExportError(f"--to {target}: {len(edited)} file(s) of the earlier export were edited since "
                          f"({', '.join(edited[:3])}{' ...' if len(edited) > 3 else ''}); nothing was replaced: move "
                          "them out, or replace them too with --force --discard-edits")


def push_to_hub(folder: str | Path, repo_id: str, private: bool | None = None) -> str:
    """Upload an exported directory to a Hugging Face hub model repository (created if missing).

    Any failure (no network, no token, no permission) becomes one ExportError that says the export itself
    is complete and how to upload it later.
    """
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        repo = api.create_repo(repo_id=repo_id, repo_type="model", private=private, exist_ok=True).repo_id
        commit = api.upload_folder(repo_id=repo, repo_type="model", folder_path=str(folder),
                                   commit_message="Upload model exported by augsbert")
    except Exception as err:  # network, auth, HTTP: all end the same way for the user
        detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ExportError(
            f"could not push {folder} to the Hugging Face hub repository {repo_id} ({type(err).__name__}"
            f"{': ' + detail[:200] if detail else ''}). The export itself is complete; with network access and a "
            f"token (`hf auth login` or HF_TOKEN) upload it later with `hf upload {repo_id} {folder} .`") from None
    return getattr(commit, "commit_url", None) or str(commit)


def read_frontier(value: str) -> dict:
    """The frontier `--frontier` names (a grid's name: results/tables/<grid>.frontier.json, or a file); one line
    naming the file and what is wrong where it cannot be read or is no frontier."""
    from ..reporting.frontier import grid_or_file, read

    path = grid_or_file(value)
    try:
        return read(path)
    except FileNotFoundError:
        grid = path.name.removesuffix(".frontier.json") if path.name.endswith(".frontier.json") else None
        raise ExportError(f"--frontier {value}: no file {path}" + (
            f"; measure the grid's frontier first: `snakemake --cores 2 results/tables/{grid}.frontier.md`"
            if grid else "")) from None
    except (OSError, ValueError) as err:
        raise ExportError(f"--frontier {err}") from None


def picked(value: str, points: float, column: str | None = None) -> tuple[dict, dict]:
    """The frontier row `--pick-fastest-within POINTS` exports, and the frontier; says which, with its figures."""
    from ..reporting.frontier import column_of, pick_fastest_within

    frontier = read_frontier(value)
    try:
        chosen = column_of(frontier, column)
        row = pick_fastest_within(chosen, points)
    except ValueError as err:
        raise ExportError(f"--frontier {value}: {err}") from None
    reference = next(r for r in chosen["rows"] if r["row"] == chosen["reference"])
    log.warning("picked %s: test Spearman %.2f (%s %.2f, within %.2f), %s sentences/s (%.1fx), %s MB", row["label"],
                row["spearman"], reference["label"], reference["spearman"], points, f"{row['sentences_per_s']:,.0f}",
                row["sentences_per_s"] / reference["sentences_per_s"], row["size_mb"])
    return row, frontier


def add_command(sub) -> None:
    """`augsbert export`: planned from --config/--experiment (standalone) or from --spec (the workflow rule)."""
    help_text = ("copy a finished model (student, teacher or lower bound) out of its artifact into a named "
                 "directory in its library's format, with a model card (sentence-transformers; CrossBiEncoder)")
    p = sub.add_parser("export", help=help_text, description=help_text + ". An experiment with several seeds: the "
                       "first seed is exported unless --seed says otherwise.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--spec", help="experiment spec JSON or @file (what the workflow passes)")
    src.add_argument("--config", nargs="+", action="extend", metavar="FILE",
                     help="config YAML file(s) to plan from, merged in order over config/config.yaml of the current "
                          "directory as Snakemake's --configfile (needs --experiment)")
    p.add_argument("--experiment", help="experiment name (with --config)")
    p.add_argument("--model", default=DEFAULT_MODEL, choices=EXPORT_MODELS,
                   help=f"which model (default: {DEFAULT_MODEL})")
    p.add_argument("--seed", type=int, help="which seed's model (default: the experiment's first seed)")
    p.add_argument("--to", required=True, help="directory to write (any path; must not exist or be empty)")
    p.add_argument("--force", action="store_true", help="replace a directory an earlier export wrote (files you "
                   "added or edited there are named and kept: nothing is replaced)")
    p.add_argument("--discard-edits", action="store_true", help="with --force: replace the earlier export's files "
                   "even where you edited them")
    p.add_argument("--results", help="results file with the test metrics (default results/<experiment>.json)")
    p.add_argument("--backend", default="torch", choices=BACKENDS, help="also write the Bi-Encoder for this "
                   "runtime, converted in the deploy environment (`make deploy-env`): openvino loads with "
                   "SentenceTransformer(path, backend='openvino'); onnx with ONNX Runtime, as the card shows (not "
                   "through sentence-transformers' backend='onnx', which needs optimum-onnx: docs/guide/compact.md); "
                   "default torch: the PyTorch weights only")
    p.add_argument("--quantize", choices=QUANTIZATIONS, help="with --backend: int8 (ONNX: dynamic; OpenVINO: "
                   f"static, calibrated on up to {CALIBRATION_SENTENCES} sentences of the model's training data: its "
                   "train split, then its unlabelled texts, no dev or test sentence)")
    p.add_argument("--quantize-config", default=ONNX_CONFIGS[0], choices=ONNX_CONFIGS,
                   help="ONNX int8: ONNX Runtime's configuration for the CPU it runs on (default avx512_vnni)")
    p.add_argument("--accept-parity-loss", action="store_true", help="with --backend: export even when the "
                   f"exported model misses the parity gate (mean cosine >= {PARITY_MIN_COSINE} with the PyTorch "
                   f"embeddings of up to {PARITY_SENTENCES} test sentences its calibration did not see); the card "
                   "and augsbert_export.json say so")
    p.add_argument("--pick-fastest-within", type=float, metavar="POINTS", help="export the fastest row of a "
                   "grid's frontier (--frontier) whose mean test Spearman is at most POINTS below the full "
                   "student's, with its backend (docs/guide/compact.md); the experiment as the frontier recorded "
                   "it, or planned from --config")
    p.add_argument("--frontier", metavar="GRID|FILE", help="with --pick-fastest-within: a grid's name (its "
                   "results/tables/<grid>.frontier.json, made by `snakemake results/tables/<grid>.frontier.md` or "
                   "`augsbert frontier`) or a frontier file")
    p.add_argument("--column", help="with --pick-fastest-within: the grid column to pick in (needed where the grid "
                   "has several)")
    p.add_argument("--push-to-hub", metavar="REPO", help="then upload the directory to this hub model repository "
                   "(needs network and a token)")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository private")

    def handler(args: argparse.Namespace) -> None:
        recorded = None
        if args.pick_fastest_within is not None:
            if not args.frontier or args.spec or args.experiment:
                p.error("--pick-fastest-within needs --frontier (and chooses the experiment: no --spec / --experiment)")
            row, frontier = picked(args.frontier, args.pick_fastest_within, args.column)
            args.experiment, args.backend, args.quantize = row["experiment"], row["backend"], row["quantize"]
            recorded = None if args.config else (frontier.get("specs") or {}).get(row["experiment"])
            if recorded is None and not args.config:
                raise ExportError(f"--frontier {args.frontier}: it records no spec of {row['experiment']}; name the "
                                  "config files the grid was planned from with --config")
        elif args.frontier or args.column:
            p.error("--frontier and --column go with --pick-fastest-within")
        elif not args.spec and not args.config:
            p.error("one of --spec, --config or --pick-fastest-within is required")
        if recorded is not None:
            spec = recorded
            check_aggregate_spec(spec, "experiment", f"--frontier {args.frontier}: specs.{row['experiment']}")
        elif args.spec:
            spec = load_spec(args.spec)
            check_aggregate_spec(spec, "experiment", f"--spec {args.spec}" if args.spec.startswith("@") else "--spec")
        else:
            if not args.experiment:
                p.error(config_needs("--experiment", args.config))
            check_name(args.experiment, "--experiment")
            spec = Plan(load_configs(args.config, lazy=True)).experiment_spec(args.experiment)
        if args.discard_edits and not args.force:
            p.error("--discard-edits goes with --force")
        if args.accept_parity_loss and args.backend == "torch":
            p.error("--accept-parity-loss goes with --backend onnx or openvino")
        record = export(spec, args.model, args.to, seed=args.seed, force=args.force, results_path=args.results,
                        model_id=args.push_to_hub, discard_edits=args.discard_edits, backend=args.backend,
                        quantize=args.quantize, quantize_config=args.quantize_config,
                        accept_parity_loss=args.accept_parity_loss)
        if args.push_to_hub:
            record["hub_commit"] = push_to_hub(args.to, args.push_to_hub, private=args.private or None)
        print(json.dumps({k: record[k] for k in ("target", "experiment", "model", "seed", "arch", "key",
                                                 "config_hash", "deployment", "hub_commit") if k in record},
                         indent=2))

    p.set_defaults(handler=handler)
