"""`augsbert export`: copy a finished model out of its hashed artifact into a named directory.

Bi-Encoders (student, lower bound) are written as sentence-transformers
`SentenceTransformer` directories, Cross-Encoder teachers as `CrossEncoder`
directories, Cross-Bi-Encoder teachers with `CrossBiEncoder.save_pretrained`.
Each gets a model card: the library's own card (sentence-transformers'
template; the CBE's card for a CBE) plus a section with what augsbert knows of
the model: base model, data, teacher, sampling and silver counts, the settings
that entered the artifact keys of the model and its inputs, the test metrics of
the results file, the config hash and the commands that reproduce it (a config
pruned to the options that give the model its key: augsbert.export.recipe); augsbert.export.model_card adds the training data's
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

import json
import logging
import os
import shutil
from pathlib import Path

from ..config.names import check_name
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
from ..store.keys import is_key
from ..store.manifests import MANIFEST, file_digest, problems
from ..store.results_files import read_results
from .backends import (REGISTRY, BackendError, backend_available, calibration_sentences, card_section, check_parity,
                       parity_provenance, parity_sentences, run_conversion)
from ..stages.runs import INPUT_DATA, INPUT_LABELS, INPUT_TEACHER
from .facts import ARCH_TITLES, EXPORT_MODELS, training_facts

log = logging.getLogger(__name__)

MARKER = "augsbert_export.json"  # provenance of an export; also what lets --force replace a directory


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
    `backend` / `quantize`: a Bi-Encoder also in ONNX or OpenVINO format, int8 if asked (augsbert.export.backends),
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

    calibrated = REGISTRY[deploy["backend"]].calibrated and deploy["quantize"]
    calibration = calibration_sentences(artifact) if calibrated else []
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
