"""The `negatives` stage: hard negatives of (query, positive) pairs mined from a passage corpus by BM25 and
Bi-Encoder retrievers (job: augsbert.jobs.negatives)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Node, SeedPlan
from ..params import Params, default_of, option, section_options
from .base import Stage
from .queries import INVERSE_CLOZE, QUERIES, corpus_passages, generated, passage_tokens, queries_node
from .sizes import (CHARS_PER_TOKEN, DEFAULT_MAX_LENGTH, DEFAULT_QUERY_CHARS, DEFAULT_SIZE, beir_rows, metrics,
                    text_tokens)

BM25 = "bm25"
PER_STEP = "per_step"  # GPL: a candidate list per pair, one negative drawn for every training tuple


@dataclass(frozen=True, kw_only=True)
class NegativesOptions(Params):
    """The `negatives` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "negatives"
    SECTION_DESCRIPTION = """
        Hard-negative mining (stage `negatives`, [GPL](../methods/gpl.md)): for every (query, positive) pair of
        a BEIR-format dataset's qrels, negatives from its corpus, selected by sentence-transformers' rule
        (`util.mine_hard_negatives`, sampling "top"); the result is a table (query, positive, negative_1 ...
        negative_n). Planned when `retrievers` names one."""

    retrievers: list[str] = option([], """
        `bm25` (BM25Okapi, k1 1.5, b 0.75, as rank_bm25) or a Bi-Encoder reference (cosine of normalised
        embeddings, exact search), one or more; their lists are interleaved rank by rank without
        repeats. [] = no mining. GPL mines with msmarco-distilbert-base-v3 and msmarco-MiniLM-L-6-v3.""")
    qrels_split: Literal["train", "dev", "test"] = option("train", """
        Which qrels give the (query, positive) pairs (grade >= 1).""")
    mode: Literal["per_step", "fixed"] = option("per_step", """
        `per_step` (GPL, gpl/toolkit/mine.py, dataset.py): every survivor of each retriever's top
        `range_max` (union, positives removed) is a candidate, stored once; a `gpl` student draws one
        negative per training tuple, seeded, and the margins are scored for the drawn ones. `fixed`
        (ours): the first `num_negatives` of the interleaved lists, the same at every pass.""")
    num_negatives: int = option(5, """
        `mode: fixed`: negatives per pair; a pair with fewer under the rule is left out and counted (as
        the library's n-tuple output).""", minimum=1)
    range_min: int = option(0, """
        Skip the first `range_min` ranks (after positives and filtered candidates are removed).""", minimum=0)
    range_max: int | None = option(None, """
        Only the top `range_max` ranks are candidates; null = the library's default (range_min +
        num_negatives + positives, x 10 negatives when a margin or max_score filters).""", minimum=1)
    absolute_margin: float | None = option(None, """
        Drop a candidate unless score + margin <= the query's lowest positive score.""")
    relative_margin: float | None = option(None, """
        Drop a candidate scoring above positive - |positive| x margin (0.05 = NV-Retriever's
        TopK-PercPos 95 %).""")
    max_score: float | None = option(None, "Drop candidates scoring above this.")
    min_score: float | None = option(None, "Drop candidates scoring below this.")
    cross_encoder: str | None = option(None, """
        A Cross-Encoder reference: its scores replace the retriever's for the candidates and the
        positives before the margins and bounds apply, so a passage it scores close to the positive (a
        false negative) is dropped. null = the retriever's scores.""")
    cross_encoder_scale: Literal["logits", "sigmoid"] = option("sigmoid", """
        The Cross-Encoder's scores as raw logits or through a sigmoid (what the library's miner uses for
        a one-label Cross-Encoder); margins and bounds are in this scale.""")
    max_length: int = option(256, "Tokens per text for the retrievers and the Cross-Encoder.", minimum=8)
    batch_size: int = option(64, "Encoding / scoring batch size (not part of the key).", minimum=1)
    embedding_cache: str | None = option("artifacts/embeddings", """
        Folder of cached Bi-Encoder embeddings (`<hash of model identity and texts>.npy`), shared by
        every mining run; null = none. Not part of the key.""")


@dataclass(frozen=True, kw_only=True)
class NegativesParams(NegativesOptions):
    """`negatives`: the retrievers (`bm25` or Bi-Encoder references, entering the key by identity), the
    selection rule of sentence-transformers' miner, the optional Cross-Encoder filter and its score scale."""

    model_identity: dict[str, str] = field(default_factory=dict)  # each model reference -> its identity
    hub_revisions: dict[str, str] = field(default_factory=dict)


NEGATIVES = Stage("negatives", 1, "mine hard negatives of (query, positive) pairs with BM25 / Bi-Encoder retrievers "
                  "(rank range, margins, optional Cross-Encoder filter): a candidate list per pair (GPL) or fixed negatives", "augsbert.jobs.negatives:run",
                  section="negatives", runtime=("batch_size", "embedding_cache", "hub_revisions"),
                  roles=("negatives",), seconds_per_item=0.01, base_mem_mb=8000, mb_per_item=0.01,
                  params=NegativesParams, plan=lambda seed_plan: plan_negatives(seed_plan), needs=("data",),
                  estimate="mine", counts=lambda plan, node: mining_counts(plan, node))
STAGES = (NEGATIVES,)


