"""One story job at a time, off the kernel's main thread.

A turn can take a minute on a CPU model. Running it in a background thread
keeps the kernel answering widget messages meanwhile, which is what lets the
Stop button reach `Campaign.stop()` at all. Tests pass `threaded=False` so a
click runs the whole turn before it returns.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine import WorkbenchError

__all__ = ["Runner", "describe_error"]


def describe_error(exc: BaseException) -> str:
    """The words to show for a failure: the engine's own message when it has
    one (it says what to do next), else the exception's type and text. Never a
    traceback: the reader needs the next step, not the stack."""
    if isinstance(exc, WorkbenchError):
        return str(exc) or type(exc).__name__
    return f"Something went wrong ({type(exc).__name__}: {exc})."


class Runner:
    """Runs a job, then `done(result)` or `failed(exc)`, then `after()`.

    `after` runs once the runner is no longer busy, so it can re-enable the
    controls that `busy` disabled."""

    def __init__(self, threaded: bool = True):
        self.threaded = threaded
        self._thread: threading.Thread | None = None
        self._busy = False

    @property
    def busy(self) -> bool:
        return self._busy

    def start(self, job: Callable[[], Any], done: Callable[[Any], None],
              failed: Callable[[BaseException], None], after: Callable[[], None]) -> bool:
        """Start `job`; returns False (and does nothing) if one is running."""
        if self._busy:
            return False
        self._busy = True
        if not self.threaded:
            self._run(job, done, failed, after)
            return True
        self._thread = threading.Thread(target=self._run, args=(job, done, failed, after),
                                        name="story-workbench-turn", daemon=True)
        self._thread.start()
        return True

    def _run(self, job, done, failed, after) -> None:
        try:
            try:
                done(job())
            except Exception as exc:  # noqa: BLE001 - every failure is shown in words
                failed(exc)
        finally:
            self._busy = False
            after()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running job (if any) has finished; True if it has."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            return not thread.is_alive()
        return not self._busy
