"""How long a run will take, said before its first job: per job its steps and an estimated time, and the total.

Printed by `augsbert plan --estimate` and, for the jobs a run will actually start, by the workflow before the
first one (workflow/Snakefile `onstart`). The estimate is made from the model's size × the pairs, not from a
calibration run (nothing is timed on the device while planning):

    pairs      the data's own counts once its data job ran; before, the rows of a `pairs_file` dataset's files
               (augsbert.stages.sizes.split_sizes), the known corpora's sizes, else a guess said as such; a
               gold_subset (gold_fraction) keeps round(fraction × train pairs) of its data's
    training   steps = max_steps, else ⌈examples / batch_size⌉ × epochs (examples: the pairs, twice with
               teacher.symmetric); time = steps × batch_size × (TRAIN_S_PER_EXAMPLE + TRAIN_S_PER_TOKEN ×
               tokens) × (1 + SMALL_BATCH / batch_size) × size
    scoring    dev pairs after every pass, test pairs once, silver pairs to label, evaluation test pairs:
               pairs × (SCORE_S_PER_PAIR + SCORE_S_PER_TOKEN × tokens) × size
    tokens     of one example: a pair model (the CE / CBE teacher, and the labels it gives) reads both texts as one
               sequence, min(max_length, 2 × text + 3); a Bi-Encoder each text alone, 2 × min(max_length,
               text + 2); text = characters / CHARS_PER_TOKEN (augsbert.stages.sizes), the mean characters of a text computed from the
               data (augsbert.stages.sizes.text_chars: the prepared tables once the data job ran; before, a
               `pairs_file`'s bytes per row, any other loader's source files as its job reads them; else
               DEFAULT_TEXT_CHARS). Training batches are grouped by length, so the texts' own length counts,
               not max_length
    GPL        by what each job computes (the stages' `estimate` kinds generate / mine / cross_scores / distill,
               counted by the stage's `counts` hook in its own module; priced here, which names no stage):
               queries: the inverse cloze, no model (a data job's time); a T5 generator, passages × their
               tokens (≤ input_max_length) × GENERATE_S_PER_INPUT_TOKEN + passages × queries per passage ×
               max_length decoder steps (GENERATE_S_PER_TOKEN: a batch decodes until its longest query ends, so
               max_length is an upper bound), × the generator's size / T5-base's;
               negatives: per Bi-Encoder retriever each passage and query encoded (the scoring figures per
               text, size of the retriever), per retriever an exact search of queries × passages
               (SEARCH_S_PER_PAIR × dimension / 384; BM25's score block priced so), a Cross-Encoder filter's
               pairs scored; margins: the (query, positive) and (query, drawn negative) pairs the student will
               read, scored as pairs of query + passage tokens; gpl: steps × batch of (query, positive,
               negatives) tuples, each text encoded alone, as a Bi-Encoder training example of their tokens;
               counts from the upstream jobs' metrics.json once they ran, else from the corpus' size
    size       the base model's parameters (from its config.json) / REFERENCE_PARAMS (all-MiniLM-L6-v2)
    start-up   START_S per job started plainly (importing torch and loading the model), WARM_START_S per job
               forked from the warm server (a local run's default, augsbert.run.warm)

The CPU figures are for 2 idle cores and the reference model. Calibration (2026-11-28, this project's 2-core
machine; `python benchmarks/bench_estimate.py CONFIG NAME` prints estimate against measured per job):
  - the per-token and per-example parts from two runs of different lengths: `make demo` (grid demo_quick: Lee's
    documents, 128 tokens per example; 10 jobs, 2 min 10 s warm on idle cores, README) and the own-data page's
    4K-pair STS-B run (docs/guide/own-data.md: ~35 tokens per CBE example, 2 min 28 s warm on idle cores; its
    teacher's 60 steps of 16 took ~0.5 s per step there). The former model (a constant per example, set on the
    demo's long texts) priced a short STS pair as a 128-token one: the STS run's training and labelling jobs
    were estimated 2-3x too long (6 min 08 s in all).
  - per job, the split between the jobs from their CPU seconds in a run on shared cores (bench_estimate.py).
  - start-up: a plain job start ~6 s of imports and model load; a warm one ~2 s (issue 50: an evaluation job
    11 s -> 2 s with warm starts).
Before the sampling job has run, the silver pairs are counted as pool sentences × top_k (augsbert.stages.sizes),
an upper bound: duplicates and sentences of dev/test pairs leave later, so an estimate is rather long than short.
On a GPU the figures are divided by GPU_SPEEDUP, an assumption, not a measurement.

Every figure is for idle cores, and the estimate says so: it reads the load now (the 1-minute load average,
os.getloadavg, and the cores this process may use) when it is made and prints the likely factor on a shared
machine, `load_factor`: 1 + load / cores (a job keeps its cores busy; with `load` other busy threads on them it
gets cores / (cores + load) of the machine). Measured on the own-data page's 4K-pair STS-B run
(docs/guide/own-data.md): threads that wait on each other lose more than that share, so under load the factor is
a lower bound. A job estimated beyond JOB_WARN_S or a run beyond TOTAL_WARN_S is warned about, naming the setting
that drives it (`epochs: 100000` printed 77,289,301 h without a word before). A run also hands each job its
estimate (`write_job_estimates`, the file named by ESTIMATE_FILE_ENV): the job's progress line
(augsbert.scheduling.progress) compares its measured time per step with it.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from ..models.gpu_memory import DEFAULT_DIMS, model_config, model_dims, parameter_count
from ..stages import REGISTRY, planning_order
from ..stages.sizes import DEFAULT_MAX_LENGTH, epochs, input_splits, pool_sentences, text_tokens, upstream_data
from ..store.processes import alive
from .gpus import inventory
from .progress import ESTIMATE_FILE_ENV, load_factor, machine_load
from .resources import job_items, job_work, needs_gpu

REFERENCE_PARAMS = 22_700_000  # all-MiniLM-L6-v2, the packaged default model
# CPU figures of the reference model on 2 idle cores (see the module docstring for where they come from). A
# training example costs a fixed part (collation, optimizer and Python per example) and a part per token; the
# token count is that of the texts (batches are grouped by length: little padding), capped at max_length.
TRAIN_S_PER_EXAMPLE = 0.010  # seconds per training example, fixed part (forward + backward) at a large batch
TRAIN_S_PER_TOKEN = 0.00038  # seconds per token of a training example
SMALL_BATCH = 4.0  # per-example cost x (1 + SMALL_BATCH / batch_size): small batches use the cores less well
SCORE_S_PER_PAIR = 0.001  # seconds per scored pair (a Cross-Bi-Encoder's or two Bi-Encoder encodings), fixed part
SCORE_S_PER_TOKEN = 0.00004  # seconds per token scored (forward only, no gradient)
START_S = 6.0  # per job started plainly: interpreter, torch, the model
WARM_START_S = 2.0  # per job forked from the warm server (libraries imported once per run): the model, the data
GPU_SPEEDUP = 20.0  # assumed, not measured here
UNKNOWN_MODEL_PARAMS = 110_000_000  # a model whose files are not on this machine: BERT-base assumed
# GPL's stages (queries, negatives, margins, gpl), priced by what they compute:
# T5-base generating (models.query_generation.generate: 8 passages x 350 tokens, 3 sampled queries each) on this
# machine, benchmarks/bench_generation.py --threads 1 (2026-11-28, load ~2: one other user's test on the other core;
# one thread, so its CPU seconds are its own compute, not a spin-wait for a second thread on a shared core): 8.86 s
# for 4 decoder steps, 14.16 s for 36. One thread's figures: on two idle cores a job runs up to 2x faster, so they
# are an upper bound (the estimate is rather long than short). T5 generation is priced by these, not by
# SCORE_S_PER_TOKEN x the encoder's size, which prices that encoder pass 0.44 s against 8.2 s measured: the same
# run times all-MiniLM-L6-v2's forward pass at 0.000265 s per token, 6.6x SCORE_S_PER_TOKEN (set on whole scoring
# jobs of short STS pairs, where the per-pair part weighs most).
GENERATE_S_PER_TOKEN = 0.0069  # seconds per generated token per sequence (a decoder step, cross-attention included)
GENERATE_S_PER_INPUT_TOKEN = 0.0029  # seconds per passage token of the encoder's pass
T5_BASE = {"vocab_size": 32128, "d_model": 768, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12}
SEARCH_S_PER_PAIR = 3.7e-9  # exact search, seconds per query x passage at 384 dimensions: 100K queries x 1M
# passages took 365.6 s (evaluation) and 737.8 s for two retrievers (mining) on this machine (docs/methods/gpl.md,
# benchmarks/bench_gpl_search.py); scaled by the embedding's dimension / 384. BM25's score block is priced so too.
SEARCH_DIMS = 384
# A static student (`student.arch: static`, a table of token vectors) is priced by what its job computes, not as
# Transformer steps (issue 65: 2,516 steps priced at 18 min 52 s). Measured (2026-12-07, this 2-core machine,
# benchmarks/bench_estimate.py's way: CPU seconds of the process, the machine shared at load 6-13, so CPU time, not
# wall time): model2vec's distillation of all-MiniLM-L6-v2 (30,522 tokens, PCA to 256) 124.6 CPU s; the distilled
# table (30,522 x 256) trained on the STS-B gold pairs at batch 16: 120 steps 12.2 CPU s, 720 steps 66.1 CPU s, so
# 0.090 CPU s a step, AdamW's update of the whole table most of it (the gradient of an EmbeddingBag is dense), and
# the same 360 steps took 55.5 s of wall time at load 6-7. On 2 idle cores (both threads busy): 0.045 s a step of a
# 7.8M-value table, 62 s for the distillation.
STATIC_S_PER_STEP_PER_VALUE = 0.045 / (30522 * 256)  # a training step: the optimizer over every table value
STATIC_DISTILL_S_PER_TOKEN = 62.0 / 30522  # model2vec: each vocabulary token through the base (x its size)
STATIC_S_PER_PAIR = 0.0002  # scoring a dev / test pair: two bags of token vectors (1,379 test pairs took 0.6 s)
STATIC_PRETRAIN_EPOCHS = 40  # the table's pre-training stops after 5 epochs without progress: 42 on STS-B's pool
STATIC_PRETRAIN_BATCH = 256  # augsbert.models.compact.PRETRAIN_BATCH
# Beyond these an estimate is a setting to check, not a plan: a job longer than a week, a run longer than 3 days
JOB_WARN_S = 7 * 24 * 3600.0
TOTAL_WARN_S = 3 * 24 * 3600.0


@dataclass(frozen=True)
class JobEstimate:
    key: str
    stage: str
    steps: int | None  # optimizer steps of a training job
    seconds: float
    what: str  # e.g. "60 steps of 16; scoring 500 dev + 1,379 test pairs"
    step_s: float | None = None  # seconds per optimizer step of its training (idle cores), for the progress line
    driver: str | None = None  # the setting its time grows with, as written in a config (`teacher.epochs: 3`)


def model_params(reference: str | None) -> int | None:
    """Parameters of a model from its config.json (a local folder, the packaged model or a hub model in the local
    cache: augsbert.models.gpu_memory.model_dims, as the GPU memory estimate reads it), None where no config
    is found (UNKNOWN_MODEL_PARAMS then)."""
    if not reference:
        return None
    dims = model_dims(reference)
    return None if dims == DEFAULT_DIMS else parameter_count(dims)


def estimate_device(configured: str) -> str:
    """`cpu` or `gpu`: the config's `device`, `auto` resolved as a local run would (a GPU nvidia-smi lists)."""
    if configured == "cpu":
        return "cpu"
    if configured.startswith("cuda"):
        return "gpu"
    return "gpu" if inventory() else "cpu"


