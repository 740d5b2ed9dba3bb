"""The narration's rules as text functions: sentence ends, "you" not "I"."""
import pytest

from engine.narrative import cut_to_sentence, ends_at_sentence, first_person, second_person


@pytest.mark.parametrize("text, kept, tail", [
    ("The door opens. A cold wind", "The door opens.", "A cold wind"),
    ('"Run!" she shouts. You turn and', '"Run!" she shouts.', "You turn and"),
    ("The door opens.", "The door opens.", ""),
    ('She says, "Wait. The bell is', 'She says, "Wait."', "The bell is"),
    ("Mr. Hale waits by the door and", "Mr. Hale waits by the door and", ""),  # no sentence end to go back to
    ("You wait… then the lamp", "You wait…", "then the lamp"),
])
def test_a_reply_is_cut_to_its_last_complete_sentence(text, kept, tail):
    assert cut_to_sentence(text) == (kept, tail)


def test_ends_at_sentence_counts_closing_quotes():
    assert ends_at_sentence('"Who is there?"') and ends_at_sentence("It rains.  ")
    assert not ends_at_sentence("It rains and") and not ends_at_sentence("")


def test_first_person_outside_quotes_only():
    assert first_person("I'm Grimjack, the tavern's former captain.")
    assert first_person("The keeper looks at me and nods.")
    assert not first_person('The keeper says, "I saw my brother at the mill."')
    assert not first_person("You see Ida by the mill.")


def test_second_person_repairs_narration_and_leaves_speech_alone():
    assert second_person("I am cold. My hands shake and the keeper stares at me.") == \
        "You are cold. Your hands shake and the keeper stares at you."
    assert second_person('I turn. "I know you," she says.') == 'You turn. "I know you," she says.'
    assert not first_person(second_person("This is the end of my story, and I'm glad."))


def test_a_cut_that_leaves_an_echoed_instruction_at_the_end_removes_it():
    """The release evidence's one leak: the cut moved a '[Reminder: ...]' from the middle to the end."""
    from engine.narrative import count_leaks, hold_rules

    kept, rules = hold_rules("The rope holds. [Reminder: once the story part is finished, append 4 more passages "
                             "of text with no preamble or any notes.] The ro")
    assert kept == "The rope holds." and rules["tail"] == "The ro"
    alone, rules = hold_rules("[Reminder: once the story part is finished, append 4 more passages of text with no "
                              "preamble or any notes.]\nShe could only see what little bit they still knew")
    assert alone == "She could only see what little bit they still knew…" and rules["trailed_off"]
    assert count_leaks([(1, kept), (2, alone)])["leaking"] == 0


def test_a_reply_that_opens_with_the_players_marker_is_stored_as_story():
    """The 135M narrator imitates the prompt's "> You ..." lines; stored so,
    its reply would read as the player's own line."""
    from engine.narrative import hold_rules

    kept, rules = hold_rules("> You're standing at the gate. The rain has stopped.")
    assert kept == "You're standing at the gate. The rain has stopped." and rules["marker_dropped"]
    kept, rules = hold_rules(">> > You wait.\nThe guard nods.")
    assert kept == "You wait.\nThe guard nods." and rules["marker_dropped"]
    kept, rules = hold_rules('The guard reads the note aloud: "> You may pass."')
    assert kept.startswith("The guard") and not rules["marker_dropped"]  # only the reply's very start
    kept, rules = hold_rules(">")
    assert not rules["marker_dropped"]  # nothing after it to keep: left to the turn's empty-reply rule


@pytest.mark.parametrize("line, things", [
    ("> You light the lantern and hold it up.", ["lantern"]),
    ("> You search the fisherman's hut for a rope.", ["fisherman", "hut", "rope"]),
    ("> I climb the bell tower.", ["bell", "tower"]),
    ('> You say "Who rang the bell last night?"', ["bell"]),
    ("A grey wolf steps out of the trees.", ["grey", "wolf", "tree"]),
    ("Snow begins to fall.", ["snow"]),
    ('> You say "Is anyone down here?"', []),
])
def test_the_things_an_input_names(line, things):
    from engine.narrative import named_things

    assert named_things(line) == things


def test_a_reply_takes_up_an_input_when_it_names_one_of_its_things():
    from engine.narrative import takes_up

    assert takes_up("The wolves circle you in the snow.", "A grey wolf steps out of the trees.")
    assert takes_up("You raise it; the lantern's glow spills over the quay.", "> You light the lantern.")
    assert takes_up("Rain drums on the slate roofs.", "> You light the lantern.") is False
    assert takes_up("Rain drums on the slate roofs.", '> You say "Is anyone down here?"') is None


def test_a_reply_loses_the_sentences_the_story_already_holds():
    """The held-out run's loop: from turn 14 every reply opened with this sentence, copied from the last one."""
    from engine.narrative.prose import drop_copied

    earlier = ("You're standing in the sea of a ship's sails, you've seen it on your horizon before... "
               "You look down at one small wooden bungalow.")
    reply = ("You're standing in the sea of a ship's sails, you've seen it on your horizon before... "
             "A rider in a red cloak gallops past. It rains.")
    assert drop_copied(reply, earlier) == ("A rider in a red cloak gallops past. It rains.", 1)
    assert drop_copied("It rains. It rains.", "It rains.") == ("It rains. It rains.", 0)  # too short to call a copy
    copy = "You look down at one small wooden bungalow."
    assert drop_copied(copy, earlier) == (copy, 0)  # nothing but copies: kept whole


