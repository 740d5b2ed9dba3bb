"""Derived work after a turn: memories, summary, embeddings, eviction.

It runs after the turn's commit, in its own sessions, and never touches the
accepted turn. Each kind records ok (did work) / idle (nothing to do) /
failed (with the reason) in one row per campaign and kind; since the anchors
are read from what was written, a failure is simply retried next time.
"""
from __future__ import annotations

import threading
import traceback

import pandas as pd
from sqlalchemy import select

from ..store.memory_tables import DerivedStatusRow
from ..store.models import utcnow
from .bank import embed_pending, evict, write_due_memories
from .lines import embed_story
from .summary import summarise_if_due

__all__ = ["KINDS", "run_derived", "status", "status_frame", "schedule", "running", "wait", "record"]

KINDS = ("memory", "summary", "embedding", "knowledge")
_running: dict[tuple[str, int], threading.Thread] = {}
_guard = threading.Lock()


def record(db, campaign_id: int, kind: str, ok: bool, did_work: bool = False, detail: str = "") -> None:
    with db.writing() as s:
        _record(s, campaign_id, kind, ok, did_work, detail)


def _record(s, campaign_id: int, kind: str, ok: bool, did_work: bool = False, detail: str = "") -> None:
    row = s.scalar(select(DerivedStatusRow).where(DerivedStatusRow.campaign_id == campaign_id,
                                                  DerivedStatusRow.kind == kind))
    if row is None:
        row = DerivedStatusRow(campaign_id=campaign_id, kind=kind, failures=0)
        s.add(row)
    now = utcnow()
    row.last_attempt_at = now
    if ok:
        row.status, row.detail, row.failures, row.last_success_at = ("ok" if did_work else "idle"), detail, 0, now
    else:
        row.status, row.detail, row.failures = "failed", detail[:2000], (row.failures or 0) + 1


def _attempt(step) -> tuple[bool, bool, str]:
    """(ok, did work, detail) of one kind's step; an error is an outcome, never raised into the story."""
    try:
        did = step()
    except Exception as exc:  # noqa: BLE001 - recorded, never raised into the story
        return False, False, f"{type(exc).__name__}: {exc}"
    return True, bool(did), f"{did}" if did else ""


def run_derived(db, campaign_id: int, *, narrator, embedder, settings, knowledge_step=None) -> dict[str, str]:
    """One pass of every kind, each guarded; returns {kind: ok|idle|failed}.

    The statuses and the eviction share one write at the end: one write
    transaction per kind plus one for eviction was five per turn, a third of a
    turn's derived time at 1,000 turns (measured 47 ms of derived work per turn
    under profiling, most of it in commits)."""
    steps = {}
    if settings.memory_enabled:
        steps["memory"] = lambda: write_due_memories(db, campaign_id, narrator, settings.model)
    if settings.auto_summarize:
        steps["summary"] = lambda: summarise_if_due(db, campaign_id, narrator, settings.model)
    if embedder is not None:
        # Memories first, then the played lines and summaries (`lines`).
        steps["embedding"] = lambda: embed_pending(db, campaign_id, embedder) + embed_story(db, campaign_id, embedder)
    if knowledge_step is not None:
        steps["knowledge"] = knowledge_step
    outcomes = {kind: _attempt(step) for kind, step in steps.items()}
    with db.writing() as s:
        for kind, (ok, did, detail) in outcomes.items():
            _record(s, campaign_id, kind, ok, did, detail)
    try:
        evict(db, campaign_id, settings.memory_capacity)
    except Exception:  # noqa: BLE001
        record(db, campaign_id, "memory", False, detail="eviction failed: " + traceback.format_exc(limit=1))
    return {kind: ("ok" if did else "idle") if ok else "failed" for kind, (ok, did, _) in outcomes.items()}


def schedule(db, campaign_id: int, job) -> threading.Thread | None:
    """Run `job` in a background thread unless one is already running for this campaign."""
    key = (str(db.path), campaign_id)
    with _guard:
        running = _running.get(key)
        if running is not None and running.is_alive():
            return None
        thread = threading.Thread(target=job, name=f"derived-{campaign_id}", daemon=True)
        _running[key] = thread
        thread.start()
        return thread


def running(db, campaign_id: int) -> bool:
    with _guard:
        thread = _running.get((str(db.path), campaign_id))
    return thread is not None and thread.is_alive()


def wait(db, campaign_id: int, timeout: float | None = None) -> None:
    with _guard:
        thread = _running.get((str(db.path), campaign_id))
    if thread is not None:
        thread.join(timeout)


def status(session, campaign_id: int) -> list[dict]:
    rows = session.scalars(select(DerivedStatusRow).where(DerivedStatusRow.campaign_id == campaign_id)
                           .order_by(DerivedStatusRow.kind)).all()
    return [{"kind": r.kind, "status": r.status, "detail": r.detail, "failures": r.failures,
             "last_attempt_at": r.last_attempt_at.isoformat() if r.last_attempt_at else None,
             "last_success_at": r.last_success_at.isoformat() if r.last_success_at else None} for r in rows]


def status_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["kind", "status", "detail", "failures", "last_attempt_at", "last_success_at"])
