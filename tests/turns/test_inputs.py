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
