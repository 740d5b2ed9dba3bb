"""The net that makes `BundleRefused` (defined in engine.errors) the only error an import raises."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from ..errors import BundleRefused

__all__ = ["BundleRefused", "refusing"]

F = TypeVar("F", bound=Callable)

# What a pure reader can raise on a value of a shape no check foresaw (a list
# where a key was expected, a date past year 9999, a nesting that recursed).
# Readers write nothing, so turning these into a refusal loses nothing.
_READER_FAULTS = (RecursionError, ValueError, OverflowError, TypeError, KeyError, IndexError, AttributeError,
                  UnicodeError, MemoryError)


def refusing(what: str) -> Callable[[F], F]:
    """Wraps a pure reader so anything it raises is a BundleRefused naming `what`.

    The cause stays chained (`raise ... from`) for whoever debugs the reader.
    """
    def decorate(reader: F) -> F:
        @functools.wraps(reader)
        def guarded(*args, **kwargs):
            try:
                return reader(*args, **kwargs)
            except BundleRefused:
                raise
            except _READER_FAULTS as exc:
                detail = str(exc)[:200] or "no detail"
                raise BundleRefused(f"{what} could not be read: a value has a shape or size this workbench cannot "
                                    f"take ({type(exc).__name__}: {detail}). Nothing was imported.") from exc
        return guarded
    return decorate
