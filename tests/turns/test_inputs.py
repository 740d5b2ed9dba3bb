import pytest

from engine import NotAllowed
from engine.turns import direction_line, player_line


@pytest.mark.parametrize(
    "typed, line",
    [
        ("I enter the tavern.", "> I enter the tavern."),
        ("open the door", "> You open the door."),
        ("look around", "> You look around."),
        ("You leave the tavern", "> You leave the tavern."),
        ("you leave the tavern", "> You leave the tavern."),
        ("Open the door", "> You open the door."),
        ("i'm going home", "> I'm going home."),
        ("My hands shake", "> My hands shake."),
        ("we're lost", "> We're lost."),
        ("run!", "> You run!"),
        ("wait…", "> You wait…"),
        ('"Have you seen Edrin?"', '> You say "Have you seen Edrin?"'),
        ('"I think he went north"', '> You say "I think he went north."'),
        ("“Who goes there”", '> You say "Who goes there."'),
        ("> I draw my sword", "> I draw my sword."),
        (">> look", "> You look."),
        ("  look   around  ", "> You look around."),
    ],
)
def test_player_line(typed, line):
    assert player_line(typed) == line


@pytest.mark.parametrize("typed", ["I enter", "i'll wait", "We run", "look", "You I go"])
def test_never_you_i_and_one_marker(typed):
    line = player_line(typed)
    assert line.startswith("> ") and not line.startswith("> >")
    assert "You I " not in line


@pytest.mark.parametrize("typed", ["", "   ", ">", '""'])
def test_empty_input_is_refused_in_words(typed):
    with pytest.raises(NotAllowed, match="Write what you do|quotes are empty"):
        player_line(typed)


def test_direction_is_kept_as_written():
    assert direction_line("  Make the storm break.  ") == "Make the storm break."
    with pytest.raises(NotAllowed):
        direction_line(" ")


@pytest.mark.parametrize("make", [player_line, direction_line])
def test_a_lone_surrogate_is_named_with_its_position(make):
    with pytest.raises(NotAllowed, match=r"position 8 .*U\+D83D"):
        make("I open \ud83d the door")


def test_a_whole_emoji_is_kept():
    assert player_line("I wave 👋") == "> I wave 👋."


def test_a_turn_with_a_lone_surrogate_is_refused_before_anything_is_written(camp):
    before = camp.history()
    with pytest.raises(NotAllowed, match="lone surrogate"):
        camp.act("I wave \udc4b at Mara")
    assert camp.history() == before


# ------------------------------------------------------------------ a named speaker, and Story mode
from engine.turns.inputs import speaker_of, story_line  # noqa: E402


@pytest.mark.parametrize("typed, stored", [
    ('Caroline: "I went to the support group yesterday."', '> Caroline: "I went to the support group yesterday."'),
    ("Captain Vale: Hold the line, lads", "> Captain Vale: Hold the line, lads"),
    ('> Mara:   "The tide turns at six."', '> Mara: "The tide turns at six."'),
])
def test_a_named_speakers_line_is_kept_as_written(typed, stored):
    assert player_line(typed) == stored
    assert speaker_of(stored) == stored[2:].split(":")[0]


def test_a_colon_that_is_not_a_speaker_is_still_an_action():
    assert player_line("look at the sign: it says closed") == "> You look at the sign: it says closed."
    assert speaker_of("> You say: hello") is None and speaker_of("Note: the door is open") is None


def test_story_mode_keeps_the_text_exactly():
    typed = "The storm broke over the harbour that night.\n\nNobody slept."
    assert story_line("  " + typed + "\n") == typed
    with pytest.raises(NotAllowed):
        story_line("   ")


def test_a_campaign_records_the_speaker_and_story_mode_as_written(camp):
    camp.act('Caroline: "I went to the support group yesterday."')
    camp.act("The next morning the fog lifted.\nGulls came back to the quay.", mode="story")
    camp.act("Melanie paints by the lake.", mode="story")
    lines = [e.text for e in camp.history() if e.kind == "player"]
    assert lines == ['> Caroline: "I went to the support group yesterday."',
                     "The next morning the fog lifted.\nGulls came back to the quay.",
                     "Melanie paints by the lake."]
    report = camp.context("Melanie: Morning!", mode="story")
    assert report["story"].count("Melanie: Morning!") >= 1 and "You melanie" not in report["story"]
    with pytest.raises(NotAllowed):
        camp.act("x", mode="sing")


def test_revising_a_story_passage_keeps_it_prose_and_an_action_stays_an_action(camp):
    camp.act("open the gate")
    camp.act("The bells rang twice over the quay.", mode="story")
    action, prose = [e for e in camp.history() if e.kind == "player"]
    assert camp.revise(prose.id, "The bells rang three times over the quay.").text == \
        "The bells rang three times over the quay."
    assert camp.revise(action.id, "close the gate").text == "> You close the gate."
    assert [e.text for e in camp.history() if e.kind == "player"] == [
        "> You close the gate.", "The bells rang three times over the quay."]