def with_upstream(plan, keys) -> list[str]:
    """`keys` and every planned node they are built from (inputs of inputs), each once, `keys` first."""
    found = list(dict.fromkeys(keys))
    seen = set(found)
    for key in found:  # grows while it is read
        for _, upstream in plan.node(key).inputs:
            if upstream not in seen:
                seen.add(upstream)
                found.append(upstream)
    return found


def estimate_jobs(plan, keys, device: str, warm: bool = False) -> list[JobEstimate]:
    """The estimates of the jobs `keys` (planned nodes; others, e.g. results files, are left out) on `device`
    (cpu / gpu), in planning order."""
    cache: dict = {}
    order = [stage.name for stage in planning_order()]
    order += [name for name in REGISTRY if name not in order]  # shards and the like: after the planned stages
    keys = sorted(dict.fromkeys(k for k in keys if k in plan.nodes),
                  key=lambda k: (order.index(plan.node(k).stage), k))
    return [job_estimate(plan, key, device, cache, warm) for key in keys]


def estimate_text(plan, keys, experiments, configured_device: str, warm: bool = False,
                  load: tuple[float, int] | None = None) -> str:
    """The estimate of the jobs `keys` as printed; `warm`: the jobs start as forks of a warm server (a local run's
    default, augsbert.run.warm); `load`: (load average, cores), read now (machine_load) unless given."""
    device = estimate_device(configured_device)
    estimates = estimate_jobs(plan, keys, device, warm)
    text = render_estimate(estimates, device, role_names(plan, {e.key for e in estimates}, experiments), warm,
                           machine_load() if load is None else load)
    whole = whole_experiment_line(plan, experiments, device, warm)
    return text + (f"\n{whole}" if whole else "")


