"""Every error a user can meet is one of the workbench's own, defined in one
module and importable from `engine` (as httpx keeps its exceptions)."""
from __future__ import annotations

import importlib
import pkgutil

import engine
from engine import errors


def _all_engine_modules():
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        if info.name.endswith(".smoke"):
            continue  # a script run by `make setup`, not a library module
        importlib.import_module(info.name)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_workbench_error_lives_in_engine_errors_and_is_exported():
    _all_engine_modules()
    found = {c for c in _subclasses(errors.WorkbenchError)}
    elsewhere = sorted(f"{c.__module__}.{c.__qualname__}" for c in found if c.__module__ != "engine.errors")
    assert elsewhere == [], "define these in engine/errors.py and import them where they are raised"
    missing = sorted(c.__name__ for c in found if getattr(engine, c.__name__, None) is not c)
    assert missing == [], "add these to engine/__init__.py and its __all__"
    assert set(errors.__all__) <= set(engine.__all__)


def test_the_errors_users_meet_are_named_by_engine():
    for name in ("BundleRefused", "CardRefused", "KnowledgeRefused", "BackupError", "ContextOverflow",
                 "NotADatabase"):
        assert issubclass(getattr(engine, name), engine.WorkbenchError), name
