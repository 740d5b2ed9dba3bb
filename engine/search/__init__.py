"""Finding text: the one search layer that knowledge and memory share.

The lexical path (`lexical`: terms, stop words, stemming, FTS5), the vector
paths (`vectors`, the second stage and its stored vectors), absolute
admission (`admission`), candidate fusion (`fusion`), floors read from the
calibration registry (`calibration`), the result type (`results`) and one
tuning value (`Tuning`) that every number above is read from.

Knowledge (library passages) and memory (memories, summaries) are clients:
they own their rows and what they do with a result, never each other's
modules. Research code tunes a search by passing a changed copy:

    from dataclasses import replace
    from engine.search import DEFAULT, find
    found = find(db, campaign_id, "I draw the silver key", embedder=embedder,
                 tuning=replace(DEFAULT, relative_cut=0.8))
"""
from .admission import Weights, idf, lexical_admits, lexical_evidence, semantic_admits, weigh
from .calibration import (
    CALIBRATION_FILE,
    Calibration,
    PairSet,
    Population,
    calibrate,
    calibrated_models,
    calibration_key,
    centre_for,
    centred,
    floor_for,
    load_pairs,
    register,
)
from .fusion import cut, normalise, normalise_second, rank, suppress
from .lexical import index_line, stems, terms
from .passages import Found, Semantic, facts, find, first_cosines, load_passages, scored
from .query import query_parts, scene_query
from .recall import Ranked, choose, rank_units, rarity_share
from .results import EmbeddingPass, Retrieved
from .second_stage import FUSIONS, Fusion, RerankStage, Rescored, VectorStage, fusion_for, relevance, rescore, stage_for
from .stage_vectors import StagePass, library_matrix, store_vectors
from .stopwords import STOP_WORDS
from .tuning import DEFAULT, Tuning

__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT",
    "FUSIONS",
    "STOP_WORDS",
    "Calibration",
    "EmbeddingPass",
    "Found",
    "Fusion",
    "PairSet",
    "Population",
    "Ranked",
    "RerankStage",
    "Rescored",
    "Retrieved",
    "Semantic",
    "StagePass",
    "Tuning",
    "VectorStage",
    "Weights",
    "calibrate",
    "calibrated_models",
    "calibration_key",
    "centre_for",
    "centred",
    "choose",
    "cut",
    "facts",
    "find",
    "first_cosines",
    "floor_for",
    "fusion_for",
    "idf",
    "index_line",
    "lexical_admits",
    "lexical_evidence",
    "library_matrix",
    "load_pairs",
    "load_passages",
    "normalise",
    "normalise_second",
    "query_parts",
    "rank",
    "rank_units",
    "rarity_share",
    "register",
    "relevance",
    "rescore",
    "scene_query",
    "scored",
    "semantic_admits",
    "stage_for",
    "stems",
    "suppress",
    "store_vectors",
    "terms",
    "weigh",
]
