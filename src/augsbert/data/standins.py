"""A rehearsal's datasets: each cut from the user's files where they are present, else stand-in files.

`prepare_datasets(config, source, dest)` writes, for every dataset of the config, the files its loader reads
(`Loader.inputs`) below `dest` (the rehearsal's data_dir) at the same place relative to it as below `source` (the
real data_dir):

- present: a cut copy (`cut_file`): the first line (a header, where the format has one) and CUT_ROWS lines
  spread evenly over the rest (CORPUS_ROWS for a corpus or an unlabeled text), as bytes, so a malformed row, a
  renamed column or a wrong delimiter in the user's file is in the copy and stops the rehearsal's data job (its
  message names the copy's file and line; the column name is the user's). A BEIR folder is cut together
  (`cut_beir`): the qrels lines kept, the queries and passages they name, and more passages up to CORPUS_ROWS;
- absent: where the loader has a writer here (STANDIN_WRITERS), files in its exact format with made-up rows;
  else nothing, and planning stops with the loader's own missing-file message.

Files outside `source` (the Lee corpus inside the gensim wheel, an absolute path of the user's) are read where
they are. A copy is rewritten only when its bytes change, so its content key, and the rehearsal's artifacts
keyed by it, stay from one rehearsal to the next.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import tempfile
from pathlib import Path

from ..config.datasets import ParallelColumns
from ..config.rehearsal import CUT_ROWS
from ..errors import MissingDataError
from .loaders import LOADERS

CORPUS_ROWS = 300  # passages or unlabeled sentences
QRELS_ROWS = 40  # judgements per BEIR qrels split
CORPUS_WORDS = ("unlabeled", "background", "titles", "sentences")  # in a file's name: a corpus (as corpus.jsonl)


def _spread(lines: list[bytes], keep: int) -> list[bytes]:
    """`keep` lines spread evenly over `lines` (all of them when there are no more)."""
    if len(lines) <= keep:
        return lines
    return [lines[i * len(lines) // keep] for i in range(keep)]


def _write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _encode(path: Path, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0) if path.suffix == ".gz" else data


def cut_lines(data: bytes, keep: int) -> bytes:
    lines = data.splitlines(keepends=True)
    if not lines:
        return data
    out = [lines[0], *_spread(lines[1:], keep)]
    if not out[-1].endswith(b"\n"):
        out[-1] += b"\n"
    return b"".join(out)


def cut_file(source: Path, dest: Path) -> None:
    """A cut copy of `source` at `dest` (see the module's docstring); a parquet table keeps spread rows."""
    stem = source.name.lower().split(".")[0]
    keep = CORPUS_ROWS if stem == "corpus" or any(word in stem for word in CORPUS_WORDS) else CUT_ROWS
    if source.suffix in (".parquet", ".pq"):
        import pandas as pd

        table = pd.read_parquet(source)
        rows = _spread(list(range(len(table))), keep)
        buffer = io.BytesIO()
        table.iloc[rows].to_parquet(buffer, index=False)
        _write_if_changed(dest, buffer.getvalue())
        return
    _write_if_changed(dest, _encode(source, cut_lines(_read(source), keep)))


def _jsonl_ids(lines: list[bytes]) -> list[str | None]:
    ids = []
    for line in lines:
        try:
            ids.append(str(json.loads(line).get("_id")))
        except (ValueError, AttributeError):
            ids.append(None)  # a malformed line: kept where it falls, for the loader to name
    return ids


def cut_beir(source: Path, dest: Path) -> None:
    """A BEIR folder cut as one: each qrels split's header and QRELS_ROWS spread judgements, the queries and
    passages they name (in file order), and passages spread over the rest up to CORPUS_ROWS."""
    named_queries, named_passages = set(), set()
    for qrels in sorted((source / "qrels").glob("*.tsv")):
        lines = qrels.read_bytes().splitlines(keepends=True)
        kept = [lines[0], *_spread(lines[1:], QRELS_ROWS)] if lines else []
        for line in kept[1:]:
            fields = line.decode("utf-8", "replace").rstrip("\r\n").split("\t")
            if len(fields) >= 2:
                named_queries.add(fields[0])
                named_passages.add(fields[1])
        _write_if_changed(dest / "qrels" / qrels.name, b"".join(kept))
    for name, named, extra in (("queries.jsonl", named_queries, QRELS_ROWS), ("corpus.jsonl", named_passages,
                                                                             CORPUS_ROWS)):
        lines = (source / name).read_bytes().splitlines(keepends=True)
        ids = _jsonl_ids(lines)
        wanted = {i for i, id_ in enumerate(ids) if id_ in named}
        rest = [i for i in range(len(lines)) if i not in wanted]
        wanted |= set(_spread(rest, max(0, extra - len(wanted))))
        _write_if_changed(dest / name, b"".join(lines[i] if lines[i].endswith(b"\n") else lines[i] + b"\n"
                                                for i in sorted(wanted)))


# ---- stand-in files, in each loader's exact format -----------------------------------------------------------

BWS_TOPICS = ["Abortion", "Cloning", "Death penalty", "Gun control", "Marijuana legalization", "Minimum wage",
              "Nuclear energy", "School uniforms"]
THEMES = ["dog cat horse cow sheep bird", "bank loan stock price market cash", "rain snow wind storm cloud fog",
          "goal team match ball coach race", "piano violin guitar drum song choir", "bread cheese apple soup rice cake"]


def _sentence(i: int, salt: int = 0) -> str:
    words = THEMES[(i + salt) % len(THEMES)].split()
    return " ".join(words[(i * 7 + k + salt) % len(words)] for k in range(5)) + f" {i}"


def write_bws(path: Path, per_topic: int = 15, topics=BWS_TOPICS) -> Path:
    """The BWS Argument Similarity corpus' CSV (id, argument1, argument2, topic, score), `per_topic` pairs each."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "argument1", "argument2", "topic", "score"])
    n = 0
    for t, topic in enumerate(topics):
        for i in range(per_topic):
            n += 1
            writer.writerow([f"p{n:05d}", f"{topic} {_sentence(i)}", f"{topic} {_sentence(i, 1 + t)}", topic,
                             f"{(i % 10) / 9:.4f}"])
    _write_if_changed(path, buffer.getvalue().encode())
    return path


def write_stsb_semeval(root: Path, rows: int = 40) -> Path:
    """sts-train/dev/test.csv: tab-separated, unquoted, genre, file, year, id, score, sentence1, sentence2."""
    for split in ("train", "dev", "test"):
        lines = ["\t".join(["main-captions", "MSRvid", "2012test", f"{i:04d}", f"{(i * 5) % 6:.3f}",
                            f"{split} {_sentence(i)}", f"{split} {_sentence(i, 1 + i % 3)}"]) for i in range(rows)]
        _write_if_changed(root / f"sts-{split}.csv", ("\n".join(lines) + "\n").encode())
    return root


def write_beir(root: Path, passages: int = 200, queries: int = 40) -> Path:
    """corpus.jsonl, queries.jsonl and qrels/{train,dev,test}.tsv (query-id, corpus-id, score; a header)."""
    corpus = "".join(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": _sentence(i)}) + "\n"
                     for i in range(passages))
    asked = "".join(json.dumps({"_id": f"q{i}", "text": _sentence(i, 2)}) + "\n" for i in range(queries))
    _write_if_changed(root / "corpus.jsonl", corpus.encode())
    _write_if_changed(root / "queries.jsonl", asked.encode())
    for part, split in enumerate(("train", "dev", "test")):
        lines = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{(i * 3) % passages}\t1" for i in range(queries)
                                                   if i % 3 == part]
        _write_if_changed(root / "qrels" / f"{split}.tsv", ("\n".join(lines) + "\n").encode())
    return root


def write_text(path: Path, lines: int = CORPUS_ROWS) -> Path:
    """One sentence per line (an unlabeled corpus, a text_file dataset without columns)."""
    _write_if_changed(path, "".join(_sentence(i, 4) + "\n" for i in range(lines)).encode())
    return path


def write_spanish(root: Path, stems: list[str], rows: int = 40) -> Path:
    """<stem>-input.txt (two tab-separated sentences a line) and <stem>-score.txt (one score a line) per stem."""
    for stem in stems:
        _write_if_changed(root / f"{stem}-input.txt", "".join(f"{stem} {_sentence(i)}\t{stem} {_sentence(i, 1 + i % 4)}\n"
                                                            for i in range(rows)).encode())
        _write_if_changed(root / f"{stem}-score.txt", "".join(f"{(i * 3) % 5}\n" for i in range(rows)).encode())
    return root


UKP_TOPICS = ["abortion", "cloning", "death_penalty", "gun_control", "marijuana_legalization", "minimum_wage",
              "nuclear_energy", "school_uniforms"]
UKP_HEADER = "topic\tretrievedUrl\tarchivedUrl\tsentenceHash\tsentence\tannotation\tset\n"
NEWS_GROUPS = ["comp.graphics", "rec.autos", "sci.space", "talk.politics.misc", "misc.forsale", "soc.religion.christian"]


def write_topic_corpus(options: dict, dest: Path) -> None:
    """A topic corpus in its release's layout (augsbert.data.topic_corpora): UKP Sentential's `<topic>.tsv` files,
    20 Newsgroups' bydate folders, or a `table` (.tsv / .csv / .jsonl with text, topic, split)."""
    root = dest / options["path"]
    if options["format"] == "ukp_sentential":
        for topic in UKP_TOPICS:
            rows = [f"{topic.replace('_', ' ')}\thttp://a\thttp://b\th{i}\t{_sentence(i, len(topic))}\t"
                    f"{'NoArgument' if i % 2 else 'Argument_for'}\t{('train', 'train', 'val', 'test')[i % 4]}\n"
                    for i in range(12)]
            _write_if_changed(root / f"{topic}.tsv", (UKP_HEADER + "".join(rows)).encode())
    elif options["format"] == "newsgroups":
        for part in ("20news-bydate-train", "20news-bydate-test"):
            for g, group in enumerate(NEWS_GROUPS):
                for i in range(6):
                    post = f"From: someone@example.com\nSubject: {group} {i}\n\n{_sentence(i, g)}\n{_sentence(i + 1, g)}\n"
                    _write_if_changed(root / part / group / str(1000 + i), post.encode("latin-1"))
    else:  # table
        lines = [("text", "topic", "split")] + [(_sentence(i, t), f"topic {t}", ("train", "train", "dev", "test")[i % 4])
                                                for t in range(4) for i in range(12)]
        sep = "," if root.suffix == ".csv" else "\t"
        if root.suffix in (".jsonl", ".json", ".ndjson"):
            text = "".join(json.dumps(dict(zip(lines[0], row))) + "\n" for row in lines[1:])
        else:
            text = "".join(sep.join(row) + "\n" for row in lines)
        _write_if_changed(root, text.encode())


def cut_folder(source: Path, dest: Path, per_folder: int = 6) -> None:
    """A folder of one file per item (20 Newsgroups' bydate posts): `per_folder` files of each subfolder."""
    for folder in sorted({p.parent for p in source.rglob("*") if p.is_file()}):
        for path in sorted(p for p in folder.iterdir() if p.is_file())[:per_folder]:
            _write_if_changed(dest / path.relative_to(source), path.read_bytes())


def write_triples(path: Path, rows: int = CUT_ROWS) -> Path:
    """NLI triples (pretrain.triples) in the file's format: anchor, positive, negative columns (.parquet, .tsv,
    .csv), or SNLI / MultiNLI jsonl as released (sentence1, sentence2, gold_label)."""
    triples = [(_sentence(i), _sentence(i, 1), _sentence(i, 3)) for i in range(rows)]
    if path.suffix in (".jsonl", ".json", ".ndjson"):
        text = "".join(json.dumps({"sentence1": a, "sentence2": h, "gold_label": label}) + "\n"
                       for a, p, n in triples for h, label in ((p, "entailment"), (n, "contradiction")))
        _write_if_changed(path, text.encode())
    elif path.suffix in (".parquet", ".pq"):
        import pandas as pd

        buffer = io.BytesIO()
        pd.DataFrame(triples, columns=["anchor", "positive", "negative"]).to_parquet(buffer, index=False)
        _write_if_changed(path, buffer.getvalue())
    else:
        sep = "," if path.suffix == ".csv" else "\t"
        _write_if_changed(path, "".join(sep.join(row) + "\n" for row in [("anchor", "positive", "negative"),
                                                                          *triples]).encode())
    return path


def prepare_files(paths: list[str], source: Path, dest: Path, writer=write_triples) -> dict[str, str]:
    """Files a config names outside its datasets (pretrain.triples), relative to the data folder: cut from
    `source` when there, else written by `writer`; {path: what was done}."""
    done = {}
    for name in sorted(set(paths)):
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            done[name] = "read in place"
        elif (source / relative).is_file():
            cut_file(source / relative, dest / relative)
            done[name] = f"cut from {source / relative}"
        else:
            writer(dest / relative)
            done[name] = "stand-in file"
    return done


def write_parallel_rows(root: Path, options: dict, rows: int = 40) -> Path:
    """Row-parallel STS files (`file_names`, comma-separated, no header): the source language's rows and each
    language's "translation" of them (the language's code before each word), the same rows in every file."""
    for language in [options["source_language"], *options["languages"]]:
        for split in ("train", "dev", "test"):
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            for i in range(rows):
                words = [f"{language}:{w}" if language != options["source_language"] else w
                         for w in f"{split} {_sentence(i)}, {_sentence(i, 1 + i % 3)}".split(", ")]
                writer.writerow([*words, f"{(i * 5) % 6:.1f}"])
            name = options["file_names"].replace("{language}", language).replace("{split}", split)
            _write_if_changed(root / name, buffer.getvalue().encode())
    return root


def write_parallel_file(path: Path, language: str | None, column: str | None = None, rows: int = CUT_ROWS,
                        split: str = "train") -> Path:
    """A parallel file of your own: a header `source`, `target` (and the language `column`, when one is named); the
    `split`'s word leads each sentence, so that a held-out file shares none with the train file (a shared one is
    dropped from training: the same sentences in both would leave nothing to train on)."""
    sep = "," if path.suffix == ".csv" else "\t"
    header = ["source", "target"] + ([column] if column else [])
    lines = [sep.join(header)] + [sep.join([f"{split} {_sentence(i)}", f"{language or 'de'}: {split} {_sentence(i)}"]
                                          + (["de"] if column else [])) for i in range(rows)]
    _write_if_changed(path, ("\n".join(lines) + "\n").encode())
    return path


def _bws(name, options, dest):
    return write_bws(dest / options["path"])


def _stsb(name, options, dest):
    return write_stsb_semeval(dest / options["path"])


def _beir(name, options, dest):
    return write_beir(dest / options["path"])


def _spanish(name, options, dest):
    return write_spanish(dest / options["path"], options["train_files"] + options["test_files"])


def _parallel_rows(name, options, dest):
    return write_parallel_rows(dest / options["path"], options)


def _parallel_file(name, options, dest):
    named = ParallelColumns().to_json()
    columns = {**named, **(options.get("columns") or {})}
    if (columns["source"], columns["target"]) != (named["source"], named["target"]):
        return dest  # renamed columns: the stand-in's header would not be the user's (planning says what is missing)
    for key, split in (("path", "train"), ("test", "test")):
        if options.get(key):
            write_parallel_file(dest / options[key], options.get("language"), columns.get("language"), split=split)
    return dest


def _no_files(name, options, dest):  # a loader whose own files ship with the package (Lee, in the gensim wheel)
    return dest


STANDIN_WRITERS = {"bws_cross_topic": _bws, "bws_in_topic": _bws, "stsb": _stsb, "beir": _beir,
                   "spanish_sts": _spanish, "lee": _no_files, "parallel_rows": _parallel_rows,
                   "parallel_file": _parallel_file}


def _cut_folder_of(source: Path, relative: Path) -> Path | None:
    """The 20 Newsgroups part folder (20news-bydate-train/...) of a stand-in file, when the real one is there."""
    for i, part in enumerate(relative.parts):
        if part.startswith("20news-bydate-") and (source / Path(*relative.parts[:i + 1])).is_dir():
            return Path(*relative.parts[:i + 1])
    return None


def _under(path: Path, root: Path) -> Path | None:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return None


def _outside_paths(options: dict) -> str | None:
    """A dataset path (its `path`, `test`, `unlabeled` or `topic_corpus.path`) that is absolute, starts with `~` or
    leaves the data folder: a stand-in must never be written by it (it would land on the user's own files)."""
    topic = options.get("topic_corpus")
    for value in (options.get("path"), options.get("test"), options.get("unlabeled"),
                  topic.get("path") if isinstance(topic, dict) else None):
        if isinstance(value, str) and (value.startswith("~") or Path(value).is_absolute() or ".." in Path(value).parts):
            return value
    return None


def prepare_datasets(config: dict, source: str | Path, dest: str | Path) -> dict[str, str]:
    """Cut or write every dataset of `config` below `dest` (see the module's docstring): {dataset: what was
    done} ('cut from <source files>', 'stand-in files', 'read in place', or why nothing was written)."""
    source, dest = Path(source), Path(dest)
    done = {}
    for name, options in sorted((config.get("datasets") or {}).items()):
        loader = LOADERS.get(options.get("loader"))
        if loader is None:
            continue
        missing = None
        try:
            paths = loader.inputs(name, options, source)
        except MissingDataError as err:
            missing, paths = err, []
        if missing is None:
            beir = options.get("loader") == "beir"
            cut = []
            for path in paths:
                relative = _under(path, source)
                if relative is None:
                    continue  # outside the data folder: read where it is
                if path.is_dir():
                    cut_folder(path, dest / relative)
                elif beir and path.name == "corpus.jsonl":
                    cut_beir(path.parent, dest / relative.parent)
                elif not beir:
                    cut_file(path, dest / relative)
                cut.append(str(path))
            done[name] = f"cut from {', '.join(cut)}" if cut else "read in place"
        elif outside := _outside_paths(options):
            # a stand-in is written below a scratch folder by the dataset's own paths: an absolute path (or one
            # leaving the data folder) would make the writer write where the user's real files are
            done[name] = (f"absent, read in place (a path outside the data folder: {outside}; no stand-in is "
                          f"written there): {str(missing).splitlines()[0]}")
        elif options.get("loader") in STANDIN_WRITERS:
            # the stand-in files written aside; each one whose real file is there is cut from it instead
            with tempfile.TemporaryDirectory() as scratch:
                STANDIN_WRITERS[options["loader"]](name, options, Path(scratch))
                if options.get("unlabeled"):
                    write_text(Path(scratch) / options["unlabeled"])
                if options.get("topic_corpus"):
                    write_topic_corpus(options["topic_corpus"], Path(scratch))
                made, cut = [], []
                for written in sorted(p for p in Path(scratch).rglob("*") if p.is_file()):
                    relative = written.relative_to(scratch)
                    folder = _cut_folder_of(source, relative)
                    if folder is not None:
                        cut_folder(source / folder, dest / folder)
                        cut.append(str(source / folder))
                    elif (source / relative).is_file():
                        cut_file(source / relative, dest / relative)
                        cut.append(str(source / relative))
                    else:
                        _write_if_changed(dest / relative, written.read_bytes())
                        made.append(str(relative))
            done[name] = f"stand-in files ({', '.join(made)})" + (f", cut from {', '.join(cut)}" if cut else "")
            if "topic_corpus" in options:
                done[name] += f"; {missing}".splitlines()[0]
        else:
            done[name] = f"absent, no stand-in for loader {options.get('loader')!r}: {str(missing).splitlines()[0]}"
    return done
