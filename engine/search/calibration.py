"""Semantic floors, measured per embedding model, and how to measure one.

A floor is an absolute threshold on the raw cosine between the scene and a
passage: at or above it, the semantic path has evidence; below it, none. It is
a property of the model, not of the library: nomic-embed-text scores unrelated
text around 0.36-0.56, MiniLM far lower, so one model's number applied to
another is either blind (too high) or admits everything (too low). The second
failure is the dangerous one: it would pass every test and put irrelevant text
in every prompt. So a model with no measured entry gets no semantic admission
at all, and the status says so.

The registry is data (`calibration.json`), each entry carrying the measurement
it came from. `calibrate` produces such a measurement: the targeted and
off-topic populations of a pair set, scored through the production forms (the
passage as its indexed line, the query as scene text), and a floor only when
the two populations do not overlap (rule "separate"), or, for a pair set of
real scenes whose populations always overlap, just above every off-topic pair
(rule "above_off_topic"), when enough targeted pairs stay above it.

A measurement may also carry the model's query centre: the mean of its
query vectors over the pair set's scenes, taken off every query vector of
that model before it is compared (`centred`). EmbeddingGemma's prompted
queries share one large direction (the mean of the tuning scenes' unit
vectors has norm 0.44), and that direction is what makes a first-person
scene look like any passage of a novel: with it on, 10 of the retrieval
evaluation's 39 held-out rules scenes found their best passage of the
whole library in another document, with it off none
(`evidence/retrieval_eval.json`, `reachable.elsewhere_first`). In a probe
MiniLM's queries gained nothing from it (29 → 32 held-out scenes with a
relevant passage first, and 5 of 41 everyday scenes admitting where 2
did), so it is measured per model, never assumed.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..vectors import as_query
from .lexical import index_line
from .tuning import Tuning
from .vectors import unit

__all__ = [
    "CALIBRATION_FILE",
    "PAIRS_FILE",
    "Calibration",
    "PairSet",
    "Population",
    "ABOVE_OFF_TOPIC",
    "MIN_TARGETED_ABOVE",
    "OFF_TOPIC_MARGIN",
    "RULES",
    "SEPARATE",
    "calibrate",
    "propose_floor",
    "register",
    "calibrated_models",
    "calibration_key",
    "centre_for",
    "centred",
    "entry_for",
    "floor_above",
    "floor_for",
    "load_pairs",
    "registry",
    "uncalibrated_note",
]

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
SEPARATE = "separate"
ABOVE_OFF_TOPIC = "above_off_topic"
RULES = (SEPARATE, ABOVE_OFF_TOPIC)
# "above_off_topic" proposes a floor only if at least this share of targeted
# pairs reaches it: below that, the semantic path would carry too little to be
# worth a number (the embedded SmolLM2's off-topic maximum, 0.858, was above
# all but a few of its targeted pairs).
MIN_TARGETED_ABOVE = 0.25
# How far above the highest off-topic pair the floor sits, before rounding up
# to two decimals.
OFF_TOPIC_MARGIN = 0.005
PAIRS_FILE = Path(__file__).with_name("pairs.json")


def calibration_key(model_id: str | None) -> str:
    """Registry key of a model id: lower-cased, trimmed, without an Ollama tag.

    "nomic-embed-text:latest" and "NOMIC-EMBED-TEXT:v1.5" are builds of one
    model with one scale. Only a single trailing ":tag" is dropped: an id with
    more colons ("gguf:file.gguf:mean") names a configuration and is kept
    whole, so two GGUF models can never share an entry.
    """
    key = (model_id or "").strip().lower()
    if key.count(":") == 1:
        key = key.split(":", 1)[0]
    return key


@lru_cache(maxsize=1)
def registry() -> dict[str, dict]:
    """{key: entry} from calibration.json (read once; tests may patch the dict)."""
    data = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    return {calibration_key(k): v for k, v in data["models"].items()}


def entry_for(model_id: str | None) -> dict | None:
    key = calibration_key(model_id)
    return registry().get(key) if key else None


def floor_for(model_id: str | None, tuning: Tuning | None = None) -> float | None:
    """The measured floor, or None: None means no semantic admission, never
    "borrow another model's number". A `tuning` that names a floor for the
    model (an experiment sweeping it) is used instead of the registry's."""
    override = tuning.floor_override(model_id or "") if tuning is not None else None
    if override is not None:
        return override
    entry = entry_for(model_id)
    return float(entry["floor"]) if entry else None


