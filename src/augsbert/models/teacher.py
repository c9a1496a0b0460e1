"""Models that score pairs for a later stage: a teacher artifact's pair model (`TrainedPairModel`: Cross-Encoder /
Cross-Bi-Encoder with the parameters it was trained with); the labelling `Teacher`, one such model or an
ensemble of them, and how it is shown a pair (topic prompts, thesis 5.6.1), scoring pair tables or rows of a
candidates parquet file one piece (READ_CHUNK rows) at a time; an ensemble's members' test predictions and
gold scores (`test_predictions`, `gold_scores`); and a Bi-Encoder scoring pairs by cosine (`BiEncoderScorer`,
a Trans-Encoder scorer)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.prompts import prompt_pairs, topic_map, with_topics
from ..data.tables import pairs_of, read_rows
from ..stages.teacher import TeacherParams
from ..stages.teacher_ensemble import MEMBER_INPUT
from ..store.artifacts import read_json
from .architectures import ARCHITECTURES, load_bi_encoder
from .ensemble import combine

log = logging.getLogger(__name__)


class TrainedPairModel:
    """A teacher artifact's model (CE / CBE) with the parameters it was trained with (its spec.json)."""

    def __init__(self, directory: str | Path, device: str):
        self.dir = Path(directory)
        self.params = TeacherParams.from_json(read_json(self.dir / "spec.json")["params"], f"{self.dir}/spec.json params")
        self.arch_name = self.params.arch
        self.arch = ARCHITECTURES[self.arch_name]
        self.model = self.arch.load(self.dir / "model", device)

    def score(self, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
        return np.asarray(self.arch.predict(self.model, pairs, batch_size, self.params), dtype=np.float64)


class Teacher:
    """The teacher model and how it is shown a pair (topic prompts, thesis 5.6.1).

    An ensemble teacher (`teacher.ensemble`: the `teacher` input is a `teacher_ensemble` artifact) scores a
    pair with each member (inputs `member_<k>`) and combines the scores as its ensemble.json says.
    """

    def __init__(self, spec: dict, params, device: str):
        self.dir = Path(spec["inputs"]["teacher"])
        self.ensemble = read_json(self.dir / "ensemble.json") if (self.dir / "ensemble.json").is_file() else None
        if self.ensemble:
            members = [Path(spec["inputs"][MEMBER_INPUT.format(k)]) for k in range(len(self.ensemble["members"]))]
            for directory, recorded in zip(members, self.ensemble["members"]):
                if directory.name != recorded["key"]:
                    raise DataError(f"{self.dir}/ensemble.json: member {recorded['key']}, but the labelling spec "
                                    f"gives {directory}")
            self.members = [TrainedPairModel(directory, device) for directory in members]
            self.arch_name = "+".join(m.arch_name for m in self.members)
            log.info("ensemble teacher: %d members (%s), combined by %s", len(self.members), self.arch_name,
                     self.ensemble["combine"])
        else:
            self.members = [TrainedPairModel(self.dir, device)]
            self.arch_name = self.members[0].arch_name
        self.batch = params.batch_size
        self.delimiter = params.topic_prompt
        self.topics = {}
        if self.delimiter:  # the teacher scores ((t1, a), (t2, b)); pairs keep plain text + topics
            self.topics = topic_map(spec["inputs"]["topics"])
            log.info("topic prompts on (delimiter %r): %d topic-labelled sentences", self.delimiter, len(self.topics))

    # the (first) member's model, architecture and training parameters
    arch = property(lambda self: self.members[0].arch)
    model = property(lambda self: self.members[0].model)
    params = property(lambda self: self.members[0].params)

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        shown = pairs_of(prompt_pairs(frame, self.delimiter) if self.delimiter else frame)
        if not self.ensemble:
            return self.members[0].score(shown, self.batch)
        scores = np.stack([m.score(shown, self.batch) for m in self.members])
        return combine(scores, self.ensemble["combine"], self.ensemble.get("statistics"))

    def score_rows(self, path: str | Path, start: int, stop: int, out: np.ndarray) -> None:
        """Scores of candidate rows `[start, stop)` into `out[0 : stop - start]`, one chunk in memory at a time."""
        for first, table in read_rows(path, start, stop, columns=["sentence1", "sentence2"]):
            frame = table.to_pandas()
            if self.delimiter:
                frame = with_topics(frame, self.topics)
            out[first - start:first - start + len(frame)] = self.score(frame)
            log.info("scored %d / %d candidate pairs", first - start + len(frame), stop - start)


class BiEncoderScorer:
    """A Bi-Encoder scoring pairs by the cosine of its embeddings (a model directory or a reference)."""

    arch_name = "be"

    def __init__(self, path: str, device: str, max_length: int):
        self.model = load_bi_encoder(path, device, max_length)

    def score(self, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
        return np.asarray(ARCHITECTURES["be"].predict(self.model, pairs, batch_size, None), dtype=np.float64)


def test_predictions(members: list[Path]) -> tuple[pd.DataFrame, np.ndarray]:
    """The test pairs with gold, and the members' saved test scores (members x pairs), checked to be of the same
    pairs in the same order."""
    frames = [pd.read_parquet(d / "predictions.parquet") for d in members]
    first = frames[0]
    for directory, frame in zip(members[1:], frames[1:]):
        if len(frame) != len(first) or not (frame["sentence1"].equals(first["sentence1"])
                                            and frame["sentence2"].equals(first["sentence2"])):
            raise DataError(f"{directory}/predictions.parquet: not the test pairs of {members[0]} (members of one "
                            "ensemble are tested on one split)")
    return first[["sentence1", "sentence2", "gold"]], np.stack([f["predicted"].to_numpy(np.float64) for f in frames])


def gold_scores(model: TrainedPairModel, gold: pd.DataFrame, batch_size: int) -> np.ndarray:
    """A member's scores of the gold train pairs, shown as in its training (topic prompts where it had them)."""
    if model.params.topic_prompt:
        gold = prompt_pairs(gold, model.params.topic_prompt)
    return model.score(pairs_of(gold), batch_size)
