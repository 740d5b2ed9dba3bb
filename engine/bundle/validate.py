"""Which reader a file gets: dispatch on its declared format and version.

`validate(payload)` is pure. It names the problem when it refuses, and the
format and version it found when it does not know them. A new version of
this workbench's format adds one entry to READERS and keeps the old ones, so
files written by older workbenches keep importing.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import reference
from .errors import BundleRefused, refusing
from .fields import is_whole
from .native import FORMAT, VERSION, read_v1, read_v2
from .plan import Plan

__all__ = ["READABLE", "READERS", "validate"]

# (format, version) -> reader. Version 1 stays readable for as long as files
# written with it exist.
READERS: dict[tuple[str, int], Callable[[dict], Plan]] = {
    (FORMAT, 1): read_v1,
    (FORMAT, 2): read_v2,  # prompt texts stored once, under their hash
}
READABLE = sorted({f"{name} v{version}" for name, version in READERS} | set(reference.FORMATS))


@refusing("The file")
def validate(payload: Any) -> Plan:
    """Check a parsed file completely; return the Plan the writer will copy."""
    if not isinstance(payload, dict):
        raise BundleRefused(f"This is not a campaign bundle: the file holds a {type(payload).__name__}, not an "
                            f"object with a format. Readable formats: {', '.join(READABLE)}.")
    name = payload.get("format")
    if name is None and not payload:
        raise BundleRefused("This file is empty ({}): it names no format, so it is not a campaign export. "
                            f"Readable formats: {', '.join(READABLE)}.")
    if not isinstance(name, str):
        raise BundleRefused(f"This file does not name its format as text (found {name!r}), so it is not a "
                            f"campaign export this workbench can read. Readable formats: {', '.join(READABLE)}.")
    if name in reference.FORMATS:
        return reference.read(payload)
    if name != FORMAT:
        raise BundleRefused(f"The file's format is “{name}”, which this workbench does not read. "
                            f"Readable formats: {', '.join(READABLE)}.")
    version = payload.get("version")
    reader = READERS.get((name, version)) if is_whole(version) else None
    if reader is None:
        newer = is_whole(version) and version > VERSION
        raise BundleRefused(
            f"The file is “{name}” version {version!r}, and this workbench reads versions "
            f"{', '.join(str(v) for f, v in READERS if f == name)}."
            + (" It was written by a newer workbench: upgrade this one to import it." if newer else ""))
    return reader(payload)
