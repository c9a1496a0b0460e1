"""`augsbert export`: its arguments, parsed and handed to augsbert.export (the export itself, the frontier pick)."""

from __future__ import annotations

import argparse
import json

from ..config.load import load_configs
from ..config.names import check_name
from ..config.yaml_files import config_needs
from ..export.backends import (BACKENDS, CALIBRATION_SENTENCES, ONNX_CONFIGS, PARITY_MIN_COSINE, PARITY_SENTENCES,
                               QUANTIZATIONS)
from ..export.export import ExportError, export, push_to_hub
from ..export.facts import DEFAULT_MODEL, EXPORT_MODELS
from ..export.pick import picked
from ..jobs.specs import check_aggregate_spec, load_spec
from ..plan import Plan


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
