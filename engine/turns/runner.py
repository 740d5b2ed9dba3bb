"""One turn: read -> build -> stream -> commit once.

The database is read, then released, before the narrator is called, and the
turn is written in one commit after the narrator finishes: no write lock is
ever held across a model call (the reference logged 180 "database is locked"
errors in 26 turns before it learned this). A turn that fails or is stopped
at any point before that commit has written nothing.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import context
from ..errors import NarratorError, NotAllowed, TurnCancelled, TurnFailed
from ..providers import Narrator, Prompt, Reasoning, Text, Usage
from ..providers.accounting import classify_usage
from ..providers.window import Window
from ..settings import Settings
from ..store import CampaignRow, Database, TurnRecordRow
from ..store.models import utcnow
from ..story import StoryTree
from .inputs import direction_line, player_line

__all__ = ["HISTORY_FETCH", "TurnRequest", "run_turn"]

MODES = ("act", "direct", "continue", "retry")


@dataclass(frozen=True)
class TurnRequest:
    mode: str
    text: str = ""


@dataclass
class _Plan:
    head: tuple[int | None, int]
    input_kind: str | None
    input_text: str
    built: context.Built
    retry_of: int | None


class PathHistory:
    """The story on one path, read newest first through the lineage clause."""

    def __init__(self, session, path, end: int):
        self.session, self.path = session, path
        self.total = end + 1

    def newest(self, n: int) -> list[context.Line]:
        if self.total <= 0:
            return []
        return [context.Line(x.kind, x.text, x.depth) for x in self.path.nodes(self.session, newest=n)]


def brief_of(campaign: CampaignRow) -> context.Brief:
    rules = (campaign.canon or {}).get("rules") if isinstance(campaign.canon, dict) else None
    return context.Brief(
        campaign.title, campaign.premise, campaign.protagonist, campaign.ai_instructions,
        campaign.authors_note, campaign.narration_length,
        tuple(r for r in rules or [] if isinstance(r, str) and r.strip()),
    )


def _plan(db: Database, campaign_id: int, request: TurnRequest, settings: Settings, window: Window) -> _Plan:
    with db.reading() as session:
        campaign = session.get(CampaignRow, campaign_id)
        tree = StoryTree(session, campaign)
        end, retry_of, kind, text = campaign.head_depth, None, None, ""
        if request.mode == "retry":
            head = tree.head_node()
            if head is None or head.kind != "narrator":
                raise NotAllowed("Nothing to retry: the story has no narration at this point yet.")
            end, retry_of = head.depth - 1, head.id
        elif request.mode == "act":
            kind, text = "player", player_line(request.text)
        elif request.mode == "direct":
            kind, text = "direction", direction_line(request.text)
        inputs = context.Inputs(pending=context.Line(kind, text, end + 1) if kind else None)
        history = PathHistory(session, tree.path(end), end)
        built = context.build(brief_of(campaign), history, settings, window, inputs)
        head = (campaign.head_branch_id, campaign.head_depth)
    return _Plan(head, kind, text, built, retry_of)


def _stream(narrator, prompt, on_text, on_reasoning, cancel):
    text, reasoning, usage = [], [], Usage()
    stream = narrator.execute(prompt)
    try:
        for chunk in stream:
            if cancel is not None and cancel.is_set():
                raise TurnCancelled("Stopped: the narration was cancelled and nothing was written.")
            if isinstance(chunk, Text):
                text.append(chunk.text)
                if on_text:
                    on_text(chunk.text)
            elif isinstance(chunk, Reasoning):
                reasoning.append(chunk.text)
                if on_reasoning:
                    on_reasoning(chunk.text)
            elif isinstance(chunk, Usage):
                usage = chunk
    except (TurnFailed, NotAllowed):
        raise
    except NarratorError as exc:
        raise TurnFailed(f"{exc} Nothing was written.") from exc
    except Exception as exc:  # a narrator bug must not leave half a turn behind
        raise TurnFailed(f"The narrator failed mid-reply ({type(exc).__name__}: {exc}). Nothing was written.") from exc
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()
    if cancel is not None and cancel.is_set():
        raise TurnCancelled("Stopped: the narration was cancelled and nothing was written.")
    return "".join(text), "".join(reasoning).strip() or None, usage


def dry_run(db: Database, campaign_id: int, narrator: Narrator, settings: Settings, request: TurnRequest):
    """The context the next turn would be given, with no model call and no model load."""
    peek = getattr(narrator, "peek_window", None)
    window = peek() if peek else narrator.context_window()
    return _plan(db, campaign_id, request, settings, window).built


def run_turn(
    db: Database,
    campaign_id: int,
    narrator: Narrator,
    settings: Settings,
    request: TurnRequest,
    *,
    on_text: Callable[[str], None] | None = None,
    on_reasoning: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Play one turn and return the id of the narration it wrote."""
    if request.mode not in MODES:
        raise NotAllowed(f"Unknown turn mode {request.mode!r}; use one of {', '.join(MODES)}.")
    started = time.perf_counter()
    window = narrator.context_window()
    plan = _plan(db, campaign_id, request, settings, window)
    prepared = time.perf_counter()
    prompt = Prompt(plan.built.system, plan.built.story, settings.max_output_tokens, settings.temperature)
    raw, reasoning, usage = _stream(narrator, prompt, on_text, on_reasoning, cancel)
    generated = time.perf_counter()
    prose = raw.strip()
    if not prose:
        raise TurnFailed("The narrator returned no story text, so nothing was written. Retry, or check the model.")
    report = plan.built.report
    accounting = classify_usage(
        usage.as_dict(), estimate=report["tokens"]["estimate"], budget=report["tokens"]["budget"],
        max_output_tokens=settings.max_output_tokens, window_verified=window.verified,
    )
    timings = {
        "prepare_ms": round((prepared - started) * 1000, 2),
        "generate_ms": round((generated - prepared) * 1000, 2),
    }
    return _commit(db, campaign_id, plan, prose, raw, reasoning, usage, narrator, window, accounting, timings)


def _commit(db, campaign_id, plan, prose, raw, reasoning, usage, narrator, window, accounting, timings) -> int:
    with db.writing() as session:
        campaign = session.get(CampaignRow, campaign_id)
        if (campaign.head_branch_id, campaign.head_depth) != plan.head:
            raise TurnFailed(
                "The story moved while this turn was being narrated (another window or process "
                "changed it), so nothing was written. Look at the story and try again."
            )
        tree = StoryTree(session, campaign)
        state = dict(campaign.state or {})
        if plan.retry_of is not None:
            node = tree.add_take(tree.node(plan.retry_of), prose, state, raw_text=raw, reasoning=reasoning)
        else:
            if plan.input_kind:
                tree.append(plan.input_kind, plan.input_text, state)
            node = tree.append("narrator", prose, state, raw_text=raw, reasoning=reasoning)
        session.add(
            TurnRecordRow(
                node_id=node.id,
                narrator=narrator.model_id,
                report=dict(plan.built.report),
                usage=usage.as_dict(),
                window=window.as_dict(),
                accounting=accounting,
                timings=timings,
            )
        )
        campaign.updated_at = utcnow()
        session.flush()
        return node.id
