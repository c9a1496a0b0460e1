"""Topic prompts (thesis 4.4.2): the topic label in front of the text, ended by a delimiter token.

A prompted text is `"<topic> <delimiter> <text>"`, which every tokenizer turns
into `[CLS] topic ¥ text [SEP]` (RoBERTa: `<s> topic ¥ text</s>`); the CBE's
pair builder and the MLM pair collator then give `[CLS] t1 ¥ a [SEP] [CLS] t2 ¥
b [SEP]` without knowing about prompts. Prompting happens on the text, before
tokenising, so one function serves every stage (MLM pairs, teacher, labelling,
student, classifier, evaluation) and truncation (which cuts the end of a text)
never removes a prompt.

The delimiter must be one token, or "prompt tokens are never masked" cannot be
stated by token position: `ensure_delimiter` adds it to the tokenizer (and
resizes the model's embeddings) only when the tokenizer splits it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch

from .tables import normalise_text

log = logging.getLogger(__name__)

DEFAULT_DELIMITER = "¥"  # thesis 4.4.2: a character none of its datasets uses
MODES = ("none", "prompted", "hidden")


def prompt(text: str, topic: str | None, delimiter: str = DEFAULT_DELIMITER) -> str:
    """`"topic ¥ text"`; a text without a topic stays as it is."""
    return f"{topic} {delimiter} {text}" if topic else text


def prompt_pairs(pairs: pd.DataFrame, delimiter: str, topics: dict[str, str] | None = None) -> pd.DataFrame:
    """A copy of `pairs` with both sentences prompted.

    Topics come from the pair's own columns (`topic1`/`topic2`, else the pair's
    `topic`, as in BWS where both arguments share it) or, for rows without
    them, from `topics` (normalised text -> topic, see `topic_map`). Pairs
    with no known topic (STS-B as the source of a transfer) stay plain.
    """
    out = pairs.copy()
    for side, column in ((1, "sentence1"), (2, "sentence2")):
        texts = out[column].astype(str)
        own = pd.Series([""] * len(out), index=out.index)
        for name in (f"topic{side}", "topic"):  # the first non-empty of the two, row by row
            if name in out.columns:
                own = own.where(own != "", out[name].fillna("").astype(str))
        if topics:
            own = own.where(own != "", texts.map(lambda t: topics.get(normalise_text(t), "")))
        out[column] = [prompt(t, topic, delimiter) for t, topic in zip(texts, own)]
    return out


def topic_map(data_dir: str | Path) -> dict[str, str]:
    """Normalised text -> topic over a data artifact's pair splits and unlabeled corpus.

    A sentence seen under several topics (possible in user data) gets its most
    frequent one, ties broken alphabetically; the log says how many.
    """
    data_dir = Path(data_dir)
    frames = []
    for split in ("train", "dev", "test"):
        path = data_dir / f"{split}.parquet"
        if path.is_file():
            table = pd.read_parquet(path)
            if "topic" in table.columns:
                for column in ("sentence1", "sentence2"):
                    frames.append(table[[column, "topic"]].set_axis(["text", "topic"], axis=1))
    unlabeled = data_dir / "unlabeled.parquet"
    if unlabeled.is_file():
        table = pd.read_parquet(unlabeled)
        if "topic" in table.columns:
            frames.append(table[["text", "topic"]])
    if not frames:
        return {}
    long = pd.concat(frames, ignore_index=True)
    long["text"] = long["text"].astype(str).map(normalise_text)
    long = long[(long["text"] != "") & (long["topic"].astype(str) != "")]
    counts = long.groupby(["text", "topic"]).size().reset_index(name="n")
    counts = counts.sort_values(["text", "n", "topic"], ascending=[True, False, True], kind="stable")
    ambiguous = int(counts["text"].duplicated().sum())
    if ambiguous:
        log.warning("%s: %d sentence(s) occur under more than one topic; each gets its most frequent one",
                    data_dir, ambiguous)
    first = counts.drop_duplicates("text")
    return dict(zip(first["text"], first["topic"].astype(str)))


def single_token_id(tokenizer, delimiter: str) -> int | None:
    """The id of `delimiter` if the tokenizer keeps it as one token between a topic and a text, else None.

    Structural test: tokens("x ¥ y") must be tokens("x") + [one token] + tokens of "y" (with or without a
    leading space, as the tokenizer encodes a word after a delimiter).
    """
    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    head, ids = encode("x"), encode(prompt("y", "x", delimiter))
    if ids[: len(head)] != head:
        return None
    for tail in (encode("y"), encode(" y")):
        if tail and ids[len(ids) - len(tail):] == tail and len(ids) == len(head) + 1 + len(tail):
            candidate = ids[len(head)]
            return None if candidate == tokenizer.unk_token_id else candidate
    return None


def ensure_delimiter(tokenizer, delimiter: str, model=None) -> int:
    """The delimiter's token id; added to the tokenizer (model embeddings resized) if it is not one token."""
    found = single_token_id(tokenizer, delimiter)
    if found is not None:
        log.info("topic delimiter %r is token %d of the vocabulary: nothing added", delimiter, found)
        return found
    from tokenizers import AddedToken

    # the spaces around the delimiter belong to it: the text after it then tokenises exactly as
    # it does unprompted (a byte-level BPE would otherwise emit a lone "Ġ" before its first word)
    tokenizer.add_tokens([AddedToken(delimiter, lstrip=True, rstrip=True, normalized=False)])
    if model is not None:
        model.resize_token_embeddings(len(tokenizer))
    added = single_token_id(tokenizer, delimiter)
    if added is None:
        raise ValueError(f"topic delimiter {delimiter!r}: still not a single token after adding it to the tokenizer")
    log.info("topic delimiter %r is not one token of the vocabulary: added as token %d (new, trained embedding)",
             delimiter, added)
    return added


