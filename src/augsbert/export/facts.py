"""What the model card says of an exported model and its recipe: the exportable models, the augsbert section
(`training_facts`: base model, data, teacher, sampling and silver counts, the keyed settings of the model and of
what it was built from, the warnings they recorded, the test metrics) and the recipe that reproduces it (a config
pruned to the options that give the model its key: augsbert.export.recipe)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import yaml

from ..reporting.layout import row_stages, table_rows
from ..reporting.results import labelling_artifact
from ..stages import REGISTRY
from ..stages.candidates import CANDIDATES
from ..stages.runs import INPUT_DATA, INPUT_LABELS, INPUT_TEACHER
from ..stages.student import STUDENT
from ..store.artifacts import read_json
from .recipe import prune, recipe_name

# What `--model` can name (the rows whose stage declares them exportable, `Row.export`: the card's title), the
# default, and the Snakemake wildcard pattern of models/<experiment>/<model>/.
ROLE_TITLES = {role: row.export for role, row in sorted(table_rows().items(), key=lambda item: -item[1].place)
               if row.export}
EXPORT_MODELS = tuple(ROLE_TITLES)
DEFAULT_MODEL = STUDENT.roles[0]
MODEL_WILDCARD = "|".join(EXPORT_MODELS)
ARCH_TITLES = {"be": "Bi-Encoder (SentenceTransformer)", "ce": "Cross-Encoder", "cbe": "Cross-Bi-Encoder"}


def results_metrics(results: dict | None, role: str, seed: int, artifact: Path) -> tuple[dict | None, dict | None]:
    """This seed's metrics and the summary over seeds from the results file, if it describes this very artifact."""
    if results is None:
        return None, None
    entry = (results.get("models") or {}).get(role) or {}
    recorded = ((entry.get("artifacts") or {}).get(str(seed)) or {}).get("model")
    if recorded is None or os.path.normpath(recorded) != os.path.normpath(str(artifact)):
        return None, None  # the results file is older than the artifact (another config): its numbers are not this model's
    return entry["per_seed"][str(seed)], entry.get("summary")


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    if isinstance(value, (bool, dict, list)) or value is None:
        return "`" + json.dumps(value, sort_keys=True) + "`"
    return f"`{value}`" if isinstance(value, str) else str(value)


def table(rows: list[tuple[str, str]]) -> list[str]:
    return ["| | |", "| --- | --- |", *[f"| {k} | {v} |" for k, v in rows]]


def base_model(params: dict, inputs: dict) -> str:
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
            ("base model", base_model(params, inputs))]
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
                                f"`{teacher.name}`, test Spearman {fmt(teacher_test.get('spearman'))}"))
        candidate_options = config.get(CANDIDATES.section, {})
        rows.append(("sampling", ", ".join(f"{k} {fmt(candidate_options[k])}" for k in
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

    per_seed, summary = results_metrics(results, role, seed, artifact)
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
    lines = ["## Training (augsbert)", "", *table(rows), "",
             *(["### Warnings", "",
                "Recorded by the jobs this model was built from (its data, its silver pairs); a test pair also seen "
                "in training inflates the test scores below.", "",
                *[f"- {w}" for w in warnings], ""] if warnings else []),
             "### Settings (what entered the artifact keys)", "",
             "The options of this model's stage and of each artifact it was built from, as planned (their key hashes "
             "them; runtime settings such as the evaluation batch size are left out).", "",
             "| artifact | stage | settings |", "| --- | --- | --- |",
             *[f"| `{key}` | {stage} | " + ", ".join(f"{k} {fmt(v)}{mark.get(k, '') if at == 0 else ''}"
                                                     for k, v in options.items()).replace("|", "\\|") + " |"
               for at, (key, stage, options) in enumerate(chain)], "",
             f"### Test metrics ({source_text})", "",
             "Correlations × 100 with gold on the target test split (cosine of the embeddings for Bi-Encoders, the "
             "teacher's own score for Cross-Encoders and Cross-Bi-Encoders).", ""]
    spreads = {}  # mean ± std over seeds, where more than one seed has the metric (one seed: no spread to show)
    for metric in values:
        over = (summary or {}).get(metric)
        if over and over.get("mean") is not None and (over.get("n") or 0) > 1:
            spreads[metric] = f"{fmt(over['mean'])} ± {fmt(over['std'])} (n={over['n']})"
    if spreads:
        lines += ["| metric | this seed | mean ± std over seeds |", "| --- | --- | --- |",
                  *[f"| {metric} | {fmt(value)} | {spreads.get(metric, '–')} |" for metric, value in values.items()]]
    else:
        lines += ["| metric | this seed |", "| --- | --- |",
                  *[f"| {metric} | {fmt(value)} |" for metric, value in values.items()]]
    lines += reproduce_section(spec, role, seed, node, to_hint, recipe, own, unpruned)
    return "\n".join(lines), facts


def chosen_rate_text(sweep: dict) -> str:
    """A static student's learning rate as its `static_lr_sweep` chose it: the rate, and each candidate's dev
    Spearman."""
    runs = ", ".join(f"{r['lr']:g} ({fmt(r['dev_spearman'])})" for r in sweep["rates"])
    how = f"runs of {sweep['steps']:,} steps, then the chosen rate's full schedule" if sweep.get("steps") else \
        "each the full schedule, the best run kept"
    return f"{sweep['chosen']:g}, chosen on the dev split among {runs} (dev Spearman; {how}; `static_lr_sweep`)"


def chosen_epoch(metrics: dict, params: dict) -> str:
    """The epoch the dev split chose, with its step: a pass cut short by `max_steps` is said to be (issue 56: "chosen
    epoch 1" for a run stopped at step 60 of the epoch's 277)."""
    best = metrics["best_epoch"]
    entry = next((h for h in metrics.get("dev_history") or () if h.get("epoch") == best), {})
    step, pairs, batch = entry.get("step"), metrics.get("train_pairs"), params.get("batch_size")
    score = f"dev Spearman {fmt(metrics.get('dev_spearman'))}"
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
    options that give this model its artifact key (augsbert.export.recipe); its experiment's name; and why it
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
