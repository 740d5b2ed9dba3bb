"""A call that must return within a time, stopped when it does not.

An import that loops for ever (a branch that is its own parent once did)
would otherwise freeze the test run as it froze the user's kernel: the alarm
raises `Hang` inside the call at its next Python instruction, so the loop
ends, the test fails and the run goes on. Main thread, Unix only (SIGALRM),
which is where the tests run.
"""
from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Hang", "within"]

T = TypeVar("T")


class Hang(BaseException):
    """Raised inside the guarded call when its time is up. A BaseException,
    so the engine's `except Exception` nets cannot swallow it."""


def within(seconds: float, call: Callable[[], T]) -> tuple[T, float]:
    """(what `call` returned, the seconds it took); `Hang` past `seconds`."""
    def stop(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.perf_counter()
    try:
        return call(), time.perf_counter() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
