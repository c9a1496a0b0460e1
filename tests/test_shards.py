"""candidates.shards: sharded candidate search and labelling equal the unsharded run; plan keys; streaming."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from augsbert.config.load import prepare_config, read_config
from augsbert.plan import Plan
from augsbert.sampling import bm25 as bm25_module
from augsbert.sampling import semantic as semantic_module
from augsbert.sampling.pool import PairCollector, random_partners
from augsbert.sampling.shards import gold_keys, select_pairs, shard_rows
from augsbert.data import tables
from augsbert.jobs import candidate_shard, candidates, label_shard, labels, pool_index
from augsbert.models.teacher import Teacher
from conftest import REPO
from test_candidates import make_data
from test_plan import keys

SHARDS = 3


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few rows, so 3 shards of a 59-sentence pool each hold several whole blocks."""
    monkeypatch.setattr(semantic_module, "QUERY_BLOCK", 8)
    monkeypatch.setattr(bm25_module, "BLOCK_BYTES", 8 * 59 * 5)  # 5 BM25 queries per block
    monkeypatch.setattr(tables, "READ_CHUNK", 16)


def candidate_spec(data, strategies, model=None, **extra):
    params = {"strategies": list(strategies), "top_k": 3, "pool": "train", "exclude_eval_sentences": True,
              "candidate_pool": {"random": 3, "semantic_search": 2}, "model": "minilm-l6", "seed": 42, **extra}
    if model:
        params.update(semantic_model=model, exact=True, batch_size=16, max_length=32)
    return {"stage": "candidates", "key": "t-0000000000", "inputs": {"data": str(data)}, "params": params}


def sharded_candidates(tmp_path, spec, shards=SHARDS):
    """What the plan runs for candidates.shards > 1: pool_index, the shards, the merge."""
    params = spec["params"]
    index_params = {k: params[k] for k in ("pool", "exclude_eval_sentences", "semantic_model", "exact",
                                           "batch_size", "max_length", "model") if k in params}
    if "semantic_model" in params:
        index_params["least_index"] = "semantic_search_least" in params["strategies"]
    index = tmp_path / "index"
    pool_index.run({"params": index_params, "inputs": spec["inputs"]}, index, device="cpu")
    inputs = {"data": spec["inputs"]["data"], "index": str(index)}
    for shard in range(shards):
        out = tmp_path / f"shard{shard}"
        candidate_shard.run({"params": {**params, "shards": shards, "shard": shard},
                             "inputs": {"index": str(index)}}, out)
        inputs[f"shard_{shard}"] = str(out)
    merged = candidates.run({**spec, "params": {**params, "shards": shards}, "inputs": inputs}, tmp_path / "merged")
    return merged, pd.read_parquet(tmp_path / "merged" / "candidates.parquet")


@pytest.mark.parametrize("strategies", [("random", "bm25", "bm25_least", "kde"),
                                        ("semantic_search", "semantic_search_least", "iterative_kde")])
def test_sharded_candidates_equal_the_unsharded_run(tmp_path, small_blocks, tiny_model, strategies):
    data = make_data(tmp_path)
    semantic = strategies[0].startswith("semantic")
    # equality with the unsharded run holds for any encoder: the random tiny BERT embeds the pool
    spec = candidate_spec(data, strategies, tiny_model if semantic else None)
    whole = candidates.run(spec, tmp_path / "whole", device="cpu")
    merged, table = sharded_candidates(tmp_path, spec)
    pd.testing.assert_frame_equal(table, pd.read_parquet(tmp_path / "whole" / "candidates.parquet"))
    assert {k: v for k, v in merged.items() if k != "device"} == {k: v for k, v in whole.items() if k != "device"}
    # the shards really split the rows (several whole blocks each), and dropped duplicates across them
    ranges = [json.loads((tmp_path / f"shard{s}" / "metrics.json").read_text())["rows"] for s in range(SHARDS)]
    first = f"{strategies[0]}.0"
    assert [r[first] for r in ranges] == ([[0, 24], [24, 48], [48, 59]] if semantic else
                                          [[0, 20], [20, 40], [40, 59]])
    assert all(v.get("duplicate", 0) > 0 for v in whole["excluded"].values())
    if semantic:
        assert (tmp_path / "index" / "index.faiss").is_file() and (tmp_path / "index" / "index_least.faiss").is_file()