def awaited(plan, name: str) -> list[str]:
    """What a person is to give before experiment `name` can finish (its nodes' `awaits`: "round 1", ...), numbers
    in their order ("round 2" before "round 10"); [] where nothing waits for one."""
    found = set()
    for roles in plan.experiment(name).runs.values():
        for key in roles.values():
            node = plan.node(key)
            declared = REGISTRY[node.stage]
            what = declared.awaits(node) if declared.awaits else None
            if what:
                found.add(what)
    return sorted(found, key=lambda what: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", what)])


def whole_experiment_line(plan, experiments, device: str, warm: bool) -> str | None:
    """Where a person labels the rounds (`active.annotator: file`), a run's plan ends at the round it stops at, so
    its estimate covers the jobs up to that stop: the line adding the whole of each such experiment, every round
    after the stop included (planned as if each file were filled: augsbert.planning.graph.Graph.every_round), the
    jobs already built left out; None where no experiment waits for a person (issue 64)."""
    waiting = [name for name in experiments if awaited(plan, name)]
    if not waiting:
        return None
    whole = type(plan)(plan.config)
    whole.every_round = True
    whole.warnings = plan.warnings  # a planning warning the run's plan said is not said again
    keys = [run["key"] for name in waiting for roles in whole.experiment_spec(name)["runs"].values()
            for run in roles.values()]
    keys = [key for key in with_upstream(whole, keys) if not Path(whole.node(key).path).is_dir()]
    total = sum(e.seconds for e in estimate_jobs(whole, keys, device, warm))
    names = "; ".join(f"{name}: a person labels {', '.join(awaited(whole, name))}" for name in waiting)
    return (f"augsbert: this run stops where a person labels a round; the whole of "
            f"{'the experiment' if len(waiting) == 1 else 'the experiments'} from here, every round included: "
            f"{len(keys)} job(s), {clock(total)} on {'this CPU' if device == 'cpu' else 'a GPU'} (idle cores, as "
            f"above; the time the person takes is not counted) ({names})")


def write_job_estimates(estimates: list[JobEstimate], path: str | Path, load: tuple[float, int]) -> str:
    """Write the jobs' estimates where their progress lines read them (`ESTIMATE_FILE_ENV`); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = {e.key: {"seconds": round(e.seconds, 3), "steps": e.steps,
                       "step_s": None if e.step_s is None else round(e.step_s, 6), "load": round(load[0], 2),
                       "cores": load[1]} for e in estimates}
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(records, indent=1) + "\n")
    os.replace(partial, path)
    return str(path)


def estimate_for_run(plan, keys, experiments, configured_device: str, warm: bool, folder: str | Path) -> str:
    """What a local run prints before its first job (workflow/Snakefile `onstart`): the estimate with the load now;
    and each job's estimate written under `folder` (one file per run) and named in this process' environment, which
    the jobs inherit, for their progress lines."""
    device = estimate_device(configured_device)
    load = machine_load()
    estimates = estimate_jobs(plan, keys, device, warm)
    sweep_run_estimates(folder)
    os.environ[ESTIMATE_FILE_ENV] = write_job_estimates(
        estimates, Path(folder).resolve() / f"estimate-{socket.gethostname()}-{os.getpid()}.json", load)
    text = render_estimate(estimates, device, role_names(plan, {e.key for e in estimates}, experiments), warm, load)
    whole = whole_experiment_line(plan, experiments, device, warm)
    return text + (f"\n{whole}" if whole else "")


def sweep_run_estimates(folder: str | Path) -> list[Path]:
    """Remove the estimates files of this host's runs that are gone: a run cut off by Ctrl-C or a kill ends without
    the hook that removes its file (`forget_run_estimates`). A file of another host (a shared folder) is kept: its
    pid says nothing here. Returns the files removed."""
    gone = []
    for path in Path(folder).glob("estimate-*.json"):
        host, _, pid = path.stem[len("estimate-"):].rpartition("-")
        if not pid.isdigit() or int(pid) == os.getpid() or alive(int(pid), host):  # another host's: kept
            continue
        path.unlink(missing_ok=True)
        gone.append(path)
    return gone


def forget_run_estimates() -> None:
    """Remove the run's estimates file (written by estimate_for_run), at the run's end."""
    path = os.environ.pop(ESTIMATE_FILE_ENV, None)
    if path:
        Path(path).unlink(missing_ok=True)


def _device_factor(device: str) -> float:
    return 1.0 if device == "cpu" else 1.0 / GPU_SPEEDUP


def job_model(plan, node) -> str | None:
    """The model reference a job runs: its own (`model`), else that of the model it reads (its stage's
    `model_input`: a teacher it labels with; a model it evaluates; the model it starts from)."""
    if isinstance(node.settings.get("model"), str):
        return node.settings["model"]
    inputs = dict(node.inputs)
    for role in (REGISTRY[node.stage].model_input, "model", "init"):
        if role in inputs:
            return job_model(plan, plan.node(inputs[role]))
    return None


def example_tokens(plan, node, text: float) -> float:
    """Tokens one example (a pair) costs the job's model: a pair model (CE / CBE teacher, and the labels it
    gives) reads both texts as one sequence, min(max_length, 2 x text + 3); a Bi-Encoder encodes each text,
    2 x min(max_length, text + 2). max_length: the job's own, else that of the teacher it labels with."""
    p = node.params
    inputs = dict(node.inputs)
    model_input = REGISTRY[node.stage].model_input  # labels: the teacher it scores with
    model_node = plan.node(inputs[model_input]) if model_input and model_input in inputs else node
    q = model_node.params
    max_length = int(q.get("max_length") or p.get("max_length") or DEFAULT_MAX_LENGTH)
    pair_model = q.get("arch") in ("ce", "cbe")  # a teacher's architecture (a student's arch is never these)
    return min(max_length, 2 * text + 3) if pair_model else 2 * min(max_length, text + 2)


