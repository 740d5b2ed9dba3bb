"""What one bundle may hold. Module constants so a test can lower them.

The caps bound what a single import can make the database and the process
do; they are far above any played campaign (a 1,000-turn story is ~2,000
nodes and ~60 MB).
"""
from __future__ import annotations

__all__ = ["MAX_BRANCHES", "MAX_BUNDLE_BYTES", "MAX_DEPTH", "MAX_INFLATED_BYTES", "MAX_NODES", "MAX_PARSE_BYTES",
           "MAX_SNAPSHOT_BYTES", "MAX_WHOLE", "parse_cost", "size_label"]

# A bundle is read whole into memory before it is checked, so it is capped.
# Not at the reference's 20 MB (an HTTP body limit): every narration carries
# its exact prompt verbatim, so a 300-turn campaign is ~15 MB and a
# 1,000-turn one ~60 MB. 128 MB leaves twice that room.
MAX_BUNDLE_BYTES = 128 * 1024 * 1024
# What parsing may cost, estimated from the bytes before parsing. Parsing a
# file of empty objects took ~24x its size (a 256 MB file meant ~6 GB); prose,
# which real bundles are made of, costs ~3x. 1 GiB admits any text-heavy file
# under MAX_BUNDLE_BYTES and refuses a small file of millions of tiny objects.
MAX_PARSE_BYTES = 1024 * 1024 * 1024
MAX_NODES = 200_000
MAX_BRANCHES = 100_000
# Nesting: a report or a state document is under 10 levels deep; 64 leaves
# room and keeps every recursive reader, copier and writer far from Python's
# recursion limit (a 100,000-deep file raised RecursionError in json itself).
MAX_DEPTH = 64
# SQLite keeps whole numbers in 64 bits; a bigger one fails only when written.
MAX_WHOLE = 2**63 - 1
# A compressed prompt snapshot (the reference's contextSnapshotZ) is inflated
# only this far: a prompt for a 128k-token window is ~0.5 MB of text, and a
# 3.4 MB file of zlib bombs once took +1.5 GB. The file-wide total bounds the
# sum of every snapshot in it.
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
MAX_INFLATED_BYTES = 64 * 1024 * 1024


def parse_cost(raw: bytes) -> int:
    """Bytes Python would need to hold `raw` parsed, estimated from counts.

    Measured per item on CPython 3.11: an object ~200 bytes with its slots, a
    list ~64, a string ~50 plus its text, a slot in a container 8; the text
    itself is held about three times (the bytes, the decoded str, the values).
    """
    objects, lists = raw.count(b"{"), raw.count(b"[")
    strings, slots = raw.count(b'"') // 2, raw.count(b",")
    return 3 * len(raw) + 200 * objects + 64 * lists + 50 * strings + 8 * slots


def size_label(n_bytes: int) -> str:
    """'38 KB' below a megabyte; '20 MB' for a whole number of megabytes, else one decimal."""
    if n_bytes < 1024 * 1024:
        return f"{n_bytes:,} bytes" if n_bytes < 1024 else f"{n_bytes / 1024:.0f} KB"
    mb = n_bytes / (1024 * 1024)
    return f"{mb:.0f} MB" if abs(mb - round(mb)) < 0.05 else f"{mb:.1f} MB"
