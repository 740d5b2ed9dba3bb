"""The imported knowledge library: Canon, Reference and Inspiration.

A campaign imports local .txt/.md files; each is chunked into passages,
indexed (FTS5) and embedded. Every turn, the search layer (`engine.search`)
finds the passages with real evidence of being about the scene; here they are
budgeted and framed as untrusted data with their class and provenance.

    lib = Library(db, campaign_id, lambda: embedder)
    lib.add("bible.md", classification="canon")
    sel = retrieve(db, campaign_id, scene_query(story, state), embedder=embedder, budget_tokens=6000)
    system_text, story_text = render(sel)
"""
from ..search.classes import CANON, CLASS_WEIGHTS, CLASSES, HIDDEN, INSPIRATION, NORMAL, REFERENCE
from ..search.query import QUERY_STORY_TEXTS, scene_query
from ..search.reads import has_sources
from ..search.results import EmbeddingPass, Retrieved
from ..search.second_stage import stage_for, start_background
from ..search.stage_vectors import StagePass
from .chunking import CHUNKING_VERSION, PARSER_VERSION, Chunk, chunk, digest, normalize
from .embedding import catch_up
from .framing import render
from .library import Library, Status
from .prepare import prepare_query, start_prepare, wait_prepared
from .refusals import KnowledgeRefused
from .retrieval import Selection, retrieve

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
    "Chunk",
    "EmbeddingPass",
    "KnowledgeRefused",
    "Library",
    "Retrieved",
    "Selection",
    "StagePass",
    "Status",
    "catch_up",
    "chunk",
    "digest",
    "has_sources",
    "normalize",
    "prepare_query",
    "render",
    "retrieve",
    "scene_query",
    "stage_for",
    "start_background",
    "start_prepare",
    "wait_prepared",
]