def dev_passes(examples: int, batch: int, epochs: int, max_steps: int | None) -> int:
    """How often a pair model's training scores its dev split: at the end of each pass over its examples, as
    augsbert.training.pairs.epoch_end counts them: `epochs` times, or with a step budget once per ⌈examples /
    batch⌉ steps and at the last step (a last, partial pass). It was ⌈steps × batch / examples⌉: one pass too many
    wherever the batches do not divide the examples (294 pairs in batches of 16 for 360 steps: 19 passes, not 20).
    The job's line says what its dev/test count is made of (issue 64: 5,896 in one plan and 5,401 in another for
    the same 495 dev and 4,906 test pairs were 2 dev passes and 1)."""
    if not max_steps:
        return epochs
    return math.ceil(int(max_steps) / max(1, math.ceil(examples / batch)))


def pair_cost(tokens: float) -> float:
    """Seconds to score one pair of `tokens` tokens (example_tokens) with the reference model on 2 idle cores."""
    return SCORE_S_PER_PAIR + SCORE_S_PER_TOKEN * tokens


def encode_cost(tokens: float) -> float:
    """Seconds to encode one text of `tokens` tokens (special tokens included) with the reference model: half a
    Bi-Encoder pair's pair_cost (a forward pass, as the calibrated scoring jobs price it)."""
    return SCORE_S_PER_PAIR / 2 + SCORE_S_PER_TOKEN * tokens