def centre_for(model_id: str | None) -> np.ndarray | None:
    """The model's measured query centre (a unit-free mean vector), or None."""
    entry = entry_for(model_id)
    centre = entry.get("query_centre") if entry else None
    if not centre:
        return None
    return _decoded(centre["float32_base64"])


@lru_cache(maxsize=8)
def _decoded(text: str) -> np.ndarray:
    vector = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    vector.setflags(write=False)
    return vector


def centred(model_id: str | None, vectors) -> np.ndarray:
    """Query vectors of `model_id` as its floor was measured on them: unit
    length, with the model's query centre taken off first where it has one.
    Every search that compares a query with a registry floor goes through here."""
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    centre = centre_for(model_id)
    if centre is not None and rows.shape[1] == centre.shape[0]:
        rows = rows - centre
    return unit(rows)


def register(calibration: Calibration, path: str | Path | None = None) -> dict:
    """Write a measured floor into the registry the engine reads (refused when
    the populations overlap: an unmeasurable model must stay uncalibrated)."""
    if calibration.floor is None:
        raise ValueError(f"No floor to register for {calibration.model_id}: the populations overlap.")
    target = Path(path) if path else CALIBRATION_FILE
    data = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {"models": {}}
    data["models"][calibration_key(calibration.model_id)] = calibration.entry()
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    registry.cache_clear()
    return data["models"][calibration_key(calibration.model_id)]


def calibrated_models() -> list[str]:
    return sorted(registry())


def uncalibrated_note(model_id: str) -> str:
    """Why a configured model does no semantic retrieval, in words."""
    return (f"“{model_id}” has no measured relevance calibration here, so its similarity scores cannot be "
            "trusted and semantic search stays off: retrieval is lexical only. Play and keyword search work as "
            f"usual. Models with a measured floor: {', '.join(calibrated_models())}.")


# ---------------------------------------------------------------- measuring
@dataclass(frozen=True)
class PairSet:
    """Passages, scenes that target one of them, and scenes about none of them.

    Every off-topic scene is scored against every passage.
    """

    passages: dict[str, dict]  # id -> {"heading", "text"}
    targeted: list[dict]  # {"query", "passage"}
    off_topic: list[str]
    name: str = ""
    sha256: str = ""

    @property
    def size(self) -> int:
        return len(self.targeted) + len(self.off_topic) * len(self.passages)


