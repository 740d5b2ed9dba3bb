"""What one bundle may hold. Module constants so a test can lower them.

The caps bound what a single import can make the database do; they are far
above any played campaign (a 1,000-turn story is ~2,000 nodes).
"""
from __future__ import annotations

__all__ = ["MAX_BRANCHES", "MAX_BUNDLE_BYTES", "MAX_NODES", "size_label"]

# A bundle is read whole into memory before it is checked, so it is capped.
# Not at the reference's 20 MB (an HTTP body limit): every narration carries
# its exact prompt verbatim, so a 300-turn campaign is ~15 MB and a
# 1,000-turn one ~60 MB. 256 MB leaves room and still bounds memory.
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
MAX_NODES = 200_000
MAX_BRANCHES = 100_000


def size_label(n_bytes: int) -> str:
    """'38 KB' below a megabyte; '20 MB' for a whole number of megabytes, else one decimal."""
    if n_bytes < 1024 * 1024:
        return f"{n_bytes:,} bytes" if n_bytes < 1024 else f"{n_bytes / 1024:.0f} KB"
    mb = n_bytes / (1024 * 1024)
    return f"{mb:.0f} MB" if abs(mb - round(mb)) < 0.05 else f"{mb:.1f} MB"
