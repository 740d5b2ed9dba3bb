"""The imported knowledge library: Canon, Reference and Inspiration.

A campaign imports local .txt/.md files; each is chunked into passages,
indexed (FTS5) and embedded. Every turn, passages with real evidence of being
about the scene are retrieved, ranked, budgeted and framed as untrusted data
with their class and provenance.

    lib = Library(db, campaign_id, lambda: embedder)
    lib.add("bible.md", classification="canon")
    sel = retrieve(db, campaign_id, scene_query(story, state), embedder=embedder, budget_tokens=6000)
    system_text, story_text = render(sel)
"""
from .calibration import Calibration, PairSet, Population, calibrate, calibration_key, floor_for, load_pairs
from .chunking import CHUNKING_VERSION, PARSER_VERSION, Chunk, chunk, digest, index_line, normalize
from .classes import CANON, CLASS_WEIGHTS, CLASSES, HIDDEN, INSPIRATION, NORMAL, REFERENCE
from .embedding import EmbeddingPass, catch_up
from .framing import render
from .library import Library, Status
from .prepare import prepare_query, start_prepare, wait_prepared
from .query import QUERY_STORY_TEXTS, scene_query
from .reads import has_sources
from .records import Retrieved
from .refusals import KnowledgeRefused
from .retrieval import Selection, retrieve
from .second_stage import relevance, stage_for, start_background
from .stage_vectors import StagePass

__all__ = [
    "CANON",
    "CHUNKING_VERSION",
    "CLASSES",
    "CLASS_WEIGHTS",
    "HIDDEN",
    "INSPIRATION",
    "NORMAL",
    "PARSER_VERSION",
    "QUERY_STORY_TEXTS",
    "REFERENCE",
    "Calibration",
    "Chunk",
    "EmbeddingPass",
    "KnowledgeRefused",
    "Library",
    "PairSet",
    "Population",
    "Retrieved",
    "Selection",
    "StagePass",
    "Status",
    "calibrate",
    "calibration_key",
    "catch_up",
    "chunk",
    "digest",
    "floor_for",
    "has_sources",
    "index_line",
    "load_pairs",
    "normalize",
    "prepare_query",
    "relevance",
    "render",
    "retrieve",
    "scene_query",
    "stage_for",
    "start_background",
    "start_prepare",
    "wait_prepared",
]