# ------------------------------------------------------------------ GPL's chain: queries, negatives, margins, gpl
# What each job computes is counted by its stage (the declaration's `counts` hook, in the stage's module: e.g.
# augsbert.stages.negatives.mining_counts); the functions below price those counts.
def t5_params(config: dict) -> int:
    """Weights of an encoder-decoder (T5) of `config` that its generation runs: the shared embedding, per encoder
    layer attention and feed-forward (4 d² + 2 d f), per decoder layer two attentions and feed-forward (8 d² + 2 d f)."""
    d, f = int(config["d_model"]), int(config["d_ff"])
    encoder = int(config["num_layers"])
    decoder = int(config.get("num_decoder_layers") or encoder)
    return int(config["vocab_size"]) * d + encoder * (4 * d * d + 2 * d * f) + decoder * (8 * d * d + 2 * d * f)


def t5_encoder_params(config: dict) -> int:
    """The encoder's share of t5_params (no embedding: a lookup, no compute)."""
    d, f = int(config["d_model"]), int(config["d_ff"])
    return int(config["num_layers"]) * (4 * d * d + 2 * d * f)


def _generator(reference: str) -> dict:
    """The generator's config.json where it is on this machine and an encoder-decoder with T5's fields, else
    T5-base's (GPL's BeIR/query-gen-msmarco-t5-base-v1)."""
    found = model_config(reference)
    return found if all(k in found for k in ("d_model", "d_ff", "num_layers", "vocab_size")) else T5_BASE


def _model_size(reference: str | None, cache: dict) -> float:
    if reference not in cache:
        cache[reference] = model_params(reference) if reference else None
    return (cache[reference] or (UNKNOWN_MODEL_PARAMS if reference else REFERENCE_PARAMS)) / REFERENCE_PARAMS


def queries_estimate(counts: dict, factor: float, start: float, warm: bool) -> tuple[float, str]:
    """A `queries` job (or one `query_shard`): `counts` of augsbert.stages.queries.query_counts."""
    passages, per_passage = counts["passages"], counts["per_passage"]
    if counts.get("without_model"):  # no model: a data job's time
        return (1.0 if warm else 2.0) + passages * per_passage * 1e-5, \
            f"{passages:,} passages x {per_passage} ({counts['without_model']})"
    config = _generator(counts["generator"])
    size = t5_params(config) / t5_params(T5_BASE)
    passage = counts["input_tokens"]
    encoder = passages * passage * GENERATE_S_PER_INPUT_TOKEN * t5_encoder_params(config) / t5_encoder_params(T5_BASE)
    steps = counts["steps"]  # a batch decodes until its longest query ends: at most max_length
    decoder = passages * per_passage * steps * GENERATE_S_PER_TOKEN * size
    return start + factor * (encoder + decoder), \
        f"{passages:,} passages x {per_passage} queries, up to {steps} tokens each"


