"""AI Dungeon's memory system: memories of settled blocks, recall by
similarity, LRU eviction, and a lineage-true running summary."""
from .authority import ACCEPTED, HEURISTIC, classify_authority
from .bank import MEMORY_INTERVAL, MEMORY_START, SETTLE_SLACK, embed_pending, evict, record_use, write_due_memories
from .derived import KINDS, run_derived
from .recall import Recall, recall
from .summary import SUMMARY_INTERVAL, current, provenance, summarise_if_due

__all__ = [
    "ACCEPTED", "HEURISTIC", "classify_authority", "MEMORY_INTERVAL", "MEMORY_START", "SETTLE_SLACK",
    "embed_pending", "evict", "record_use", "write_due_memories", "KINDS", "run_derived",
    "Recall", "recall", "SUMMARY_INTERVAL", "current", "provenance", "summarise_if_due",
]
