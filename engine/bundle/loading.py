"""Reading a file into JSON values, before any format is considered.

The size is checked from the file system before a byte is read, and the cost
of parsing is estimated from the bytes before they are parsed, so a huge file
or a small file of millions of tiny objects is refused without being loaded.
Every value is then checked once for what would pass the readers and fail
later, in the database or on the next export: lone surrogates (which UTF-8
cannot encode), numbers too large for SQLite or for a float, nesting past
`limits.MAX_DEPTH`. Nothing in the file is fetched, opened or run: URLs and
paths inside it are only text.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from . import limits
from .errors import BundleRefused

__all__ = ["check_values", "load", "parse_json", "read_path"]

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")
# 2**63 has 19 digits; a longer literal is refused before int() reads it
# (Python refuses past 4,300 digits with a bare ValueError, and reading a long
# one costs quadratic time below that).
_MAX_DIGITS = 20
_NOTHING = ". Nothing was imported."


def _no_constants(name: str) -> Any:
    raise BundleRefused(f"The file contains {name}, which is not a JSON number{_NOTHING}")


def _whole(literal: str) -> int:
    if len(literal.lstrip("-")) > _MAX_DIGITS:
        raise BundleRefused(f"The file contains a whole number {len(literal):,} digits long; numbers here must "
                            f"fit in 64 bits (at most {limits.MAX_WHOLE:,}){_NOTHING}")
    return int(literal)


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise BundleRefused(f"The file contains the number {literal[:40]}, too large to be stored as a number "
                            f"(it reads as infinity){_NOTHING}")
    return value


def _too_large(n_bytes: int) -> BundleRefused:
    return BundleRefused(f"The file is too large: {limits.size_label(n_bytes)} ({n_bytes:,} bytes), past the "
                         f"{limits.size_label(limits.MAX_BUNDLE_BYTES)} an import may read{_NOTHING}")


def load(source: Any) -> Any:
    """A dict or list as given (checked); bytes or a file path parsed as UTF-8 JSON."""
    if isinstance(source, (dict, list)):
        check_values(source, "The data")
        return source
    if isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
        if len(raw) > limits.MAX_BUNDLE_BYTES:
            raise _too_large(len(raw))
        return parse_json(raw, "The data")
    if not isinstance(source, (str, Path)):
        raise BundleRefused(f"This is not a campaign bundle or a file: a {type(source).__name__} was given. "
                            "Pass a path, the file's bytes, or its parsed JSON.")
    path, raw = read_path(source)
    return parse_json(raw, f"“{path.name}”")


def read_path(source: str | Path) -> tuple[Path, bytes]:
    """The bytes of the file at `source`, size-checked before reading, or a
    refusal in words: a path no file name can hold (a lone surrogate, a NUL),
    a missing file, a folder, a file the system will not let us read."""
    shown = ascii(str(source))[1:-1] if _SURROGATE_RE.search(str(source)) else str(source)
    try:
        os.fsencode(source)
    except (UnicodeError, TypeError):
        raise BundleRefused(f"The path {shown[:200]} holds a character no file name can hold (a lone surrogate)"
                            f"{_NOTHING}") from None
    if "\x00" in str(source):
        raise BundleRefused(f"The path {shown[:200]!r} holds a NUL character, which no file name can hold{_NOTHING}")
    path = Path(source)
    try:
        if not path.is_file():
            raise BundleRefused(f"There is no file at {shown[:300]}" + (" (it is a folder)." if path.is_dir() else "."))
        size = path.stat().st_size
        if size > limits.MAX_BUNDLE_BYTES:
            raise _too_large(size)
        return path, path.read_bytes()
    except OSError as exc:
        raise BundleRefused(f"The file at {shown[:300]} could not be read ({exc.strerror or type(exc).__name__})"
                            f"{_NOTHING}") from None


def parse_json(raw: bytes, name: str) -> Any:
    """`raw` as checked JSON values, or BundleRefused saying what is wrong with it."""
    cost = limits.parse_cost(raw)
    if cost > limits.MAX_PARSE_BYTES:
        raise BundleRefused(f"{name} holds too many separate values to read safely: parsing it would take about "
                            f"{limits.size_label(cost)} of memory, past the {limits.size_label(limits.MAX_PARSE_BYTES)} "
                            f"an import may use{_NOTHING}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BundleRefused(f"{name} is not UTF-8 text (byte {exc.start} is not valid){_NOTHING}") from None
    try:
        value = json.loads(text, parse_constant=_no_constants, parse_int=_whole, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise BundleRefused(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
                            f"{_NOTHING}") from None
    except RecursionError:
        raise BundleRefused(f"{name} is nested too deeply to read (more than {limits.MAX_DEPTH} levels of objects "
                            f"and lists are allowed){_NOTHING}") from None
    # Decoded UTF-8 cannot hold a surrogate; only a \\uD800-style escape can make one.
    check_values(value, name, texts=_SURROGATE_ESCAPE_RE.search(text) is not None)
    return value


def check_values(value: Any, name: str, *, texts: bool = True) -> None:
    """Refuses a value the database or the next export could not hold, naming
    the top-level section it is in. One pass, no recursion. `texts=False`
    skips the surrogate search, for parsed text that had no escape making one."""
    stack = [(value, 0, "")]
    while stack:
        item, depth, section = stack.pop()
        if isinstance(item, dict):
            _check_depth(depth, name, section)
            for key, child in item.items():
                if not isinstance(key, str):
                    raise _refuse(name, section, f"a key that is not text: {ascii(key)[:60]}")
                if texts:
                    _check_text(key, name, section or key)
                _visit(child, depth + 1, section or key, stack, name, texts)
        elif isinstance(item, list):
            _check_depth(depth, name, section)
            for child in item:
                _visit(child, depth + 1, section, stack, name, texts)
        else:
            _visit(item, depth, section, stack, name, texts)


def _visit(item: Any, depth: int, section: str, stack: list, name: str, texts: bool) -> None:
    """Text is checked on the spot and containers are queued: most values are text."""
    if isinstance(item, str):
        if texts:
            _check_text(item, name, section)
    elif isinstance(item, (dict, list)):
        stack.append((item, depth, section))
    else:
        _check_scalar(item, name, section)


def _check_text(text: str, name: str, section: str) -> None:
    found = _SURROGATE_RE.search(text)
    if found:
        raise _refuse(name, section, "text with a lone surrogate (half of a UTF-16 pair, which UTF-8 cannot "
                                     f"encode): {ascii(found.group())} in {ascii(text[:40])}")


def _check_depth(depth: int, name: str, section: str) -> None:
    if depth >= limits.MAX_DEPTH:
        raise _refuse(name, section, f"values nested more than {limits.MAX_DEPTH} levels deep")


def _check_scalar(item: Any, name: str, section: str) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, int):
        if abs(item) > limits.MAX_WHOLE:
            digits = int(item.bit_length() * math.log10(2)) + 1  # str() of a huge int is itself refused
            raise _refuse(name, section, f"a whole number too large to store (about {digits:,} digits; "
                                         f"the largest is {limits.MAX_WHOLE:,})")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise _refuse(name, section, f"the number {item}, which JSON cannot hold")
    else:
        raise _refuse(name, section, f"a {type(item).__name__}, which is not a JSON value")


def _refuse(name: str, section: str, what: str) -> BundleRefused:
    where = f" in its “{section}” section" if section else ""
    return BundleRefused(f"{name} contains {what}{where}{_NOTHING}")