def negatives_estimate(counts: dict, factor: float, start: float, cache: dict) -> tuple[float, str]:
    """A `negatives` job: `counts` of augsbert.stages.negatives.mining_counts."""
    pairs, passages = counts["pairs"], counts["passages"]
    passage, query = counts["passage_tokens"], counts["query_tokens"]
    seconds = 0.0
    for ref in counts["retrievers"]:
        dims = SEARCH_DIMS
        if ref is not None:  # a Bi-Encoder (None: BM25): encode every passage and query, then an exact search
            size = _model_size(ref, cache)
            seconds += size * (passages * encode_cost(passage) + pairs * encode_cost(query))
            dims = model_dims(ref)["hidden_size"]  # DEFAULT_DIMS' (BERT-base) where its config is not here
        seconds += pairs * passages * SEARCH_S_PER_PAIR * dims / SEARCH_DIMS
    if counts["cross_encoder"]:  # the candidates of each retriever's window and the positives, rescored
        seconds += _model_size(counts["cross_encoder"], cache) * pairs * (counts["window"] + 1) * pair_cost(
            counts["pair_tokens"])
    return start + factor * seconds, (f"{pairs:,} queries x {passages:,} passages, "
                                      f"{len(counts['retrievers'])} retriever(s)")


def margins_estimate(plan, node, counts: dict, factor: float, start: float, cache: dict) -> tuple[float, str]:
    """A `margins` job: `counts` of augsbert.stages.margins.margin_counts, scored by the job's model."""
    scored = counts["scored"]
    return start + factor * _model_size(job_model(plan, node), cache) * scored * pair_cost(counts["tokens"]), \
        f"scoring {scored:,} (query, passage) pairs"


def gpl_estimate(plan, node, counts: dict, factor: float, start: float,
                 cache: dict) -> tuple[int, float, str, float]:
    """The GPL student: steps x batch of (query, positive, negatives) tuples, each text encoded alone (a Bi-Encoder
    training example of their tokens, as the calibrated `train` jobs), then the target's test pairs scored; and
    the seconds of one step. `counts` of augsbert.stages.gpl.distill_counts."""
    steps, batch, test = counts["steps"], counts["batch"], counts["test"]
    per_example = (TRAIN_S_PER_EXAMPLE + TRAIN_S_PER_TOKEN * counts["tokens"]) * (1 + SMALL_BATCH / batch)
    size = factor * _model_size(job_model(plan, node), cache)
    seconds = start + size * (steps * batch * per_example + test * pair_cost(counts["test_tokens"]))
    return steps, seconds, f"{steps:,} steps of {batch} (query, positive, {counts['kept']} negative(s)); scoring " \
        f"{test:,} test pairs", size * batch * per_example


