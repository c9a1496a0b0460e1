"""USEB (Wang et al., TSDAE, 2021): AskUbuntu, CQADupStack, TwitterPara, SciDocs on the released test files.

Reads `data-eval/<task>/` as unzipped from UKP's `data-eval.zip` and follows
the official evaluators (UKPLab/useb): titles only, cosine similarity of
normalised embeddings, every figure x 100.
- AskUbuntu (`test.txt`, `text_tokenized.txt`): re-rank the 20 BM25
  candidates; MAP over queries with a positive among them.
- CQADupStack (`corpus.json`, `retrieval_split.json`): per forum, retrieve
  from the forum's posts minus the split's queries; AP over the top 100
  (0 without a hit), mean per forum, then over forums.
- TwitterPara (`Twitter_URL_Corpus_test.txt`, `test.data`): AP of cosine
  against "paraphrase" (> 3 of 5 or 6 votes / expert score; exactly 3 is
  dropped), mean of TURL and PIT-2015.
- SciDocs (`data.json`): per task (cite, cocite, coread, coview) MAP of the
  re-ranked candidates, unretrieved relevant items counting as misses;
  mean over tasks.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

from ..data import DataError
from ..data.readers import read_all_lines
from .retrieval import average_precision

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised embeddings


def _fields(path: Path, line_no: int, line: str, n: int) -> list[str]:
    fields = line.rstrip("\r\n").split("\t")
    if len(fields) < n:
        raise DataError(f"{path}:{line_no}: expected at least {n} tab-separated fields, found {len(fields)}")
    return fields


def _lines(path: Path) -> list[str]:
    try:
        return read_all_lines(path)
    except FileNotFoundError:
        raise DataError(f"{path}: missing (unzip USEB's data-eval.zip into the data directory)") from None


def _load_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing (unzip USEB's data-eval.zip into the data directory)") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None


def askubuntu(encode: Encode, root: Path) -> dict:
    titles = {}
    path = root / "text_tokenized.txt"
    for i, line in enumerate(_lines(path), 1):
        if line.strip():
            fields = _fields(path, i, line, 2)
            titles[fields[0]] = fields[1].strip()
    path = root / "test.txt"
    aps, skipped = [], 0
    for i, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        qid, similar, candidates, scores = _fields(path, i, line, 4)[:4]
        candidates, bm25 = candidates.split(), [float(s) for s in scores.split()]
        if len(bm25) != len(candidates):
            raise DataError(f"{path}:{i}: {len(candidates)} candidates but {len(bm25)} BM25 scores")
        unknown = [c for c in [qid, *candidates] if c not in titles]
        if unknown:
            raise DataError(f"{path}:{i}: id(s) {unknown[:3]} not in {root / 'text_tokenized.txt'}")
        relevant = set(similar.split()) & set(candidates)
        if not relevant:
            skipped += 1
            continue
        candidates = [candidates[j] for j in np.argsort(-np.asarray(bm25), kind="stable")]  # BM25 order breaks ties
        emb = encode([titles[qid], *(titles[c] for c in candidates)])
        order = np.argsort(-(emb[1:] @ emb[0]), kind="stable")
        aps.append(average_precision([candidates[j] for j in order], relevant))
    if not aps:
        raise DataError(f"{path}: no query has a positive among its candidates")
    return {"askubuntu_map": 100 * float(np.mean(aps)), "queries": len(aps), "skipped_queries": skipped}


def _top_k(query_emb: np.ndarray, doc_emb: np.ndarray, k: int, chunk: int = 1024) -> np.ndarray:
    """Indices of the k most similar documents per query, best first."""
    k = min(k, len(doc_emb))
    out = np.empty((len(query_emb), k), dtype=np.int64)
    for start in range(0, len(query_emb), chunk):
        scores = query_emb[start:start + chunk] @ doc_emb.T
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        rows = np.take_along_axis(scores, part, axis=1)
        out[start:start + chunk] = np.take_along_axis(part, np.argsort(-rows, axis=1, kind="stable"), axis=1)
    return out


def cqadupstack(encode: Encode, root: Path, k: int = 100) -> dict:
    corpus = _load_json(root / "corpus.json")
    split = _load_json(root / "retrieval_split.json")
    if "test" not in split:
        raise DataError(f"{root / 'retrieval_split.json'}: no 'test' key (found {sorted(split)})")
    per_forum = {}
    for forum, qrels in split["test"].items():
        posts = corpus.get(forum)
        if posts is None:
            raise DataError(f"{root / 'corpus.json'}: no forum '{forum}' (needed by retrieval_split.json test)")
        pool = [pid for pid in posts if pid not in qrels]
        queries = list(qrels)
        missing = [q for q in queries if q not in posts]
        if missing:
            raise DataError(f"{root / 'corpus.json'}: forum '{forum}' lacks query post(s) {missing[:3]}")
        top = _top_k(encode([posts[q] for q in queries]), encode([posts[p] for p in pool]), k)
        aps = []
        for q, row in zip(queries, top):
            relevant = set(qrels[q])
            ranking = [pool[j] for j in row]
            hits = relevant.intersection(ranking)
            aps.append(average_precision(ranking, hits) if hits else 0.0)  # AP over the top k, as USEB's
        per_forum[forum] = 100 * float(np.mean(aps))
    return {f"cqadupstack_map@{k}": float(np.mean(list(per_forum.values()))), "per_forum": per_forum}


def _paraphrase_ap(encode: Encode, pairs: list[tuple[str, str, int]]) -> tuple[float, int]:
    kept = [(a, b, int(label > 3)) for a, b, label in pairs if label != 3]
    a = encode([p[0] for p in kept])
    b = encode([p[1] for p in kept])
    return 100 * float(average_precision_score([p[2] for p in kept], np.einsum("ij,ij->i", a, b))), len(kept)


def twitterpara(encode: Encode, root: Path) -> dict:
    turl, pit = [], []
    path = root / "Twitter_URL_Corpus_test.txt"
    for i, line in enumerate(_lines(path), 1):
        if line.strip():
            a, b, votes = _fields(path, i, line, 3)[:3]
            try:
                turl.append((a, b, int(ast.literal_eval(votes)[0])))
            except (ValueError, SyntaxError, TypeError, IndexError):
                raise DataError(f"{path}:{i}: third field {votes!r} is not '(n_positive, n_total)'") from None
    path = root / "test.data"
    for i, line in enumerate(_lines(path), 1):
        if line.strip():
            fields = _fields(path, i, line, 5)
            try:
                pit.append((fields[2], fields[3], int(fields[4])))
            except ValueError:
                raise DataError(f"{path}:{i}: label {fields[4]!r} is not an integer 0-5") from None
    ap_turl, n_turl = _paraphrase_ap(encode, turl)
    ap_pit, n_pit = _paraphrase_ap(encode, pit)
    return {"twitterpara_ap": (ap_turl + ap_pit) / 2, "turl_ap": ap_turl, "pit_ap": ap_pit,
            "turl_pairs": n_turl, "pit_pairs": n_pit}


def scidocs(encode: Encode, root: Path) -> dict:
    data = _load_json(root / "data.json")
    titles = {pid: ((paper or {}).get("title") or "").strip() for pid, paper in data.get("corpus", {}).items()}
    if "test" not in data:
        raise DataError(f"{root / 'data.json'}: no 'test' key (found {sorted(data)})")
    per_task = {}
    for task, qrels in data["test"].items():
        aps = []
        for qid, judged in qrels.items():
            if not titles.get(qid):
                continue  # USEB skips queries without a title
            relevant = {c for c, rel in judged.items() if int(rel) > 0}
            candidates = [c for c in judged if titles.get(c)]
            if not relevant or not candidates:
                continue
            emb = encode([titles[qid], *(titles[c] for c in candidates)])
            order = np.argsort(-(emb[1:] @ emb[0]), kind="stable")
            aps.append(average_precision([candidates[j] for j in order], relevant))
        per_task[task] = 100 * float(np.mean(aps)) if aps else None
    scored = [v for v in per_task.values() if v is not None]
    return {"scidocs_map": float(np.mean(scored)) if scored else None, "per_task": per_task}


TASKS = {"askubuntu": askubuntu, "cqadupstack": cqadupstack, "twitterpara": twitterpara, "scidocs": scidocs}
HEADLINE = {"askubuntu": "askubuntu_map", "cqadupstack": "cqadupstack_map@100", "twitterpara": "twitterpara_ap",
            "scidocs": "scidocs_map"}


def useb_suite(encode: Encode, tasks: dict[str, str]) -> dict:
    """Every task of `tasks` (name -> its data-eval directory); `summary` holds the headline numbers and their mean."""
    details, summary, skipped = {}, {}, {}
    for task, root in tasks.items():
        details[task] = TASKS[task](encode, Path(root))
        value = details[task][HEADLINE[task]]
        if value is None:
            skipped[task] = "no query could be scored (e.g. no titles)"
            continue
        summary[HEADLINE[task]] = value
        log.info("USEB: %s %s = %.2f", task, HEADLINE[task], value)
    scored = list(summary.values())
    summary["useb_avg"] = float(np.mean(scored)) if scored else None
    return {"tasks": details, "summary": summary, "skipped": skipped,
            "useb_avg_tasks": [t for t in tasks if t not in skipped]}