def load_pairs(path: str | Path | None = None) -> PairSet:
    raw = Path(path or PAIRS_FILE).read_bytes()
    data = json.loads(raw)
    return PairSet(data["passages"], data["targeted"], data["off_topic"], data.get("name", ""),
                   hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class Population:
    n: int
    min: float
    p10: float
    median: float
    p95: float
    max: float

    @classmethod
    def of(cls, scores: list[float]) -> Population:
        a = np.asarray(scores, dtype=np.float64)
        q = lambda p: round(float(np.percentile(a, p)), 4)  # noqa: E731
        return cls(len(a), round(float(a.min()), 4), q(10), q(50), q(95), round(float(a.max()), 4))


@dataclass(frozen=True)
class Calibration:
    """One measurement: both populations, every score, and the floor if any."""

    model_id: str
    targeted: Population
    off_topic: Population
    floor: float | None
    pairs: str
    pairs_sha256: str
    measured_on: str
    scores: list[dict] = field(default_factory=list, repr=False)
    rule: str = SEPARATE
    centre: tuple[float, ...] | None = field(default=None, repr=False)  # the query centre taken off, if any

    @property
    def targeted_above(self) -> float:
        """The share of targeted pairs at or above the floor (0 without one)."""
        mine = [x["cosine"] for x in self.scores if x["kind"] == "targeted"]
        return sum(c >= self.floor for c in mine) / len(mine) if self.floor is not None and mine else 0.0

    @property
    def off_topic_scenes(self) -> int:
        return len({x["query"] for x in self.scores if x["kind"] == "off_topic"})

    @property
    def separated(self) -> bool:
        return self.targeted.min > self.off_topic.max

    @property
    def words(self) -> str:
        t, o = self.targeted, self.off_topic
        head = (f"{self.model_id}: targeted n={t.n} min {t.min:.4f} median {t.median:.4f} max {t.max:.4f}; "
                f"off-topic n={o.n} min {o.min:.4f} median {o.median:.4f} max {o.max:.4f}. ")
        if self.floor is None:
            return head + ("The populations overlap, so no floor can be proposed: this model gets no "
                           "semantic admission until a pair set separates them." if self.rule == SEPARATE else
                           f"Fewer than {MIN_TARGETED_ABOVE:.0%} of targeted pairs are above every off-topic "
                           "pair, so no floor is proposed: this model gets no semantic admission.")
        if self.rule == ABOVE_OFF_TOPIC:
            return head + (f"Proposed floor {self.floor} (margin {self.floor - o.max:.4f} above the off-topic "
                           f"maximum); {self.targeted_above:.0%} of targeted pairs reach it, the rest must be "
                           "found lexically.")
        return head + (f"Proposed floor {self.floor} (margin {self.floor - o.max:.4f} above the off-topic "
                       f"maximum, {t.min - self.floor:.4f} below the weakest targeted pair).")

    def entry(self) -> dict:
        """The registry entry this measurement justifies (no scores)."""
        entry = {"floor": self.floor, "model_id": self.model_id, "measured_on": self.measured_on,
                 "pairs": self.pairs, "pairs_sha256": self.pairs_sha256, "rule": self.rule,
                 "targeted_above_floor": round(self.targeted_above, 4),
                 "targeted": asdict(self.targeted), "off_topic": asdict(self.off_topic)}
        if self.centre is not None:
            raw = np.asarray(self.centre, dtype="<f4").tobytes()
            entry["query_centre"] = {"dims": len(self.centre), "scenes": self.targeted.n + self.off_topic_scenes,
                                     "float32_base64": base64.b64encode(raw).decode("ascii")}
        return entry


def propose_floor(targeted_min: float, off_topic_max: float) -> float | None:
    """The middle of the gap, as round a number as stays strictly inside it;
    None when there is no gap."""
    if targeted_min <= off_topic_max:
        return None
    middle = (targeted_min + off_topic_max) / 2
    for digits in (2, 3, 4):
        floor = round(middle, digits)
        if off_topic_max < floor < targeted_min:
            return floor
    return middle


def floor_above(off_topic_max: float, targeted: list[float]) -> float | None:
    """Just above every off-topic pair (rounded up to two decimals), if at
    least MIN_TARGETED_ABOVE of the targeted pairs reach it."""
    floor = math.ceil((off_topic_max + OFF_TOPIC_MARGIN) * 100) / 100
    share = sum(c >= floor for c in targeted) / len(targeted) if targeted else 0.0
    return floor if share >= MIN_TARGETED_ABOVE else None


def calibrate(embedder, pairs: PairSet | None = None, rule: str = SEPARATE, *, centre: bool = False) -> Calibration:
    """Score `pairs` with `embedder` the way retrieval does and propose a
    floor by `rule` (see the module doc). `centre` measures the model's
    query centre on the pair set's scenes and scores with it taken off, as
    retrieval will once the measurement is registered."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, not {rule!r}")
    pairs = pairs or load_pairs()
    ids = list(pairs.passages)
    lines = [index_line(pairs.passages[i].get("heading", ""), pairs.passages[i]["text"]) for i in ids]
    queries = [t["query"] for t in pairs.targeted] + list(pairs.off_topic)
    # passages as documents, scenes as queries: a model with prompts (see
    # engine.vectors.as_query) is calibrated the way retrieval will use it
    passage_vec = dict(zip(ids, unit(np.asarray(embedder.embed(lines), dtype=np.float32)), strict=True))
    query_vec = unit(np.asarray(as_query(embedder)(queries), dtype=np.float32))
    mean = query_vec.mean(axis=0) if centre else None
    if mean is not None:
        query_vec = unit(query_vec - mean)
    scores = []
    for t, q in zip(pairs.targeted, query_vec, strict=False):
        scores.append({"kind": "targeted", "query": t["query"], "passage": t["passage"],
                       "cosine": round(float(q @ passage_vec[t["passage"]]), 4)})
    for scene, q in zip(pairs.off_topic, query_vec[len(pairs.targeted):], strict=True):
        for pid in ids:
            scores.append({"kind": "off_topic", "query": scene, "passage": pid,
                           "cosine": round(float(q @ passage_vec[pid]), 4)})
    targeted = Population.of([s["cosine"] for s in scores if s["kind"] == "targeted"])
    off_topic = Population.of([s["cosine"] for s in scores if s["kind"] == "off_topic"])
    floor = propose_floor(targeted.min, off_topic.max) if rule == SEPARATE else floor_above(
        off_topic.max, [s["cosine"] for s in scores if s["kind"] == "targeted"])
    return Calibration(embedder.model_id, targeted, off_topic, floor, pairs.name, pairs.sha256,
                       date.today().isoformat(), scores, rule,
                       tuple(float(x) for x in mean) if mean is not None else None)
