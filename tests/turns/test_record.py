"""The turn record keeps each prompt once and gives it back exactly."""
import json

import pytest
from narrators import BagOfWordsEmbedder, RecordingStoryNarrator
from sqlalchemy import select, text
from store.scenario import play

from engine import Workbench
from engine.context import Line
from engine.store import NodeRow, TurnRecordRow
from engine.turns import record


@pytest.fixture(scope="module")
def long_play(tmp_path_factory):
    """300 narrations at a 3,072-token budget (2,048 until the guarded, longer
    memories and summary of issue 30 left a 2,048 prompt room for only part of
    one history line, which cannot be stored as a node range): the history
    window trims and steps its floor, an author's note rides inside it, forks, retries, edits,
    take switches, corrections, memories, summaries and a knowledge file."""
    narrator = RecordingStoryNarrator()
    wb = Workbench.open(tmp_path_factory.mktemp("record") / "long.db", background=False)
    wb.configure(narrator=narrator, embedder=BagOfWordsEmbedder(), context_budget=3072, max_output_tokens=120)
    camp = wb.new_campaign("Westhaven", premise="A port town under quarantine.", protagonist="Aldric",
                           opening="The bells have not rung for three days.", authors_note="Keep it tense.")
    play(camp, 300)
    yield wb, camp, narrator
    wb.close()


def _takes(wb, camp):
    with wb.db.reading() as s:
        return s.scalars(select(TurnRecordRow.node_id).join(NodeRow, NodeRow.id == TurnRecordRow.node_id)
                         .where(NodeRow.campaign_id == camp.id).order_by(TurnRecordRow.node_id)).all()


def test_every_take_rebuilds_the_prompt_the_narrator_was_sent(long_play):
    wb, camp, narrator = long_play
    takes = _takes(wb, camp)
    # one narrator call per take, in order (an edit makes a take without one)
    assert len(takes) == len(narrator.prompts) == 300 - 300 // 10 + 300 // 40
    shown = {"knowledge": 0, "memories": 0, "story_summary": 0}
    for node_id, sent in zip(takes, narrator.prompts, strict=True):
        report = camp.turn(node_id).report
        assert report["prompt"] == {"system": sent.system, "story": sent.story}, node_id
        for section in report["sections"]:
            name = "knowledge" if section["name"].startswith(("knowledge_", "imported_")) and section["part"] == "story" \
                else section["name"]
            shown[name] = shown.get(name, 0) + 1
    assert min(shown["memories"], shown["story_summary"], shown["knowledge_rule"]) > 200, shown
    # Retrieved passages are covered by the migration test's file (60 takes
    # show one); here lexical admission decides, and that belongs to knowledge.


def test_history_is_stored_as_a_node_range_not_as_text(long_play):
    wb, camp, _ = long_play
    with wb.db.reading() as s:
        stored = [r.report for r in s.scalars(select(TurnRecordRow))]
    histories = [x for r in stored for x in r["sections"] if x["name"] == "history"]
    assert all(r["version"] == record.RECORD_VERSION for r in stored)
    assert histories and all("nodes" in h and "text" not in h and "text#" not in h for h in histories)
    # The newest nodes after the held memories are a node range too.
    recent = [x for r in stored for x in r["sections"] if x["name"] == "history_recent"]
    assert recent and all("nodes" in h and "text" not in h and "text#" not in h for h in recent)
    # The author's note was found, in the history or among the newest nodes after the held memories.
    noted = [any("note_at" in x for x in r["sections"] if x["name"] in ("history", "history_recent")) for r in stored]
    assert sum(noted) > 0.9 * len(histories)
    # Nothing long is kept inline: every text a report carries is a reference.
    # (Up to 8 recalled played lines ride beside the memories, ~120 bytes of
    # scores and depths each: 10.3 KB at most over 120 turns of this play.)
    assert max(len(json.dumps(r)) for r in stored) < 13_000


def test_a_recurring_text_is_stored_once(long_play):
    wb, camp, narrator = long_play
    with wb.db.reading() as s:
        texts = s.execute(text("SELECT count(*) FROM prompt_texts")).scalar_one()
    systems = {p.system for p in narrator.prompts}
    assert len(systems) < 10 < len(narrator.prompts)
    # far fewer texts than takes times sections (about 12 a take): the system block, the canon and
    # the retrieved passages recur; memories, state and summaries change sometimes. The count is not
    # the same from one process to the next (1,104-1,109 texts for 277 takes, measured on one commit),
    # so the bound has room above 4 a take. The memories section now changes with nearly every
    # input (played lines are recalled for it), one more text a take: 1,272 for 277 takes.
    assert texts < 5.5 * len(narrator.prompts)


def test_a_history_that_does_not_rebuild_is_stored_as_text():
    lines = [Line("narrator", "one two three", 4), Line("player", "> You wait.", 5)]
    assert record.history_ref("one two three\n\n> You wait.", lines) == record.HistoryRef(4, 5)
    with_note = "one two three\n\n[Author's note: calm]\n\n> You wait."
    assert record.history_ref(with_note, lines) == record.HistoryRef(4, 5, 1, "[Author's note: calm]")
    assert record.history_ref("three\n\n> You wait.", lines) is None  # the oldest line was cut to fit
    report = {"sections": [{"name": "history", "part": "story", "tokens": 3, "text": "three\n\n> You wait." * 9}],
              "tokens": {"estimate": 5}}
    stored, texts = record.compact(report, None)
    rebuilt = record.expand(stored, texts, lambda first, last: [])
    assert rebuilt["prompt"]["story"] == "three\n\n> You wait." * 9 and "text#" in stored["sections"][0]


def test_a_v2_report_is_shown_as_it_was_stored():
    old = {"sections": [], "prompt": {"system": "S", "story": "T"}, "system": "S", "story": "T"}
    assert record.expand(old, {}, lambda a, b: []) == old


def test_records_show_the_record_columns_for_played_and_all_takes(long_play):
    _, camp, _ = long_play
    played, every = camp.records(), camp.records(takes="all")
    assert played.attrs["takes"] == "played" and every.attrs["takes"] == "all"
    assert played["on_path"].all() and not every["on_path"].all() and len(every) > len(played)
    for column in ("history_first", "history_last", "tok_history", "cached_tokens", "record_version"):
        assert column in played.columns
    narrated = played.dropna(subset=["record_version"])
    assert (narrated["record_version"] == record.RECORD_VERSION).all()
    assert (narrated["history_last"] < narrated["depth"]).all()


def test_a_held_prompt_repeats_the_memories_and_summary_it_was_given(long_play):
    """Played turns hold their memories in place: the next prompt shows the
    same summary and memories sections at the same anchor, until the hold
    ends or the summary changes."""
    wb, camp, narrator = long_play
    reports = [camp.turn(node_id).report for node_id in _takes(wb, camp)]
    pairs = [(a, b) for a, b in zip(reports, reports[1:], strict=False)
             if b["held"]["held"] and a["held"]["anchor"] == b["held"]["anchor"]]
    assert len(pairs) > 50
    for a, b in pairs:
        for name in ("story_summary", "memories"):
            before, after = a.section(name), b.section(name)
            assert (before is None) == (after is None) and (before is None or before.text == after.text)
    assert sum(r["held"]["held"] for r in reports) < len(reports)  # and chosen afresh from time to time