def job_estimate(plan, key: str, device: str = "cpu", params_cache: dict | None = None,
                 warm: bool = False) -> JobEstimate:
    """The steps and estimated seconds of the planned job `key` on `device` (cpu, or a GPU: cuda / auto), its
    start warm (a fork of the warm server, augsbert.run.warm) or plain."""
    node = plan.node(key)
    p = node.params
    cache = {} if params_cache is None else params_cache
    size = _model_size(job_model(plan, node), cache)
    factor = _device_factor(device)
    splits = input_splits(plan, node)
    dev, test = splits.get("dev", 0), splits.get("test", 0)
    declared = REGISTRY[node.stage]
    kind = declared.estimate
    start = WARM_START_S if warm else START_S
    text = text_tokens(plan, node)
    if p.get("test_pairs"):  # an active round's teacher scores a seeded subset of the test split
        test = min(test, int(p["test_pairs"]))
    if kind == "train" and p.get("max_steps") == 0:  # the untrained teacher: the base model scored on test
        tokens = example_tokens(plan, node, text)
        return JobEstimate(key, node.stage, 0, start + factor * size * test * pair_cost(tokens),
                           f"no training step; scoring {test:,} test pairs")
    if kind == "train" and p.get("batch_size") and p.get("arch") == "static":
        return static_estimate(plan, node, job_items(plan, key), dev, test, factor, start, cache)
    if kind == "train" and p.get("batch_size"):
        examples = job_items(plan, key) * (2 if p.get("symmetric") else 1)
        batch = int(p["batch_size"])
        n_epochs = epochs(node, declared.params)
        steps = int(p["max_steps"]) if p.get("max_steps") else math.ceil(examples / batch) * n_epochs
        passes = dev_passes(examples, batch, n_epochs, p.get("max_steps"))
        dev = dev if p.get("selection") != "last" and dev > 1 else 0  # no dev split read: no pass scores one
        scored = dev * passes + test
        tokens = example_tokens(plan, node, text)
        per_example = (TRAIN_S_PER_EXAMPLE + TRAIN_S_PER_TOKEN * tokens) * (1 + SMALL_BATCH / batch)
        seconds = start + factor * size * (steps * batch * per_example + scored * pair_cost(tokens))
        section = declared.section or node.stage
        driver = (f"{section}.max_steps: {int(p['max_steps']):,}" if p.get("max_steps") else
                  f"{section}.epochs: {n_epochs:,} x {math.ceil(examples / batch):,} steps of {batch} per epoch "
                  f"({examples:,} pairs)")
        # the split of the scored pairs only where dev passes are scored (a `last` teacher scores its test alone)
        split = f" ({dev:,} dev x {passes:,} pass{'es' if passes > 1 else ''} + {test:,} test)" if dev else ""
        return JobEstimate(key, node.stage, steps, seconds,
                           f"{steps:,} steps of {batch}; scoring {scored:,} dev/test pairs{split}",
                           factor * size * batch * per_example, driver)
    if kind == "score":
        pairs = job_items(plan, key)
        tokens = example_tokens(plan, node, text)
        return JobEstimate(key, node.stage, None, start + factor * size * pairs * pair_cost(tokens),
                           f"scoring {pairs:,} pairs")
    if kind in ("test", "test+suites"):
        tokens = example_tokens(plan, node, text)
        return JobEstimate(key, node.stage, None, start + factor * size * test * pair_cost(tokens),
                           f"scoring {test:,} test pairs" + (" and the evaluation suites" if kind == "test+suites"
                                                             else ""))
    if kind == "read":
        return JobEstimate(key, node.stage, None, (1.0 if warm else 2.0) + sum(splits.values()) * 1e-4,
                           "reading the files")
    counts = declared.counts(plan, node) if declared.counts else {}  # what the kind prices, as the stage counts it
    if kind == "generate":
        return JobEstimate(key, node.stage, None, *queries_estimate(counts, factor, start, warm))
    if kind == "mine":
        return JobEstimate(key, node.stage, None, *negatives_estimate(counts, factor, start, cache))
    if kind == "cross_scores":
        return JobEstimate(key, node.stage, None, *margins_estimate(plan, node, counts, factor, start, cache))
    if kind == "distill":
        steps, seconds, what, step_s = gpl_estimate(plan, node, counts, factor, start, cache)
        section = declared.section or node.stage
        driver = f"{section}.max_steps: {int(p['max_steps']):,}" if p.get("max_steps") else \
            f"{section}.epochs: {epochs(node, declared.params):,}"
        return JobEstimate(key, node.stage, steps, seconds, what, step_s, driver)
    # the other stages: their declared GPU figure per item (augsbert.scheduling.resources), times 10 for a model
    # job on a CPU (a job without a model, e.g. BM25 sampling, runs on the CPU anyway)
    work = job_work(plan, key)
    slower = 10 if device == "cpu" and needs_gpu(node) else 1
    seconds = start + work * declared.seconds_per_item * slower
    return JobEstimate(key, node.stage, None, seconds, f"{work:,} items")


def static_estimate(plan, node, examples: int, dev: int, test: int, factor: float, start: float,
                    cache: dict) -> JobEstimate:
    """A static student's job (`arch: static`): model2vec's distillation of its base (every vocabulary token
    through it), the table's pre-training where `static_pretrain` asks for it (the embedder's pass over the pool,
    then its epochs), then its training steps, each an optimizer step over the whole table (not a Transformer
    step), once per rate of a `static_lr_sweep` (short runs of `static_lr_sweep_steps` and the chosen rate's
    schedule, or the whole schedule per rate), and scoring dev after each pass and test once."""
    p = node.params
    batch = int(p["batch_size"])
    per_run = int(p["max_steps"]) if p.get("max_steps") else math.ceil(examples / batch) * int(p.get("epochs") or 1)
    rates = 1 + len(p.get("static_lr_sweep") or ())
    short = p.get("static_lr_sweep_steps")
    steps = rates * int(short) + per_run if short and rates > 1 else rates * per_run
    base = job_model(plan, node)
    found = model_config(base)
    vocab = int(found.get("vocab_size") or DEFAULT_DIMS["vocab_size"])
    values = vocab * int(p.get("static_dims") or found.get("hidden_size") or DEFAULT_DIMS["hidden_size"])
    step_s = factor * STATIC_S_PER_STEP_PER_VALUE * values
    distill = factor * _model_size(base, cache) * vocab * STATIC_DISTILL_S_PER_TOKEN
    passes = dev_passes(examples, batch, int(p.get("epochs") or 1), p.get("max_steps")) * rates  # as training
    seconds = start + distill + steps * step_s + factor * STATIC_S_PER_PAIR * (dev * passes + test)
    what = f"{steps:,} steps of {batch} over a {vocab:,}-token table" + (f" ({rates} learning rates)" if rates > 1
                                                                        else "") + f"; distilling {vocab:,} tokens"
    if "static_pretrain" in p:  # keyed only when set (`full`): the table is pre-trained first
        data = upstream_data(plan, node)
        pool = pool_sentences(data, plan) if data is not None else examples
        tokens = text_tokens(plan, node)
        embedder = dict(node.inputs).get("embedder")
        size = _model_size(job_model(plan, plan.node(embedder)) if embedder else base, cache)
        seconds += factor * size * pool * encode_cost(min(int(p.get("max_length") or DEFAULT_MAX_LENGTH), tokens + 2))
        seconds += STATIC_PRETRAIN_EPOCHS * math.ceil(0.9 * pool / STATIC_PRETRAIN_BATCH) * step_s
        what += f"; pre-training the table on {pool:,} pool sentences"
    section = REGISTRY[node.stage].section or node.stage
    driver = (f"{section}.max_steps: {int(p['max_steps']):,}" if p.get("max_steps") else
              f"{section}.epochs: {int(p.get('epochs') or 1):,} x {math.ceil(examples / batch):,} steps of {batch} "
              f"per epoch ({examples:,} pairs)")
    return JobEstimate(node.key, node.stage, steps, seconds, what, step_s, driver)


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours:,} h {rest // 60:02d} min" if hours else (f"{rest // 60} min {rest % 60:02d} s" if rest >= 60
                                                              else f"{rest} s")