def prompt_positions(input_ids: torch.Tensor, start_id: int, delimiter_id: int) -> torch.Tensor:
    """Positions of prompt tokens: in each segment (from a [CLS]/<s>) that has a delimiter, the tokens
    after the segment start up to and including its first delimiter.

    Works on single texts and on the CBE pair layout alike; a segment without a
    delimiter (an unprompted text) has no prompt positions.
    """
    ids = input_ids
    is_start = ids == start_id
    is_delim = ids == delimiter_id
    segment = torch.cumsum(is_start.long(), dim=1)  # 0 before the first start token
    seen = torch.cumsum(is_delim.long(), dim=1)
    base = torch.cummax(torch.where(is_start, seen, torch.zeros_like(seen)), dim=1).values
    within = seen - base  # delimiters of this segment up to and including the position
    n_segments = int(segment.max()) + 1
    per_segment = torch.zeros(ids.shape[0], n_segments, dtype=within.dtype).scatter_reduce(
        1, segment, within, reduce="amax", include_self=True)
    has_delim = per_segment.gather(1, segment) > 0
    in_prompt = (within == 0) | (is_delim & (within == 1))
    return in_prompt & has_delim & (segment > 0) & ~is_start


def with_topics(pairs: pd.DataFrame, topics: dict[str, str], pair_topic: pd.Series | None = None) -> pd.DataFrame:
    """`pairs` with `topic1` / `topic2`: the pair's own topic where given, else each text's (`topic_map`)."""
    out = pairs.copy()
    for side, column in ((1, "sentence1"), (2, "sentence2")):
        looked_up = out[column].map(lambda t: topics.get(normalise_text(t), ""))
        if pair_topic is not None:
            own = pd.Series(pair_topic.fillna("").astype(str).to_numpy(), index=out.index)
            looked_up = own.where(own != "", looked_up)
        out[f"topic{side}"] = looked_up
    return out