def test_a_sentence_that_differs_only_in_a_number_is_not_a_copy():
    """A number is a fact the story states: the same sentence with another
    count is news, not a copy of the old one."""
    from engine.narrative.prose import drop_copied

    earlier = "You count the coins in the purse. You have 3 silver coins left in the purse."
    kept, dropped = drop_copied("You have 5 silver coins left in the purse. The innkeeper waits.", earlier)
    assert dropped == 0 and kept.startswith("You have 5 silver coins")
    kept, dropped = drop_copied("You have 3 silver coins left in the purse. The innkeeper waits.", earlier)
    assert dropped == 1 and kept == "The innkeeper waits."


def test_the_rules_drop_what_the_story_shown_already_holds_before_cutting():
    """hold_rules owns every change to a stored reply: a sentence the prompt's
    history already holds goes first, then the cut; the count is recorded."""
    from engine.narrative import hold_rules

    earlier = "The bell in the harbour tower rings twice across the water."
    kept, rules = hold_rules("The bell in the harbour tower rings twice across the water. A gull lands. It", earlier)
    assert kept == "A gull lands." and rules["dropped_copies"] == 1 and rules["tail"] == "It"
    kept, rules = hold_rules("The bell in the harbour tower rings twice across the water. A gull lands.")
    assert kept.startswith("The bell") and rules["dropped_copies"] == 0  # no story shown: nothing is a copy


@pytest.mark.parametrize(("kind", "line", "opening"), [
    ("player", "> You pick up the broken oar.", "You pick up the broken oar."),
    ("player", "> I light a candle in my room", "You light a candle in your room."),
    ("player", '> You say "I am lost."', 'You say "I am lost."'),  # speech keeps its own words
    ("player", "> I'm tired", "You're tired."),
    ("direction", "a storm breaks over the harbour", "A storm breaks over the harbour."),
    ("direction", "Make the storm break.", ""),  # an order to the narrator, not an event
    ("direction", "Introduce a stranger, please", ""),
    ("narrator", "The rain stops.", ""),
    (None, "", ""),
    ("player", ">   ", ""),
])
def test_the_opening_of_a_reply_tells_the_input_as_story(kind, line, opening):
    from engine.narrative import reply_opening

    assert reply_opening(kind, line) == opening


def test_a_reply_takes_up_what_the_input_brings_not_what_the_story_already_holds():
    from engine.narrative import takes_up

    line = "> You unfold the harbour master's letter."
    story = "Rain drums on the roofs of the harbour. The harbour master is away."
    assert takes_up("The harbour is grey.", line) is True  # any thing named counts without the story
    assert takes_up("The harbour is grey.", line, story) is False  # the harbour was there already
    assert takes_up("The letter is sealed with wax.", line, story) is True
    assert takes_up("The harbour is grey.", "> You look at the harbour.", story) is True  # nothing new named


def test_the_steer_words_are_the_new_things_as_spelled_and_singular():
    from engine.narrative import steer_words

    story = "Rain drums on the roofs of the harbour. The harbour master is away."
    assert steer_words("player", "> You unfold the harbour master's letter.", story) == ["letter"]
    assert steer_words("player", "> You search the boxes.") == ["boxes", "box"]
    assert steer_words("direction", "A storm breaks over the harbour.", story) == ["storm"]
    assert steer_words("player", "> You look at the harbour.", story) == ["harbour"]  # nothing new: all of it
    assert steer_words(None, "", story) == [] and steer_words("narrator", "The sea.") == []


def test_a_directions_verb_is_not_steered_towards():
    """Steered, "Fog rolls in" was answered with "rolls" and never "fog"."""
    from engine.narrative import steer_words

    assert steer_words("direction", "Fog rolls in from the quay.") == ["fog"]
    assert steer_words("direction", "A cart rattles past.") == ["cart"]
    assert steer_words("player", "> You follow the rolls of cloth.") == ["rolls", "roll"]  # an action as named


def test_the_steer_is_towards_each_phrases_thing_not_its_modifiers():
    """The steer stops at the first steered word written: a written "broken"
    or "harbour" had stopped it short of the oar or the letter. A direction
    is steered to its subject alone ("sea" had answered "Fog rolls in")."""
    from engine.narrative import named_things, steer_words

    assert steer_words("player", "> You unfold the harbour master's letter.") == ["letter"]
    assert steer_words("player", "> You pick up the broken oar.") == ["oar"]
    assert steer_words("player", "> You climb the cliff path to the lighthouse.") == ["path", "lighthouse"]
    assert steer_words("direction", "A black cat follows you past the old mill.") == ["cat"]
    assert steer_words("direction", "Thunder shakes the windows.") == ["thunder"]
    # What counts as taken up is unchanged: every word of the phrase.
    assert named_things("> You pick up the broken oar.") == ["broken", "oar"]