def test_vectorised_rules_equal_the_pair_collector():
    rng = np.random.default_rng(5)
    pool = sorted({f"s{i:03d}" for i in range(40)})
    gold = [(pool[i], pool[j]) for i, j in rng.integers(0, 40, (30, 2))] + [("not in pool", pool[0])]
    passes = [random_partners(40, 4, seed=1), rng.integers(0, 40, (40, 3))]  # the second has self pairs too
    collector = PairCollector(pool, gold, set())
    for p in passes:
        collector.add_neighbours("x", p)
    i, j, dropped = select_pairs(passes, len(pool), gold_keys(pool, gold))
    assert [(pool[a], pool[b]) for a, b in zip(i, j)] == [(a, b) for a, b, _ in collector.rows]
    assert dropped == dict(collector.excluded) and set(dropped) == {"self_pair", "gold_pair", "duplicate"}


def test_shard_rows_tile_the_range_at_block_boundaries():
    for n, shards, unit in [(59, 3, 8), (10, 4, 1), (5, 3, 8), (100_000, 7, 8192)]:
        ranges = [shard_rows(n, shards, s, unit) for s in range(shards)]
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(start % unit == 0 or start == n for start, _ in ranges)
    assert [shard_rows(5, 3, s, 8) for s in range(3)] == [(0, 5), (5, 5), (5, 5)]


def write_teacher(tmp_path, base):
    """A Cross-Bi-Encoder teacher artifact on `base` (untrained: the tests compare two ways of scoring)."""
    from augsbert.models.architectures import ARCHITECTURES

    teacher = tmp_path / "teacher"
    from augsbert.stages.teacher import TeacherParams
    from conftest import teacher_spec_params

    params = teacher_spec_params(max_length=32)
    model = ARCHITECTURES["cbe"].build(base, TeacherParams.from_json(params), "cpu")
    ARCHITECTURES["cbe"].save(model, teacher / "model")
    (teacher / "spec.json").write_text(json.dumps({"params": params}))
    return teacher


def test_sharded_labels_equal_the_unsharded_run(tmp_path, small_blocks, tiny_model):
    data = make_data(tmp_path)
    spec = candidate_spec(data, ("bm25", "kde"), top_k=1)
    spec["params"]["candidate_pool"]["random"] = 1
    candidates.run(spec, tmp_path / "cands")
    count = labels.candidate_count(tmp_path / "cands" / "candidates.parquet")
    assert count > 2 * 16 * SHARDS  # more than one chunk per shard
    teacher = write_teacher(tmp_path, tiny_model)  # sharded vs whole: any teacher, the tiny random one
    params = {"relabel_gold": True, "batch_size": 16, "kde_reference": "teacher", "seed": 1}
    inputs = {"teacher": str(teacher), "gold": str(data), "candidates": str(tmp_path / "cands")}
    whole = labels.run({"stage": "labels", "key": "t-0000000000", "params": params, "inputs": inputs},
                       tmp_path / "whole", device="cpu")
    shard_inputs = {}
    for shard in range(SHARDS):
        out = tmp_path / f"label_shard{shard}"
        label_shard.run({"params": {"batch_size": 16, "shards": SHARDS, "shard": shard},
                         "inputs": {"teacher": str(teacher), "candidates": str(tmp_path / "cands")}}, out, device="cpu")
        shard_inputs[f"label_shard_{shard}"] = str(out)
    merged = labels.run({"stage": "labels", "key": "t-0000000000", "params": {**params, "shards": SHARDS},
                         "inputs": {**inputs, **shard_inputs}}, tmp_path / "merged", device="cpu")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "merged" / "pairs.parquet"),
                                  pd.read_parquet(tmp_path / "whole" / "pairs.parquet"))
    assert merged == whole and whole["strategies"]["kde"]["kept"] < whole["strategies"]["kde"]["candidates"]
    rows = [json.loads((tmp_path / f"label_shard{s}" / "metrics.json").read_text())["rows"] for s in range(SHARDS)]
    assert rows[0][0] == 0 and rows[-1][1] == count and all(r[0] % 16 == 0 for r in rows) and rows[1][0] > 0


