"""Memories are facts: a named speaker's "I" becomes the name, the one spoken
to replaces "you", a relative day is written out, and a memory is rarely a
sentence copied."""
from datetime import date

from engine.memory.facts import copies, facts_of, said_by, third_person_of
from engine.memory.when import Stamp, advance, resolve, stated

MAY_8 = Stamp("8 May 2023", date(2023, 5, 8))


def test_a_speakers_first_person_is_told_about_them_with_the_verb_agreeing():
    assert third_person_of("I just love my kids and we go camping", "Melanie") == \
        "Melanie just loves Melanie's kids and Melanie goes camping"
    assert third_person_of("You are brave and I admire you", "Melanie", "Caroline") == \
        "Caroline is brave and Melanie admires Caroline"
    assert third_person_of("I owe you nine marks", "Mara") is None  # nobody known to be spoken to: dropped


def test_a_conversations_facts_name_the_speaker_and_carry_the_date():
    lines = [said_by(1, "player", '> Caroline: "I went to the LGBTQ support group yesterday. So powerful!"', "Wren",
                     MAY_8),
             said_by(2, "narrator", 'Melanie: "Wow! I love painting sunsets by the lake. Have you been there?"',
                     "Wren", MAY_8),
             said_by(3, "player", '> Caroline: "I\'m researching adoption agencies."', "Wren", MAY_8)]
    facts = facts_of(lines, "Wren")
    texts = [f.text for f in facts]
    assert "Caroline went to the LGBTQ support group yesterday (7 May 2023)." in texts
    assert "Melanie loves painting sunsets by the lake (8 May 2023)." in texts
    assert "Caroline is researching adoption agencies (8 May 2023)." in texts
    assert [(f.start, f.end) for f in facts] == [(1, 1), (2, 2), (3, 3)]  # each names its line
    assert copies(texts, [line.words for line in lines]) == 0


def test_narration_tells_the_protagonist_by_name():
    line = said_by(4, "narrator", "At the ford you meet the smith of Greyford, who mends your buckle.", "Wren")
    assert facts_of([line], "Wren")[0].text == "At the ford Wren meets the smith of Greyford, who mends Wren's buckle."


def test_time_is_set_by_a_dated_or_headed_line_and_moved_by_a_narrated_jump():
    assert stated("Session 3 — 1:56 pm on 8 May, 2023").label == "8 May 2023"
    assert stated('Caroline: "I was born on 3 May 1990."') is None  # speech, not the story's time
    assert stated("Day 4").label == "Day 4"
    morning = advance(MAY_8, "The next morning, the fog lifted over the quay.")
    assert morning.label == "9 May 2023"
    assert advance(None, "Three days later the rain stopped.").label == "three days later"
    assert advance(MAY_8, "The rain stopped.") is MAY_8
    assert resolve("I saw her last week and yesterday", MAY_8) == \
        "I saw her last week (the week before 8 May 2023) and yesterday (7 May 2023)"
