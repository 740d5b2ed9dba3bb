"""The next turn's query embedded ahead: which parts, with which models, and
a turn after it that embeds only the player's new line."""
import threading

import pytest
from conftest import ABBEY, OSSUARY, SHIP, TAVERN
from knowledge_doubles import TopicEmbedder

from engine.knowledge import (
    Library,
    prepare,
    prepare_query,
    retrieve,
    scene_query,
    start_prepare,
    wait_prepared,
)
from engine.search import DEFAULT, calibration
from engine.search.query import query_parts
from engine.search.second_stage import VectorStage
from engine.settings import Settings
from engine.vectors import QUERIES

STAGE_PARTS = DEFAULT.stage_parts

NAMES = ["Mara"]
STORY = [
    "Bells ring over the marsh.",
    "> I go down the crypt stair.",
    "The stair turns twice in the dark.\n\nAt the bottom the keystone shows a broken circle.\n\nMara lifts the "
    "lantern and the crypt door is there, iron-bound.",
]
LINE = "> I open the crypt door."


class Counting:
    """Wraps an embedder and keeps every text it embedded, with the thread
    that asked (the turn's, or a preparation's)."""

    def __init__(self, inner, fail_in_thread: str = ""):
        self.inner, self.model_id = inner, inner.model_id
        self.fail_in_thread = fail_in_thread
        self.texts: list[tuple[str, str]] = []

    def embed(self, texts):
        where = threading.current_thread().name
        if self.fail_in_thread and where.startswith(self.fail_in_thread):
            raise ConnectionError("the embedder went away")
        self.texts.extend((where, t) for t in texts)
        return self.inner.embed(texts)

    def embedded(self, thread: str | None = None) -> list[str]:
        return [t for where, t in self.texts if thread is None or where == thread]


@pytest.fixture
def second(monkeypatch):
    """A second model (the topic double under its own name, with its own
    floor), the stage the settings build for the first model."""
    counting = Counting(TopicEmbedder("test-second"))
    monkeypatch.setitem(calibration.registry(), "test-second", {"floor": 0.6})
    stage = VectorStage(counting)
    monkeypatch.setattr(prepare, "stage_for", lambda settings, first_model: stage)
    return stage


@pytest.fixture
def played(db, campaign, calibrated, second):
    """A library with both models' passage vectors computed, and a counting first model."""
    first = Counting(TopicEmbedder())
    lib = Library(db, campaign, lambda: first, progress=False, second_stage=second)
    for name, text in (("abbey.md", ABBEY), ("tavern.md", TAVERN), ("ossuary.md", OSSUARY), ("ship.md", SHIP)):
        lib.add(name, text)
    lib.embed_second_stage()
    first.texts.clear()
    second.embedder.texts.clear()
    return first, second


def next_turn(db, campaign, first, second, story=STORY, line=LINE):
    query = scene_query([*story[-3:], line], NAMES)
    return query, retrieve(db, campaign, query, embedder=first, budget_tokens=6000, standing=NAMES,
                           second_stage=second)


def test_the_predicted_parts_are_the_next_act_turns_less_the_players_line():
    for line in (LINE, "> You say \"Who is there?\"", "Make the storm break."):
        asked = query_parts(scene_query([*STORY, line], NAMES))
        assert prepare.next_parts(STORY, NAMES) == asked[1:]
        assert line in asked[0] and "Mara" in asked[0]  # the names ride on the player's line
    assert prepare.next_parts([], NAMES) == []


def test_a_turn_after_the_preparation_embeds_only_the_players_line(db, campaign, played):
    first, second = played
    done = prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    parts = prepare.next_parts(STORY, NAMES)
    assert (done.parts, done.first, done.second) == (len(parts), len(parts), STAGE_PARTS - 1) and not done.error
    assert first.embedded() == parts and second.embedder.embedded() == parts[:STAGE_PARTS - 1]
    first.texts.clear()
    second.embedder.texts.clear()

    query, sel = next_turn(db, campaign, first, second)
    assert sel.report["semantic_used"] and sel.report["second_stage_used"]
    line_part = query_parts(query)[0]
    assert first.embedded() == [line_part] and second.embedder.embedded() == [line_part]

    again = prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    assert (again.first, again.second) == (0, 0)  # all held: nothing embedded twice


def test_without_a_preparation_the_turn_embeds_every_part_once(db, campaign, played):
    first, second = played
    query, sel = next_turn(db, campaign, first, second)
    parts = query_parts(query)
    assert sel.report["second_stage_used"]
    assert first.embedded() == parts and second.embedder.embedded() == parts[:STAGE_PARTS]
    first.texts.clear()
    next_turn(db, campaign, first, second)  # the same scene asked again (a retry): nothing embedded
    assert first.embedded() == []


