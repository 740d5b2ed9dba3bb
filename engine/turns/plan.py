"""A turn before its narrator is called: where it will be written, what it
answers, and what the narrator will be shown.

The plan is read in one read transaction and built once: `dry_run` returns
what it built, `run_turn` streams the narrator on it, and the take carries it
to `write_turn`, which refuses a story that moved since (`head`). Nothing
after the plan reads the story, so no lock is held while the model writes.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from .. import cards, context, knowledge, memory, narrative
from ..errors import NotAllowed
from ..memory.derived import status as derived_status
from ..providers.window import Window, effective_budget
from ..settings import Settings
from ..store import CampaignRow, Database, NodeRow, TurnRecordRow
from ..story import StoryTree
from .inputs import direction_line, player_line, story_line
from .record import HistoryRef, history_ref

__all__ = ["MODES", "PathHistory", "Plan", "TurnRequest", "brief_of", "plan_turn", "recent_texts"]

MODES = ("act", "story", "direct", "continue", "retry", "extend")


@dataclass(frozen=True)
class TurnRequest:
    mode: str
    text: str = ""


@dataclass(frozen=True)
class Plan:
    """Where a take is written and what its narrator is shown.

    An edit is planned too, with nothing shown (`built` None): it is written
    beside the narration it corrects and keeps no record of a prompt."""

    state_before: dict
    retry_of: int | None = None  # written as a new take beside this narration
    extend_of: int | None = None  # "extend": written on in this narration, as a new revision of it
    input_kind: str | None = None  # "player" | "direction"; None for Continue, a retry, an extend and an edit
    input_text: str = ""
    answered: tuple[str | None, str] = (None, "")  # the input the reply answers (a retry's parent's)
    carried: str = ""  # "extend": that narration's text, with the part a cut left off
    built: context.Built | None = None
    history: HistoryRef | None = None  # the history section as a depth range, when it can be
    recent: HistoryRef | None = None  # the same for "history_recent", the nodes after the held memories
    memory_ids: tuple[int, ...] = ()  # the memories recall offered the builder
    head: tuple[int | None, int] | None = None  # (branch, depth) when planned: the write refuses a moved head


class PathHistory:
    """The story on one path, read newest first through the lineage clause."""

    def __init__(self, session, path, end: int):
        self.session, self.path = session, path
        self.total = end + 1
        self.last: list[context.Line] = []  # the lines of the newest read: the builder chose from these
        self._read: list[context.Line] = []  # every line read so far, oldest first, ending at the head
        self._complete = False

    def newest(self, n: int) -> list[context.Line]:
        """Three columns, not ORM rows: building ORM objects for the history was
        most of a turn's engine time at 1,000 turns (measured 22 ms of 27). The
        builder asks again with a doubled `n` until the budget is covered; only
        the older lines not read yet are fetched, so a 16k budget reads each
        node once instead of about twice."""
        if self.total <= 0 or n <= 0:
            return []
        if n > len(self._read) and not self._complete:
            upto = self._read[0].depth - 1 if self._read else None
            query = select(NodeRow.kind, NodeRow.text, NodeRow.depth).where(self.path.clause(upto=upto))
            wanted = n - len(self._read)
            # Core, not ORM, execution: these are plain tuples, and the ORM result
            # layer was a third of reading a full 16k window (1,000 lines).
            rows = self.session.connection().execute(query.order_by(NodeRow.depth.desc()).limit(wanted)).all()
            self._read = list(map(context.Line._make, reversed(rows))) + self._read
            self._complete = len(rows) < wanted
        self.last = self._read[-n:]
        return self.last

    def reference(self, report: context.Report, name: str = "history") -> HistoryRef | None:
        """A history section ("history" or "history_recent", the newest
        nodes after the held memories) as a node range, checked against the
        text it stands for."""
        section, included = report.section(name), report.history.included
        if section is None or not included:
            return None
        lines = self.last[-included:]
        recent = (report.get("history") or {}).get("recent") or 0
        if recent:
            lines = lines[-recent:] if name == "history_recent" else lines[:-recent]
        return history_ref(section.text, lines)


def brief_of(campaign: CampaignRow) -> context.Brief:
    rules = (campaign.canon or {}).get("rules") if isinstance(campaign.canon, dict) else None
    return context.Brief(
        campaign.title, campaign.premise, campaign.protagonist, campaign.ai_instructions,
        campaign.authors_note, campaign.narration_length,
        tuple(r for r in rules or [] if isinstance(r, str) and r.strip()),
    )


def recent_texts(settings: Settings) -> int:
    """The newest story texts a turn reads once, for memory recall, story
    cards and the knowledge query."""
    return max(settings.tuning.recall_nodes, knowledge.QUERY_STORY_TEXTS, cards.SCAN_DEPTH)


def _knowledge(session, db: Database, campaign: CampaignRow, settings: Settings, window: Window,
               embedder, state: dict, pending: str, recent: list[str]):
    """The imported passages relevant to the recent story, and the story cards
    whose keys it names (None when the campaign has neither)."""
    library = knowledge.has_sources(session, campaign.id)
    fired = cards.lore_for(session, campaign.id, recent[-cards.SCAN_DEPTH:], pending)
    if not library and not fired:
        return None
    story = recent[-knowledge.QUERY_STORY_TEXTS:] + ([pending] if pending else [])
    names = [e.get("name", "") for e in (state.get("entities") or {}).values() if isinstance(e, dict)]
    budget = effective_budget(settings.context_budget, window)
    return knowledge.retrieve(db, campaign.id, knowledge.scene_query(story, [n for n in names if n]),
                              embedder=embedder, budget_tokens=budget, context_tokens=budget, standing=names,
                              lore=[f.to_retrieved() for f in fired], lore_facts=[f.record() for f in fired],
                              second_stage=knowledge.stage_for(settings, getattr(embedder, "model_id", None)),
                              tuning=settings.tuning)


def _gather(session, campaign_id: int, path, settings: Settings, embedder, pending: str,
            recent: list[str], held: dict) -> tuple[dict, list[int]]:
    """Memories, summary and derived status for the builder: read-only. The
    units `held` (the previous prompt's) are offered whatever they rank now."""
    remembered = memory.Recall()
    if settings.memory_enabled:
        remembered = memory.recall(session, campaign_id, path, embedder, settings.memory_top_k, pending, recent,
                                   tuning=settings.tuning,
                                   held=held.get("units") or () if settings.tuning.recall_hold else ())
    summary = memory.current(session, path)
    fields = {
        "memories": remembered.used, "memory_report": remembered.report,
        "summary": summary.text if summary else "", "summary_info": memory.provenance(summary),
        "derived": derived_status(session, campaign_id),
    }
    return fields, remembered.ids


def plan_turn(db: Database, campaign_id: int, request: TurnRequest, settings: Settings, window: Window,
              embedder=None, opens: bool = False, held: dict | None = None) -> Plan:
    """`opens`: the narrator can write on from an opening (`continues_opening`).
    `held`: the held memories to build on, in place of the newest turn record's."""
    with db.reading() as session:
        campaign = session.get(CampaignRow, campaign_id)
        tree = StoryTree(session, campaign)
        end, retry_of, kind, text = campaign.head_depth, None, None, ""
        extend_of, carried, extended = None, "", None
        if request.mode == "extend":
            extended = tree.head_node()
            if extended is None or extended.kind != "narrator":
                raise NotAllowed("Nothing to continue: the newest passage is not a narration.")
            # Written on from where it stops (the part a cut left off included) by a narrator that can take
            # the passage as its reply's own opening; any other is shown the stored passage and writes after it.
            extend_of, carried = extended.id, _carried(session, extended) if opens else extended.text
            if opens:
                end = extended.depth - 1
        elif request.mode == "retry":
            head = tree.head_node()
            if head is None or head.kind != "narrator":
                raise NotAllowed("Nothing to retry: the story has no narration at this point yet.")
            end, retry_of = head.depth - 1, head.id
        elif request.mode == "act":
            kind, text = "player", player_line(request.text)
        elif request.mode == "story":  # the reader's prose, stored as typed; the narrator goes on from it
            kind, text = "player", story_line(request.text)
        elif request.mode == "direct":
            kind, text = "direction", direction_line(request.text)
        path = tree.path(end)
        before = tree.node_at(end, path) if end >= 0 else None
        state = dict((extended or before).state_after or {}) if (extended or before) is not None else {}
        recent = memory.bank.recent_story(session, path, recent_texts(settings))
        held = _held(session, path, end) if held is None else held
        gathered, memory_ids = _gather(session, campaign_id, path, settings, embedder, text, recent, held)
        protocol = {"state_text": narrative.render_state(state), "emit_rule": narrative.emit_rule(window.tokens),
                    "reminder": narrative.EMIT_REMINDER} if settings.state_protocol else {}
        library = _knowledge(session, db, campaign, settings, window, embedder, state, text, recent)
        answered = (kind, text) if kind or before is None else (before.kind, before.text)  # a retry answers its parent
        opening = narrative.reply_opening(*answered) if opens and settings.open_reply and request.mode != "story" \
            else ""
        if extended is not None:
            answered, opening = (None, ""), carried if opens else ""
        inputs = context.Inputs(pending=context.Line(kind, text, end + 1) if kind else None, knowledge=library,
                                opening=opening, held=held, **gathered, **protocol)
        history = PathHistory(session, path, end)
        built = context.build(brief_of(campaign), history, settings, window, inputs)
        head = (campaign.head_branch_id, campaign.head_depth)
    return Plan(state, retry_of, extend_of, kind, text, answered, carried, built, history.reference(built.report),
                history.reference(built.report, "history_recent"), tuple(memory_ids), head)


def _held(session, path, end: int) -> dict:
    """Where the newest prompt on this path (at or above `end`) showed its
    summary and memories, for the builder to keep them there."""
    report = session.scalar(select(TurnRecordRow.report).join(NodeRow, NodeRow.id == TurnRecordRow.node_id)
                            .where(path.clause(upto=end)).order_by(NodeRow.depth.desc()).limit(1))
    held = report.get("held") if isinstance(report, dict) else None
    return held if isinstance(held, dict) else {}


def _carried(session, node: NodeRow) -> str:
    """A narration as a continuation goes on from it: its text, and the part a
    cut at the reply length left off (kept with its record)."""
    row = session.get(TurnRecordRow, node.id)
    accounting = (row.accounting or {}) if row is not None else {}
    tail = str(accounting.get("tail") or "").strip() if accounting.get("reply_cut") else ""
    return node.text + (" " + tail if tail and not node.text.endswith(tail) else "")
