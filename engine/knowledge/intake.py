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

from ..search.classes import CLASS_LABELS, CLASSES, VISIBILITIES
from .refusals import KnowledgeRefused

__all__ = [
    "ALLOWED_EXTENSIONS",
    "DEFAULT_FILENAME",
    "MAX_DECODING_CHAOS",
    "MAX_PASSAGES_PER_SOURCE",
    "MAX_SOURCE_BYTES",
    "MAX_SOURCES_PER_CAMPAIGN",
    "MEDIA_TYPES",
    "MIN_DECODING_COHERENCE",
    "WESTERN_CHAOS_SLACK",
    "Accepted",
    "accept",
    "decode",
    "decode_with_encoding",
    "detect",
    "extension_of",
    "safe_filename",
    "size_label",
]

# A rules reference is 1.5 MB and a long novel 2-3 MB; 16 MiB holds a whole
# multi-volume setting in one file. The chunker reads ~1 MB/s on this 2-core
# machine, so the largest file is indexed in well under a minute, with a
# progress bar; its embedding is derived work that follows in batches.
MAX_SOURCE_BYTES = 16 * 1024 * 1024
# 16 MiB of English at ~4.2 bytes per token in 256-token passages is ~16,000
# passages; this guard is loud for a chunker that would fragment past that.
MAX_PASSAGES_PER_SOURCE = 40000
# When charset-normalizer's best guess is trusted: its "chaos" (mess ratio)
# below 0.2 and its "coherence" (how much the text reads as a language) at
# least 0.2. Measured: cp1252 / Latin-1 English and French prose scored chaos
# 0.0 and coherence 0.52-0.85; "good start \xff\xfe bad" came back as Urdu
# cp1006 with coherence 0.0, and random high bytes as no guess at all.
MAX_DECODING_CHAOS = 0.2
MIN_DECODING_COHERENCE = 0.2
# How much messier than the detector's pick Windows-1252 may read and still be
# preferred (see `_western`): the picks it displaced measured 0.001-0.002.
WESTERN_CHAOS_SLACK = 0.01
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
    encoding: str = "utf-8"  # as found: "utf-8", or what detection settled on

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
        f"“{filename}” is {size_label(n_bytes)} ({n_bytes:,} bytes); one knowledge source may be at most "
        f"{size_label(MAX_SOURCE_BYTES)} ({MAX_SOURCE_BYTES:,} bytes). Break it into smaller files and import each one: the library never "
        "keeps just the part of a file that fits."
    )


def detect(raw: bytes, filename: str, first_bad: int = 0) -> tuple[str, str]:
    """(text, encoding) of bytes that are not UTF-8, found by charset-normalizer.

    A well-kept detector rather than a guess list: Windows-1252, Latin-1 and
    the other single-byte code pages differ in which bytes are letters, and
    only a statistical look at the whole text tells them apart. A guess whose
    decoded text reads as a mess is refused, never imported as mojibake.
    """
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    if best is None or best.chaos >= MAX_DECODING_CHAOS or best.coherence < MIN_DECODING_COHERENCE:
        raise KnowledgeRefused(
            f"“{filename}” is not UTF-8 text (byte {first_bad} does not begin a valid character), and its "
            "encoding could not be recognised with confidence. Re-save it with UTF-8 encoding and try again "
            "(nothing was imported and the file is untouched)."
        )
    western = _western(raw, best.chaos)
    return (western, "cp1252") if western is not None else (str(best), best.encoding)


def _western(raw: bytes, best_chaos: float) -> str | None:
    """The text as Windows-1252, when that reads at least as cleanly as the
    detector's own pick. On mostly-ASCII English every Western code page is
    nearly equally clean, and the detector then ranks by language: on a
    Treasure Island excerpt saved as cp1252 it picked cp775 (Baltic), which
    turns curly quotes into 'ō' and 'Æ'. cp1252 is what Windows editors save
    Western text in, so it is the prior whenever it is as clean; Polish saved
    as cp1250 read as cp1252 measured a mess ratio of 1.06 and is not taken."""
    from charset_normalizer.md import mess_ratio

    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:
        return None
    return text if mess_ratio(text) <= min(best_chaos + WESTERN_CHAOS_SLACK, MAX_DECODING_CHAOS) else None


def decode_with_encoding(raw: bytes, filename: str) -> tuple[str, str]:
    """UTF-8 text from `raw` (BOM removed), or text in another common encoding
    found by `detect`; the encoding it was read in comes back beside it."""
    if len(raw) > MAX_SOURCE_BYTES:
        raise refuse_size(filename, len(raw))
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark is a marker, not content
        raw = raw[3:]
    if not raw.strip():
        raise KnowledgeRefused(f"“{filename}” is empty: there is nothing in it to import.")
    try:
        text, encoding = raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        text, encoding = detect(raw, filename, exc.start)
    _check_controls(text, filename)
    return text, encoding


def decode(raw: bytes, filename: str) -> str:
    """The text of `raw` (see `decode_with_encoding`)."""
    return decode_with_encoding(raw, filename)[0]


def _check_controls(text: str, filename: str) -> None:
    controls = sum(1 for ch in text if ord(ch) in _BINARY_CONTROLS)
    if controls:
        raise KnowledgeRefused(
            f"“{filename}” contains {controls} control character(s) that plain text does not have. "
            "It looks like binary data renamed as text; only .txt and .md text files can be imported."
        )


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
    text, encoding = decode_with_encoding(raw, filename)
    title = filename[: -len(ext)].strip() or filename
    return Accepted(text=text, filename=filename, extension=ext, title=title, byte_size=len(raw), encoding=encoding)