def test_a_changed_story_text_is_embedded_anew(db, campaign, played):
    first, second = played
    prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    first.texts.clear()
    edited = [*STORY[:-1], STORY[-1].replace("twice", "three times")]
    query, _ = next_turn(db, campaign, first, second, story=edited)
    assert first.embedded() == [query_parts(query)[0], "The stair turns three times in the dark."]


def test_the_second_model_is_not_prepared_while_its_passage_vectors_are_being_computed(
        db, campaign, calibrated, second):
    first = Counting(TopicEmbedder())
    lib = Library(db, campaign, lambda: first, progress=False, second_stage=second)
    lib.add("abbey.md", ABBEY)
    done = prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    assert done.first and not done.second and second.embedder.embedded() == []


def test_nothing_is_prepared_without_a_library_or_a_calibrated_model(db, campaign, second, monkeypatch):
    first = Counting(TopicEmbedder("test-uncalibrated"))
    done = prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    assert "no enabled knowledge source" in done.note and first.embedded() == []
    Library(db, campaign, lambda: first, progress=False).add("abbey.md", ABBEY)
    first.texts.clear()
    done = prepare_query(db, campaign, STORY, NAMES, embedder=first, settings=Settings())
    assert done.parts and not done.first and first.embedded() == []  # no floor: a turn would not embed either
    assert prepare_query(db, campaign, STORY, NAMES, embedder=None, settings=Settings()).note


def test_the_background_preparation_fills_the_cache(db, campaign, played):
    first, second = played
    thread = start_prepare(db, campaign, lambda: (STORY, NAMES), embedder=first, settings=Settings())
    assert thread is not None and thread.daemon
    done = wait_prepared(db, campaign, timeout=10)
    parts = prepare.next_parts(STORY, NAMES)
    assert done.first == len(parts) and not done.error
    assert all(QUERIES.held(first.model_id, p) for p in parts)
    assert all(where.startswith("prepare-query") for where, _ in first.texts)


def test_a_failed_background_preparation_is_kept_and_logged_never_raised(db, campaign, played, caplog):
    first, second = played
    failing = Counting(first.inner, fail_in_thread="prepare-query")
    start_prepare(db, campaign, lambda: (STORY, NAMES), embedder=failing, settings=Settings())
    done = wait_prepared(db, campaign, timeout=10)
    assert "ConnectionError" in done.error and "the embedder went away" in caplog.text

    def broken_scene():
        raise RuntimeError("the file was closed")

    start_prepare(db, campaign, broken_scene, embedder=first, settings=Settings())
    assert "the file was closed" in wait_prepared(db, campaign, timeout=10).error
    query, sel = next_turn(db, campaign, failing, second)  # the turn embeds its parts itself
    assert sel.report["semantic_used"] and failing.embedded() == query_parts(query)


def test_one_preparation_at_a_time_per_campaign(db, campaign, played):
    first, second = played
    gate = threading.Event()

    def slow_scene():
        gate.wait(10)
        return STORY, NAMES

    running = start_prepare(db, campaign, slow_scene, embedder=first, settings=Settings())
    assert start_prepare(db, campaign, lambda: (STORY, NAMES), embedder=first, settings=Settings()) is None
    gate.set()
    running.join(10)
    assert wait_prepared(db, campaign, timeout=10).first


def test_after_a_judged_turn_the_second_models_query_is_embedded_beside_the_first_stage(
        db, campaign, played, monkeypatch):
    """The second model's pass over the player's line starts in its own
    thread as the turn begins, once that model judged the campaign's last
    turn; the stage's own call finds it held or waits for it: one pass."""
    first, second = played
    asked = []
    query = second.query
    monkeypatch.setattr(second, "query", lambda parts: asked.append(threading.current_thread().name) or query(parts))
    _, sel = next_turn(db, campaign, first, second)
    assert sel.report["second_stage_used"] and asked == ["MainThread"]  # no judged turn before it

    asked.clear()
    second.embedder.texts.clear()
    following = [*STORY, LINE, "The door groans open."]
    query_text, sel = next_turn(db, campaign, first, second, story=following, line="> I step inside.")
    line_part = query_parts(query_text)[0]
    assert sel.report["second_stage_used"] and "second-stage-query" in asked
    assert second.embedder.embedded().count(line_part) == 1  # embedded once, by whichever asked first


def test_no_query_is_embedded_ahead_while_the_second_model_judges_nothing(db, campaign, calibrated, second,
                                                                           monkeypatch):
    first = Counting(TopicEmbedder())
    lib = Library(db, campaign, lambda: first, progress=False, second_stage=second)
    lib.add("abbey.md", ABBEY)  # its second-stage vector is never computed: the stage cannot judge
    for line in (LINE, "> I step inside."):
        _, sel = next_turn(db, campaign, first, second, line=line)
        assert not sel.report["second_stage_used"]
    assert second.embedder.embedded() == []