def test_streaming_scores_equal_the_in_memory_path(tmp_path, tiny_model, monkeypatch):
    teacher_dir = write_teacher(tmp_path, tiny_model)  # streamed vs in memory: any teacher, the tiny random one
    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(25)]
    text = lambda: " ".join(rng.choice(words, rng.integers(2, 12)))  # noqa: E731 - varied lengths
    frame = pd.DataFrame({"sentence1": [text() for _ in range(60)], "sentence2": [text() for _ in range(60)],
                          "strategy": "bm25"})
    path = tmp_path / "candidates.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=23)  # groups != chunks
    from augsbert.stages.labels import LabelShardParams

    teacher = Teacher({"inputs": {"teacher": str(teacher_dir)}},
                      LabelShardParams(batch_size=16, shards=1, shard=0), "cpu")
    in_memory = teacher.arch.predict(teacher.model, list(zip(frame.sentence1, frame.sentence2)), 16, teacher.params)
    streamed = np.empty(60)
    teacher.score_rows(path, 0, 60, streamed)  # READ_CHUNK > 60: one call, as the in-memory path
    np.testing.assert_array_equal(streamed, in_memory)
    monkeypatch.setattr(tables, "READ_CHUNK", 16)
    pieces = [(first, t.num_rows) for first, t in tables.read_rows(path, 16, 60)]
    assert pieces == [(16, 16), (32, 16), (48, 12)]
    part = np.empty(60 - 16)
    teacher.score_rows(path, 16, 60, part)  # chunks of 16: each sorted by length on its own
    chunked = np.concatenate([teacher.arch.predict(teacher.model, list(zip(frame.sentence1[a:a + 16],
                                                                          frame.sentence2[a:a + 16])), 16, teacher.params)
                              for a in range(16, 60, 16)])
    np.testing.assert_array_equal(part, chunked)
    np.testing.assert_allclose(part, in_memory[16:], atol=1e-5)  # other padding: float noise only


def test_one_shard_keeps_every_key_and_more_shards_change_only_sampling_and_labels():
    def distill(shards):
        return {"dataset": "lee", "teacher": {"arch": "cbe"}, "student": {"use_gold_labels": False},
                "candidates": {"strategies": ["bm25", "random"], "shards": shards}}

    def plan_of(experiments):  # the repository config with only these experiments (planning all is slow)
        raw = read_config(REPO / "config" / "config.yaml")
        return prepare_config({**raw, "experiments": experiments, "grids": {}})

    plan = Plan(plan_of({"one": distill(1), "three": distill(3), "four": distill(4)}))
    # a config written before candidates.shards existed plans the same nodes, key for key
    raw = plan_of({"one": distill(1)})
    raw["experiments"]["one"]["candidates"].pop("shards")
    assert set(keys(Plan(raw), "one").values()) == set(keys(plan, "one").values())
    one, three, four = (keys(plan, name) for name in ("one", "three", "four"))
    assert not any(plan.nodes[k].stage in ("pool_index", "candidate_shard", "label_shard") for k in one.values())
    for role in ("data", "teacher", "lower_bound", "zero_shot"):
        assert one[role] == three[role] == four[role]
    assert len({one["candidates"], three["candidates"], four["candidates"]}) == 3
    assert len({one["labels"], three["labels"], four["labels"]}) == 3
    assert {r for r in three if "shard" in r or r == "pool_index"} == {
        "pool_index", *(f"candidate_shard_{i}" for i in range(3)), *(f"label_shard_{i}" for i in range(3))}
    # the student learns the same pairs: only its labels input differs
    assert plan.node(three["student"]).params == plan.node(one["student"]).params
    assert sorted(dict(plan.node(three["candidates"]).inputs)) == ["data", "index", "shard_0", "shard_1", "shard_2"]
    assert [plan.node(three[f"candidate_shard_{i}"]).params["shard"] for i in range(3)] == [0, 1, 2]
    assert sorted(dict(plan.node(three["labels"]).inputs)) == ["candidates", "gold", "label_shard_0",
                                                               "label_shard_1", "label_shard_2", "teacher"]
    assert four["pool_index"] == three["pool_index"]  # one pool (and index) for any shard count
