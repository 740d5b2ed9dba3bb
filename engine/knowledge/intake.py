"""Checks an imported file must pass before a single row is written.

Each refusal names the file, says what is wrong and what to do, and leaves the
database untouched. Nothing is truncated, guessed or repaired silently: a
reader who imports a setting bible must be able to trust that all of it, and
only it, is in the library.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .classes import CLASS_LABELS, CLASSES, VISIBILITIES
from .refusals import KnowledgeRefused

__all__ = [
    "ALLOWED_EXTENSIONS",
    "DEFAULT_FILENAME",
    "MAX_PASSAGES_PER_SOURCE",
    "MAX_SOURCE_BYTES",
    "MAX_SOURCES_PER_CAMPAIGN",
    "MEDIA_TYPES",
    "Accepted",
    "accept",
    "decode",
    "extension_of",
    "safe_filename",
    "size_label",
]

# About a 150,000-word book: far past any setting bible, small enough that
# chunking and indexing one stays well under a second.
MAX_SOURCE_BYTES = 1024 * 1024
# The chunker's 60-token floor cannot reach this from 1 MiB; it is a loud
# guard against a future chunker that fragments.
MAX_PASSAGES_PER_SOURCE = 4000
# Bounds the per-turn lexical scan and the catalogue read.
MAX_SOURCES_PER_CAMPAIGN = 200
ALLOWED_EXTENSIONS = (".txt", ".md")
MEDIA_TYPES = {".txt": "text/plain", ".md": "text/markdown"}
DEFAULT_FILENAME = "imported.txt"
MAX_FILENAME = 255

# C0 controls other than tab, line feed and carriage return, plus DEL. Vertical
# tab and form feed are refused too: they turn up in binary files, not prose.
_BINARY_CONTROLS = frozenset([*range(0, 9), 11, 12, *range(14, 32), 127])
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Accepted:
    """A file that passed every check, ready to be stored."""

    text: str  # as decoded (BOM removed), not normalised: what the reader sees
    filename: str
    extension: str
    title: str
    byte_size: int

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.extension]

    @property
    def markdown(self) -> bool:
        return self.extension == ".md"


def safe_filename(name: str) -> str:
    """A display name from whatever the caller passed: never a path.

    Only the last path component survives; format characters (bidi overrides
    that make 'x\u202edm.exe' read as something else) are dropped; whitespace
    collapses; leading dots go so the name is never hidden, '.' or '..'.
    """
    name = unicodedata.normalize("NFC", str(name or "")).replace("\x00", "")
    name = name.rsplit("\\", 1)[-1].rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) != "Cf")
    name = _WHITESPACE.sub(" ", name).strip().lstrip(". ")
    return (name or DEFAULT_FILENAME)[:MAX_FILENAME]


def extension_of(filename: str) -> str:
    lowered = filename.lower()
    return next((ext for ext in ALLOWED_EXTENSIONS if lowered.endswith(ext)), "")


def size_label(n_bytes: int) -> str:
    """'1 MB' for whole megabytes, '1.4 MB' otherwise (1 MB = 2**20 bytes here)."""
    mb = n_bytes / (1024 * 1024)
    return f"{mb:.0f} MB" if abs(mb - round(mb)) < 0.05 else f"{mb:.1f} MB"


def refuse_size(filename: str, n_bytes: int) -> KnowledgeRefused:
    return KnowledgeRefused(
        f"“{filename}” is {size_label(n_bytes)}; one knowledge source may be at most "
        f"{size_label(MAX_SOURCE_BYTES)}. Break it into smaller files and import each one: the library never "
        "keeps just the part of a file that fits."
    )


def decode(raw: bytes, filename: str) -> str:
    """Strict UTF-8 text from `raw`, or a refusal that says which byte is wrong."""
    if len(raw) > MAX_SOURCE_BYTES:
        raise refuse_size(filename, len(raw))
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark is a marker, not content
        raw = raw[3:]
    if not raw.strip():
        raise KnowledgeRefused(f"“{filename}” is empty: there is nothing in it to import.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KnowledgeRefused(
            f"“{filename}” is not UTF-8 text: byte {exc.start} does not begin a valid character. "
            "Re-save it with UTF-8 encoding and try again (nothing was imported and the file is untouched)."
        ) from None
    controls = sum(1 for ch in text if ord(ch) in _BINARY_CONTROLS)
    if controls:
        raise KnowledgeRefused(
            f"“{filename}” contains {controls} control character(s) that plain text does not have. "
            "It looks like binary data renamed as text; only .txt and .md text files can be imported."
        )
    return text


def _check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        options = ", ".join(CLASS_LABELS.get(a, a) for a in allowed)
        raise KnowledgeRefused(f"“{value}” is not a {what}. Choose one of: {options}.")
    return value.strip().lower()


def check_class(value: str) -> str:
    return _check_choice(value, CLASSES, "knowledge class")


def check_visibility(value: str) -> str:
    return _check_choice(value, VISIBILITIES, "visibility")


def accept(name: str, raw: bytes) -> Accepted:
    """Every content check, in the order a reader would want to hear them."""
    filename = safe_filename(name)
    ext = extension_of(filename)
    if not ext:
        raise KnowledgeRefused(
            f"“{filename}” is not a file type the library imports. Only .txt and .md files are supported."
        )
    text = decode(raw, filename)
    title = filename[: -len(ext)].strip() or filename
    return Accepted(text=text, filename=filename, extension=ext, title=title, byte_size=len(raw))
