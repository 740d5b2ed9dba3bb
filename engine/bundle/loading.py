"""Reading a file into JSON values, before any format is considered.

The size is checked from the file system before a byte is read, so a huge
file is refused without being loaded. Nothing in the file is fetched, opened
or run: URLs and paths inside it are only text.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import limits
from .errors import BundleRefused

__all__ = ["load"]


def _no_constants(name: str) -> Any:
    raise BundleRefused(f"The file contains {name}, which is not a JSON number. Nothing was imported.")


def _too_large(n_bytes: int) -> BundleRefused:
    return BundleRefused(f"The file is too large: {limits.size_label(n_bytes)} ({n_bytes:,} bytes), past the "
                         f"{limits.size_label(limits.MAX_BUNDLE_BYTES)} an import may read. Nothing was imported.")


def load(source: Any) -> Any:
    """A dict or list as given; bytes or a file path parsed as UTF-8 JSON."""
    if isinstance(source, (dict, list)):
        return source
    if isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
        if len(raw) > limits.MAX_BUNDLE_BYTES:
            raise _too_large(len(raw))
        return _parse(raw, "The data")
    if not isinstance(source, (str, Path)):
        raise BundleRefused(f"This is not a campaign bundle or a file: a {type(source).__name__} was given. "
                            "Pass a path, the file's bytes, or its parsed JSON.")
    path = Path(source)
    if not path.is_file():
        raise BundleRefused(f"There is no file at {path}.")
    size = path.stat().st_size
    if size > limits.MAX_BUNDLE_BYTES:
        raise _too_large(size)
    return _parse(path.read_bytes(), f"“{path.name}”")


def _parse(raw: bytes, name: str) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BundleRefused(f"{name} is not UTF-8 text (byte {exc.start} is not valid). Nothing was imported.") from None
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise BundleRefused(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}. "
                            "Nothing was imported.") from None
