"""After a turn: the next turn's knowledge query is embedded ahead, in a
thread of its own, so the next turn embeds only the player's new line; a
failure there never reaches a turn."""
import threading

import pytest
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench
from engine.knowledge import scene_query, wait_prepared
from engine.knowledge.prepare import next_parts
from engine.search import calibration
from engine.search.query import query_parts
from engine.turns.after import next_scene

BIBLE = ("# The Old Abbey\n\nThe abbey crypt bears a symbol shaped like a broken circle, cut into the keystone "
         "above the crypt stair. Only the abbot holds the crypt key.\n\n# Tide Tables\n\nHigh water at the "
         "harbour falls two hours after moonrise in March.\n")
REPLIES = ["The stair turns twice in the dark.\n\nAt the bottom the keystone shows a broken circle.",
           "The door groans open.\n\nCold air rises from the crypt below, smelling of salt."]


class Counting(BagOfWordsEmbedder):
    """The bag-of-words double, recording which thread embedded each text;
    it fails in a preparation's thread when asked to."""

    def __init__(self, fail_in_preparation: bool = False):
        super().__init__()
        self.fail_in_preparation = fail_in_preparation
        self.by_thread: list[tuple[str, str]] = []

    def embed(self, texts):
        where = threading.current_thread().name
        if self.fail_in_preparation and where.startswith("prepare-query"):
            raise ConnectionError("the embedder went away")
        self.by_thread.extend((where, t) for t in texts)
        return super().embed(texts)

    def in_turn(self) -> list[str]:
        return [t for where, t in self.by_thread if where == threading.main_thread().name]


@pytest.fixture
def calibrated(monkeypatch):
    monkeypatch.setitem(calibration.registry(), calibration.calibration_key(BagOfWordsEmbedder.model_id),
                        {"floor": 0.3})


def play(db_path, embedder, background=True):
    wb = Workbench.open(db_path, background=background)
    wb.configure(narrator=ScriptedNarrator(REPLIES), embedder=embedder, memory_enabled=False,
                 auto_summarize=False)
    camp = wb.new_campaign("Abbey", protagonist="Ila", opening="Bells ring over the marsh.")
    camp.knowledge.add("bible.md", BIBLE.encode(), classification="canon")
    return wb, camp


def settle(wb, camp):
    camp.wait_derived(10)
    return wait_prepared(wb.db, camp.id, timeout=10)


def test_the_next_turn_embeds_only_the_players_line(db_path, calibrated):
    embedder = Counting()
    wb, camp = play(db_path, embedder)
    camp.act("I go down the crypt stair")
    done = settle(wb, camp)
    story, names = next_scene(wb.db, camp.id)
    assert story[-1] == REPLIES[0] and done.parts == len(next_parts(story, names)) and not done.error
    assert done.first == 2  # the reply's two paragraphs; the player's line was embedded in its own turn
    embedder.by_thread.clear()

    turn = camp.act("I open the crypt door")
    asked = query_parts(scene_query([*story[-3:], "> I open the crypt door."], names))
    assert turn.report["knowledge"]["semantic_used"] and len(asked) > 2
    assert embedder.in_turn() == [asked[0]]  # the rest was prepared after the last reply
    settle(wb, camp)
    wb.close()


def test_a_failed_preparation_never_reaches_the_turn(db_path, calibrated):
    embedder = Counting(fail_in_preparation=True)
    wb, camp = play(db_path, embedder)
    camp.act("I go down the crypt stair")
    assert "the embedder went away" in settle(wb, camp).error
    embedder.by_thread.clear()
    turn = camp.act("I open the crypt door")
    assert turn.report["knowledge"]["semantic_used"]
    assert len(embedder.in_turn()) > 1  # the turn embedded its own parts
    settle(wb, camp)
    wb.close()


def test_inline_derived_work_prepares_nothing(db_path, calibrated):
    embedder = Counting()
    wb, camp = play(db_path, embedder, background=False)
    camp.act("I go down the crypt stair")
    assert wait_prepared(wb.db, camp.id, timeout=0) is None
    assert not [t for where, t in embedder.by_thread if where.startswith("prepare-query")]
    wb.close()