def negatives_node(seed_plan: SeedPlan, pairs: Node, generated: bool = False) -> Node:
    """The negatives node over `pairs`: a BEIR-format dataset's data node (its qrels are the pairs), or a
    `queries` node (`generated`: its pairs are its train qrels)."""
    graph, options = seed_plan.graph, section_options(NegativesOptions, seed_plan.config["negatives"])
    if generated:
        options["qrels_split"] = "train"
    refs = [r for r in options["retrievers"] if r != BM25] + ([options["cross_encoder"]] if options["cross_encoder"]
                                                               else [])
    options["model_identity"] = {ref: graph.model_identity(ref) for ref in dict.fromkeys(refs)}
    pinned = graph.config.get("hub_revisions", {})
    revisions = {ref: pinned[ref] for ref in refs if ref in pinned}
    if revisions:
        options["hub_revisions"] = revisions
    if not options["cross_encoder"]:
        options.pop("cross_encoder_scale")  # no Cross-Encoder: its scale cannot change anything
    if options["mode"] == PER_STEP:  # every survivor of each retriever's top range_max is a candidate
        if options["range_max"] is None:
            raise ConfigError(f"experiments.{seed_plan.experiment}.negatives.range_max: `mode: per_step` keeps "
                              "each retriever's top range_max as the query's candidates; set it (GPL: 50)")
        options.pop("num_negatives")
    name = f"{pairs.name}.{options['qrels_split']}.{'+'.join(r.rsplit('/', 1)[-1] for r in options['retrievers'])}"
    return graph.add(NEGATIVES, name, options, {"pairs": pairs})


def plan_negatives(seed_plan: SeedPlan) -> dict[str, Node]:
    """Planned when `negatives.retrievers` names one: the pairs are the generated queries (`queries.generator`)
    or the qrels of a BEIR-format dataset. A `gpl` model plans the same node itself (stages.gpl)."""
    if not seed_plan.config["negatives"]["retrievers"] or "gpl" in seed_plan.config["models"]:
        return {}
    if seed_plan.config["queries"]["generator"]:
        pairs = queries_node(seed_plan)
        return {"queries": pairs, "negatives": negatives_node(seed_plan, pairs, generated=True)}
    dataset = seed_plan.config["dataset"]
    if seed_plan.graph.config["datasets"][dataset]["loader"] != "beir":
        raise ConfigError(f"experiments.{seed_plan.experiment}.negatives: mining needs (query, positive) pairs; "
                          f"dataset '{dataset}' is not BEIR-format (`loader: beir` with qrels/"
                          f"{seed_plan.config['negatives']['qrels_split']}.tsv)")
    return {"negatives": negatives_node(seed_plan, seed_plan.roles["data"])}


# ------------------------------------------------------------------ what the time estimate counts (kind `mine`)
def mined_pairs(plan, node) -> tuple[int, int, float]:
    """(pairs, passages, query tokens) a `negatives` node mines: its metrics once it ran; else its pairs input's,
    generated queries (passages x per passage over those passages; a query: an inverse cloze sentence, else at most
    the generator's max_length) or a BEIR dataset's qrels and corpus."""
    source = plan.node(dict(node.inputs)["pairs"])
    done = metrics(node)
    if source.stage == QUERIES.name:
        passages, per_passage = generated(plan, source)
        q = source.params
        if q.get("generator") == INVERSE_CLOZE:
            query = text_tokens(plan, source, "pairs" if q.get("source") == "sentences" else "sentence")
        else:
            query = float(q.get("max_length") or 64)
        pairs = passages * per_passage
    else:
        split = node.params.get("qrels_split", default_of(NegativesParams, "qrels_split"))
        pairs = beir_rows(source, f"qrels_{split}") or DEFAULT_SIZE["train"]
        passages = beir_rows(source, "corpus") or corpus_passages(plan, source)
        query = DEFAULT_QUERY_CHARS / CHARS_PER_TOKEN
    if done.get("pairs"):
        pairs, passages = int(done["pairs"]), int(done.get("passages") or passages)
    return pairs, passages, query


def negatives_per_row(negatives) -> tuple[int, int]:
    """(negatives a row keeps for the student, candidates a row holds) of a negatives node: per_step, one drawn
    of its candidates (each retriever's window, the union); fixed, num_negatives of them."""
    p = negatives.params
    if p.get("mode", PER_STEP) == PER_STEP:
        window = int(p.get("range_max") or 1) - int(p.get("range_min") or 0)
        return 1, max(1, window * len(p.get("retrievers") or [1]))
    return int(p.get("num_negatives") or 1), int(p.get("num_negatives") or 1)


def mining_counts(plan, node) -> dict:
    """What a `negatives` job computes: `pairs` queries searched over `passages` passages, each text's tokens
    (`query_tokens`, `passage_tokens`, within max_length); per retriever (`retrievers`; None: BM25, no model) every
    passage and query encoded and an exact search; with a `cross_encoder` the candidates of each retriever's
    window and the positive (`window` + 1 per query) rescored as pairs of `pair_tokens`."""
    p = node.params
    pairs, passages, query = mined_pairs(plan, node)
    max_length = float(p.get("max_length") or DEFAULT_MAX_LENGTH)
    passage = min(max_length, passage_tokens(plan, node) + 2)
    query = min(max_length, query + 2)
    return {"pairs": pairs, "passages": passages, "query_tokens": query, "passage_tokens": passage,
            "retrievers": [None if ref == BM25 else ref for ref in p.get("retrievers") or []],
            "cross_encoder": p.get("cross_encoder") or None, "window": negatives_per_row(node)[1],
            "pair_tokens": min(max_length, query + passage + 3)}
