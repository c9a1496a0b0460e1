"""Supervised NLI as released (SNLI, MultiNLI jsonl) -> (anchor, positive, negative) triples.

SimCSE's supervised setting (Gao et al., 2021, Sec. 5): the premise is the
anchor, a hypothesis it entails the positive, a hypothesis it contradicts the
hard negative. Records are grouped by premise (whitespace-normalised); a
premise with at least one entailment and one contradiction hypothesis gives
one triple, the first of each in file order (SimCSE's released
nli_for_simcse.csv has one triple per such premise, 275,601 for SNLI +
MultiNLI train; the choice of the first, not a random one, is ours: the same
file always gives the same triples). Neutral pairs are not used; pairs
without a gold label (`gold_label` "-", annotators disagreed) are skipped.
The counts are logged.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .readers import read_jsonl, open_text, reading
from .tables import DataError, RowReport, normalise_text, short_repr

log = logging.getLogger(__name__)

NLI_KEYS = ["sentence1", "sentence2", "gold_label"]
LABELS = ("entailment", "neutral", "contradiction")
NO_LABEL = "-"
# the released names: snli_1.0_train.jsonl, multinli_1.0_train.jsonl, multinli_1.0_dev_matched.jsonl (also .gz)
RELEASE_NAME = re.compile(r"^(snli|multinli)_1\.0_[a-z_]+\.jsonl(\.gz)?$", re.IGNORECASE)
TRIPLES_FORMATS = ("triples", "nli")


def is_nli_release(path: Path) -> bool:
    """Whether `path` is an SNLI / MultiNLI jsonl file: by its released name, else by its first record's keys."""
    if RELEASE_NAME.match(path.name):
        return True
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if not suffixes or suffixes[-1] not in (".jsonl", ".json", ".ndjson"):
        return False
    import json

    with reading(path), open_text(path) as handle:
        for line in handle:
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    return False  # read as a table, whose reader names the line
                return isinstance(record, dict) and all(k in record for k in NLI_KEYS) and "anchor" not in record
    return False


def triples_format(path: Path, explicit: str | None = None) -> str:
    """`triples` (anchor, positive, negative columns) or `nli` (SNLI / MultiNLI records)."""
    if explicit and explicit != "auto":
        if explicit not in TRIPLES_FORMATS:
            raise DataError(f"{path}: unknown pretrain.triples_format {explicit!r} (known: auto, "
                            f"{', '.join(TRIPLES_FORMATS)})")
        return explicit
    return "nli" if is_nli_release(path) else "triples"


def read_nli_triples(path: Path) -> list[tuple[str, str, str]]:
    """SimCSE triples from one SNLI / MultiNLI jsonl file; a malformed record stops it with file, line and key."""
    report = RowReport(f"pretrain.triples ({path.name})")
    rows = read_jsonl(path, report, NLI_KEYS)
    by_premise: dict[str, dict[str, str]] = {}
    counts = dict.fromkeys((*LABELS, NO_LABEL), 0)
    for file, line, premise, hypothesis, label in rows:
        label = str(label).strip()
        if label not in counts:
            report.add(file, line, f"key 'gold_label' holds {short_repr(label)}, expected one of "
                                   f"{', '.join(LABELS)} or '-'")
            continue
        counts[label] += 1
        if label == NO_LABEL:
            continue
        premise, hypothesis = normalise_text(str(premise)), normalise_text(str(hypothesis))
        for key, text in (("sentence1", premise), ("sentence2", hypothesis)):
            if not text:
                report.add(file, line, f"key {key!r} is empty")
        if not premise or not hypothesis:
            continue
        if label != "neutral":
            by_premise.setdefault(premise, {}).setdefault(label, hypothesis)  # the first of each label
    report.settle()
    triples = [(p, h["entailment"], h["contradiction"]) for p, h in by_premise.items()
               if "entailment" in h and "contradiction" in h]
    log.info("NLI %s: %d records (%d entailment, %d neutral, %d contradiction, %d without gold label, skipped); "
             "%d premises with an entailment or contradiction, %d triples (premise, entailment, contradiction)",
             path.name, len(rows), counts["entailment"], counts["neutral"], counts["contradiction"],
             counts[NO_LABEL], len(by_premise), len(triples))
    if not triples:
        raise DataError(f"{path}: no premise has both an entailment and a contradiction hypothesis; no triples")
    return triples