def _span(seconds: float) -> str:
    """A long time as people say it: `1,234 days` / `3.5 days` / clock()."""
    days = seconds / 86400
    return f"{days:,.0f} days" if days >= 100 else (f"{days:.1f} days" if days >= 1 else clock(seconds))


def render_estimate(estimates: list[JobEstimate], device: str, roles: dict[str, str] | None = None,
                    warm: bool = False, load: tuple[float, int] | None = None) -> str:
    """The lines printed before a run: one per job, the total, what the figures assume (idle cores; the load
    `load` = (load average, cores) read when the estimate is made, and the likely factor), then a warning per job
    beyond JOB_WARN_S and for a total beyond TOTAL_WARN_S, each naming the setting that drives it."""
    roles = roles or {}
    where = "this CPU" if device == "cpu" else "a GPU (assumed: the CPU figures / 20)"
    starts = "warm" if warm else "plain"
    lines = [f"augsbert: estimate for {len(estimates)} job(s) on {where}, {starts} job starts (model size x pairs x "
             "tokens, not a calibration):"]
    width = max([len(roles.get(e.key, e.stage)) for e in estimates] + [4])
    for e in estimates:
        lines.append(f"  {roles.get(e.key, e.stage):<{width}}  {clock(e.seconds):>13}  {e.what}")
    total = sum(e.seconds for e in estimates)
    lines.append(f"  {'total':<{width}}  {clock(total):>13}  (one job at a time; a cap: teacher.max_steps, "
                 "student.max_steps, teacher.symmetric: false)")
    if load is not None:
        average, cores = load
        factor = load_factor(average, cores)
        if device == "cpu":
            lines.append(f"augsbert: the figures are for {cores} idle core(s); the load now is {average:.1f} (1-min load "
                         f"average, {cores} core(s)): expect about {factor:.1f}x, {clock(total * factor)} in all, or "
                         "more (each job's progress line re-estimates from its measured steps)")
        else:
            lines.append(f"augsbert: the figures assume a GPU to the jobs themselves; the CPU's load now is "
                         f"{average:.1f} on {cores} core(s) (each job's progress line re-estimates from its steps)")
    for e in estimates:
        if e.seconds > JOB_WARN_S:
            lines.append(f"augsbert: warning: {roles.get(e.key, e.stage)} is estimated at {clock(e.seconds)} "
                         f"({_span(e.seconds)}, more than {_span(JOB_WARN_S)}): {e.driver or e.what} drives it; "
                         "check that setting (a cap: the section's max_steps, fewer epochs)")
    if total > TOTAL_WARN_S:
        longest = max(estimates, key=lambda e: e.seconds)
        lines.append(f"augsbert: warning: the run is estimated at {clock(total)} ({_span(total)}, more than "
                     f"{_span(TOTAL_WARN_S)}); the longest job, {roles.get(longest.key, longest.stage)} "
                     f"({clock(longest.seconds)}), grows with {longest.driver or longest.what}")
    return "\n".join(lines)


def role_names(plan, keys, experiments) -> dict[str, str]:
    """A job's name for people: the role it plays in one of `experiments` (lower_bound, student, ...)."""
    names = {}
    for experiment in experiments:
        spec = plan.experiment_spec(experiment)
        for roles in spec["runs"].values():
            for role, run in roles.items():
                if run["key"] in keys and run["key"] not in names:
                    names[run["key"]] = role
    return names
