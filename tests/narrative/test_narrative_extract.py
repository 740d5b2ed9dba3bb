import json

import pytest
from benchmarks.test_extract_speed import STACKED, fastest, hundred_kb

from engine.narrative import extract, render
from engine.narrative.events import vocabulary_for_prompt
from engine.narrative.extract import (
    EMIT_REMINDER,
    EMIT_RULE,
    LENGTH_HINT_OPENING,
    LENGTH_HINT_TAIL,
    RULES,
    split,
)


def rules_of(result):
    return [rule for rule, _ in result.removals]


def kept_verbatim(text):
    result = split(text)
    return result.prose == text.strip() and result.events is None and result.removals == []


# ------------------------------------------------------------ the prompt text

def test_emit_rule_carries_the_vocabulary_and_placeholder_ids():
    assert vocabulary_for_prompt() in EMIT_RULE
    assert "ABSOLUTE" in EMIT_RULE and "```state" in EMIT_RULE
    for placeholder in ("item-1", "character-1", "location-1"):
        assert placeholder in EMIT_RULE
    example = EMIT_RULE.split("```state\n")[-1].split("\n```")[0]
    assert [e["type"] for e in json.loads(example)["events"]] == ["set_possession", "set_current_location"]


def test_the_reminder_is_bracketed_and_recognised_when_parroted():
    assert EMIT_REMINDER.startswith("[") and EMIT_REMINDER.endswith("nothing changed.]")
    result = split("The gate shuts.\n" + EMIT_REMINDER)
    assert result.prose == "The gate shuts." and rules_of(result) == [extract.RULE_INSTRUCTION_TAIL]


def test_length_hint_words_match_the_builder():
    from engine.context import length

    assert LENGTH_HINT_OPENING == length.LENGTH_HINT_OPENING == "[Hard limit:"
    assert LENGTH_HINT_TAIL == length.LENGTH_HINT_TAIL
    for band in ("", "brief", "medium", "long"):
        hint = length.length_hint(800, band)
        result = split(f"The lamp gutters.\n{hint}")
        assert result.prose == "The lamp gutters.", band
        assert rules_of(result) == [extract.RULE_LENGTH_HINT]


def test_continue_phrase_is_still_in_the_provider_hint():
    from engine.providers import CONTINUE_HINT

    assert extract.CONTINUE_HINT_PHRASE in CONTINUE_HINT
    result = split(f"Rain.\n[{CONTINUE_HINT}]")
    assert result.prose == "Rain." and rules_of(result) == [extract.RULE_INSTRUCTION_TAIL]


def test_rule_ids_are_distinct_and_named():
    assert len(set(RULES)) == len(RULES)
    assert extract.RULE_EVENT_CALL == "event_call_line"
    assert extract.RULE_LENGTH_HINT == "echoed_length_hint"
    assert extract.RULE_SCENE_LINE == "rendered_scene_line"
    assert extract.RULE_EMPTY_FENCE == "empty_dangling_fence"
    assert extract.RULE_INSTRUCTION_TAIL == "echoed_instruction_tail"


# ------------------------------------------------------------ 1. ```state fences

def test_state_fence_is_the_proposal():
    result = split('Prose.\n```state\n{"events":[]}\n```')
    assert (result.prose, result.events, result.raw_block) == ("Prose.", [], '{"events":[]}')
    assert result.removals == [(extract.RULE_STATE_FENCE, '```state\n{"events":[]}\n```')]


def test_state_fence_may_run_straight_into_the_payload():
    result = split('Prose. ```state{"events": [{"type": "clear_possession", "item": "key"}]}```')
    assert result.prose == "Prose." and result.events == [{"type": "clear_possession", "item": "key"}]


def test_last_state_fence_wins_and_every_one_leaves():
    first = '```state\n{"events": [{"type": "clear_possession", "item": "a"}]}\n```'
    last = '```state\n{"events": [{"type": "clear_possession", "item": "b"}]}\n```'
    result = split(f"One.\n{first}\nTwo.\n{last}")
    assert result.prose == "One.\n\nTwo."
    assert result.events == [{"type": "clear_possession", "item": "b"}]
    assert rules_of(result) == [extract.RULE_STATE_FENCE] * 2


def test_unparseable_state_fence_still_leaves_and_is_recorded():
    result = split("Prose.\n```state\n{events: oops\n```")
    assert result.prose == "Prose." and result.events is None and result.raw_block == "{events: oops"


def test_tolerated_slips_in_a_block():
    trailing_comma = split('P.\n```state\n{"events": [{"type": "clear_possession", "item": "a"},],}\n```')
    assert trailing_comma.events == [{"type": "clear_possession", "item": "a"}]
    single_quotes = split("P.\n```state\n{'events': []}\n```")
    assert single_quotes.events == []
    note_after = split('P.\n```state\n{"events": []}\n(nothing happened)\n```')
    assert note_after.events == []


def test_a_state_block_mentioned_in_prose_is_not_a_fence():
    assert kept_verbatim("He wrote a ```state block here.")


# ------------------------------------------------------------ 2. ```json or bare fences

@pytest.mark.parametrize("label", ["json", "JSON", ""])
def test_json_or_bare_fence_holding_a_proposal_leaves(label):
    result = split(f'Prose.\n```{label}\n{{"events": [{{"type": "add_fact", "predicate": "x"}}]}}\n```')
    assert result.prose == "Prose." and result.events == [{"type": "add_fact", "predicate": "x"}]
    assert rules_of(result) == [extract.RULE_JSON_FENCE]


def test_a_single_known_event_in_a_fence_is_a_proposal():
    result = split('Prose.\n```json\n{"type": "set_scene", "summary": "Dusk"}\n```')
    assert result.events == [{"type": "set_scene", "summary": "Dusk"}]


def test_a_storys_own_code_block_stays():
    assert kept_verbatim('She typed:\n```json\n{"name": "Mara", "type": "pirate"}\n```\nThen she waited.')
    assert kept_verbatim("The screen read:\n```\nACCESS DENIED\n```\nShe swore.")


def test_a_labelled_code_block_before_a_proposal_keeps_its_pairing():
    result = split('Code:\n```python\nprint(1)\n```\nmore\n```json\n{"events": []}\n```')
    assert result.prose == "Code:\n```python\nprint(1)\n```\nmore" and result.events == []


# ------------------------------------------------------------ 3. trailing object

def test_trailing_object_that_is_a_proposal_leaves():
    result = split('He sleeps. {"events": [{"type": "add_fact", "predicate": "asleep"}]}')
    assert result.prose == "He sleeps." and result.events == [{"type": "add_fact", "predicate": "asleep"}]
    assert rules_of(result) == [extract.RULE_TRAILING_OBJECT]


def test_trailing_object_that_is_not_a_proposal_stays():
    assert kept_verbatim('The config said {"volume": 11}')
    assert kept_verbatim("The spell was {fire} and {ice}")


# ------------------------------------------------------------ 4. inline proposals

def test_quoted_multiline_proposal_mid_story_keeps_both_sides():
    text = ('Beat.\n\n> {\n>   "events": [\n>     {"type": "add_fact", "predicate": "x"}\n>   ]\n> }\n\n'
            "More story.")
    result = split(text)
    assert result.prose == "Beat.\n\nMore story."
    assert result.events == [{"type": "add_fact", "predicate": "x"}]
    assert ">" not in result.raw_block and json.loads(result.raw_block)["events"]
    assert rules_of(result) == [extract.RULE_INLINE_PROPOSAL]


def test_unfenced_proposal_under_a_state_heading_goes_with_the_heading():
    result = split('Beat.\n\n**State:**\n{"events": []}\n\nShe walks on.')
    assert result.prose == "Beat.\n\nShe walks on." and result.events == []


def test_last_inline_proposal_wins_and_every_one_leaves():
    text = ('A.\n{"events": [{"type": "clear_possession", "item": "a"}]}\nB.\n'
            '> {"events": [{"type": "clear_possession", "item": "b"}]}\nC.')
    result = split(text)
    assert result.prose == "A.\nB.\nC." and result.events[0]["item"] == "b"


def test_a_nested_event_is_never_taken_as_the_whole_proposal():
    text = ('Beat.\n{"events": [\n  {"type": "add_fact", "predicate": "x"},\n'
            '  {"type": "add_fact", "predicate": "y"}\n]}\nShe waits.')
    result = split(text)
    assert result.prose == "Beat.\nShe waits." and [e["predicate"] for e in result.events] == ["x", "y"]
    assert rules_of(result) == [extract.RULE_INLINE_PROPOSAL]


@pytest.mark.parametrize(
    "text",
    [
        'She typed\n> {"name": "Mara"} and pressed enter.',
        '> {"name": "Mara"}\nand pressed enter.',
        'The sign read {"events": "tonight only"} in red letters.',
        '{"events": []} was all the screen showed, and she laughed.',
    ],
)
def test_objects_that_are_not_on_their_own_lines_or_not_proposals_stay(text):
    assert kept_verbatim(text)


# ------------------------------------------------------------ cleanup rules: leak and look-alike

def test_event_call_line_leaves():
    result = split('Story.\n> set_possession(silver-key, "alice")\nMore.')
    assert result.prose == "Story.\nMore."
    assert result.removals == [(extract.RULE_EVENT_CALL, '> set_possession(silver-key, "alice")')]
    assert split("Story.\nSET_SCENE (dusk)\nMore.").prose == "Story.\nMore."


def test_call_shaped_story_lines_stay():
    assert kept_verbatim("Story.\nopen_door(north)\nMore.")
    assert kept_verbatim("Story.\n```\nset_possession(a, b)\n```\nMore.")
    assert kept_verbatim("She muttered set_possession(a, b) under her breath.")


def test_pasted_state_section_leaves():
    paste = "\n\n".join([
        "Scene: The hall (at Old Abbey)",
        "Who and what exists:\n  mara: Mara (character)",
        "Held:\n  Silver key — Mara",
        "Established:\n  fact-1: the bells are silent",
        "No longer true — do not treat these as established:\n  fact-2: x (withdrawn: y)",
        "Between them:\n  Mara — trusts — Aldric",
        "Still open:\n  who-rang: Who rang the bells?",
    ])
    result = split(f"Mara listens.\n\n{paste}")
    assert result.prose == "Mara listens." and result.events is None and result.raw_block == ""
    assert rules_of(result) == [extract.RULE_PASTED_STATE]


@pytest.mark.parametrize(
    "block",
    [
        "Who and what exists:\nHeld:",  # two headings
        "Scene: Night\n\nHeld:",  # a heading under a scene line
        "## Established:\n  The clue is in the well.",  # a heading with an indented entry
        "**Held:**\n  key — Mara",
        "> Who and what exists:\n>   mara: Mara",
    ],
)
def test_self_made_sections_leave_and_the_story_either_side_stays(block):
    result = split(f"Story.\n\n{block}\n\nMore story.")
    assert result.prose == "Story.\n\nMore story."
    assert rules_of(result) == [extract.RULE_PASTED_STATE]


def test_every_heading_the_renderer_writes_is_recognised():
    for heading in render.SECTION_HEADINGS:
        assert split(f"Story.\n{heading}\n  an entry\nMore.").prose == "Story.\nMore."


def test_a_lone_heading_followed_by_prose_stays():
    assert kept_verbatim("The notice read:\nHeld:\nnothing at all.")
    assert kept_verbatim("Established: 1802, the inn had seen worse.")


def test_echoed_length_hint_leaves():
    hint = "[Hard limit: this turn must not exceed 200 words. Finish and append the state block.]"
    result = split(f"Story.\n{hint}")
    assert result.prose == "Story." and result.removals == [(extract.RULE_LENGTH_HINT, hint)]
    assert split("Story. [Hard limit: your turn must not run past 90 words").prose == "Story."


def test_an_in_world_hard_limit_stays():
    assert kept_verbatim("The sign said [Hard limit: forty days]")
    assert kept_verbatim("The contract's last line: [Hard limit: forty days")


@pytest.mark.parametrize(
    "tail",
    [
        "[Reminder: end your reply with a ```state block whose events list says what changed.]",
        "[Continue the story directly.",
        "[Remember to add the state block and its events list]",
        "[You may stop here. Write only its next passage, nothing else.]",
        "[```",
    ],
)
def test_echoed_instruction_tails_leave(tail):
    result = split(f"Story.\n{tail}")
    assert result.prose == "Story." and rules_of(result) == [extract.RULE_INSTRUCTION_TAIL]


def test_a_hint_shaped_bracket_goes_only_above_an_echoed_instruction():
    result = split("Story.\n[Hard limit: your next turn]\n[Reminder: add the block]")
    assert result.prose == "Story."
    assert rules_of(result) == [extract.RULE_INSTRUCTION_TAIL] * 2


@pytest.mark.parametrize(
    "text",
    ["Story.\n[continue at your own risk", "He read [the reminder was torn]", "Notes: [see state block 4]"],
)
def test_story_brackets_stay(text):
    assert kept_verbatim(text)


def test_dangling_state_fence_always_leaves():
    result = split('Story.\n```state\n{"events": [')
    assert result.prose == "Story." and result.events is None
    assert result.raw_block == '```state\n{"events": ['
    assert rules_of(result) == [extract.RULE_DANGLING_STATE]
    assert split("Story.\n```state").prose == "Story."


def test_dangling_json_fence_leaves_only_when_it_is_ours():
    assert split('Story.\n```json\n{"ev').prose == "Story."
    assert rules_of(split('Story.\n```json\n{"type": "set_scene", "summ')) == [extract.RULE_DANGLING_JSON]
    assert kept_verbatim('Story.\n```json\n{"name": 1')


@pytest.mark.parametrize(
    "tail",
    [
        '{"events": [\n  {"type": "add_fact", "predicate": "x"},\n  {"type": "set_scene", "summary": "y',
        '{"events": [{"type": "add_fact", "predicate": "x"}]',  # only the last brace missing
        '> {"events": [\n>   {"type": "add_fact", "predicate": "x"},',
        '{\n  "events": [\n    {"type": "add_fact", "predicate": "x"}\n  ]',
    ],
)
def test_truncated_object_is_cut_at_the_outer_brace(tail):
    result = split(f"Story.\n{tail}")
    assert result.prose == "Story." and result.events is None and result.raw_block
    assert extract.RULE_TRUNCATED_OBJECT in rules_of(result)


def test_state_heading_above_a_truncated_object_goes_too():
    result = split('Story.\nState\n{"events": [{"type": "add_fact", "pred')
    assert result.prose == "Story."
    assert rules_of(result) == [extract.RULE_TRUNCATED_OBJECT, extract.RULE_STATE_HEADING]


def test_unfinished_story_braces_stay():
    assert kept_verbatim("Story ends with {")
    assert kept_verbatim('He typed {"name":')
    assert kept_verbatim('Story.\n{"name": "Mara", "age"')
    assert kept_verbatim("Story.\n{ the brace in the margin\nand more")


def test_trailing_state_heading_and_bare_quote_marker_leave():
    assert split("Story.\nState").removals == [(extract.RULE_STATE_HEADING, "State")]
    assert split("Story.\n### State:").prose == "Story."
    assert split("Story.\n>").removals == [(extract.RULE_QUOTE_MARKER, ">")]


def test_state_and_quotes_in_story_stay():
    assert kept_verbatim("State\nof the union was grim.")
    assert kept_verbatim("> You open the door.\nThe hinge creaks.")
    assert kept_verbatim("State")


def test_empty_dangling_fence_leaves_only_as_an_opener():
    assert split("Story.\n```json").removals == [(extract.RULE_EMPTY_FENCE, "```json")]
    assert split("Story.\n```").prose == "Story."
    assert kept_verbatim("Code:\n```\nx\n```")


def test_rendered_scene_line_leaves():
    result = split("Story.\nScene: The office (at Office)")
    assert result.prose == "Story." and rules_of(result) == [extract.RULE_SCENE_LINE]
    after_block = split('Story.\nScene: Night.\n```state\n{"events": []}\n```')
    assert after_block.prose == "Story." and extract.RULE_SCENE_LINE in rules_of(after_block)


def test_screenplay_scene_lines_stay():
    assert kept_verbatim("Story.\nScene: Night.")
    assert kept_verbatim("Scene: Night.\nThe rain falls.")
    assert kept_verbatim("Scene: The office (at Office)")  # the whole reply is never cut away


def test_tail_cleanup_repeats_until_stable():
    text = ('Story.\nState\n{"events": [{"type": "add_fact", "predicate": "x"\n'
            "[Reminder: put the events list in the state block]")
    result = split(text)
    assert result.prose == "Story."
    assert set(rules_of(result)) == {extract.RULE_INSTRUCTION_TAIL, extract.RULE_TRUNCATED_OBJECT,
                                     extract.RULE_STATE_HEADING}


# ------------------------------------------------------------ combined and audit

def test_paste_followed_by_a_block_parses_the_block():
    paste = "Scene: Dusk\n\nWho and what exists:\n  mara: Mara (character)\n\nHeld:\n  Key — Mara"
    for block in ('State\n{"events": []}', '> {"events": []}', '```state\n{"events": []}\n```'):
        result = split(f"Mara listens.\n\n{paste}\n\n{block}")
        assert result.prose == "Mara listens." and result.events == [], block


def test_raw_block_for_replies_with_no_proposal():
    assert split("Plain story.").raw_block == ""
    assert split("Story.\n[Reminder: add the state block and events list]").raw_block.startswith("[Reminder")
    assert split("Story.\n\nWho and what exists:\nHeld:").raw_block == ""


def test_split_is_stable_on_its_own_output():
    samples = [
        'A.\n> set_scene(x)\nB.\nState\n{"events": []}\n\nHeld:\n  k — m\n[Reminder: state block, events list]',
        'A.\n```state\n{"events": []}\n```\nScene: x (at Y)',
        'A.\n```json\n{"ev',
    ]
    for text in samples:
        once = split(text).prose
        assert kept_verbatim(once), text


def test_extraction_is_frozen_and_safe_on_empty_input():
    result = split("")
    assert (result.prose, result.events, result.raw_block, result.removals) == ("", None, "", [])
    with pytest.raises(AttributeError):
        result.prose = "x"
    assert split(None).prose == ""


@pytest.mark.parametrize(
    "text",
    [
        "{ " * 3000 + "}",
        "\n".join(["> {"] * 2000),
        "\n".join(['{"a": 1'] * 2000),
        "\n".join(['{"a": 1} said he'] * 2000),
        "Held:\n" * 3000,
        "```\n" * 3000,
    ],
)
def test_brace_heavy_replies_stay_fast(text):
    import time

    started = time.perf_counter()
    split(text)
    assert time.perf_counter() - started < 0.5  # scanning afresh per brace took 3 s here


# ------------------------------------------------------------ cost: linear in the reply
# The 100 KB targets are benchmarks too: tests/benchmarks/test_extract_speed.py,
# which holds the table of stacked leftovers.

@pytest.mark.parametrize("unit", STACKED.values(), ids=STACKED.keys())
def test_stacked_leftovers_cost_linear_time(unit):
    """Four times the text costs about four times the time (a quadratic cost
    would be sixteen), and 100 KB stays far from the seconds a rescan cost. The
    50 ms target is `make bench`'s (tests/benchmarks/test_extract_speed.py):
    held here it failed under a model run on the other core (137 ms, while
    12-22 ms idle), which says nothing about the code."""
    small, large = hundred_kb(unit), "Story.\n" + unit * (400_000 // len(unit))
    small_time, large_time = fastest(small, runs=5), fastest(large, runs=5)
    assert small_time < 0.5
    # The bound sits halfway between linear (4x) and quadratic (16x) on a log
    # scale. At twice the text with a 3x bound, a CI machine timed 3.5x on a
    # linear case (23 ms, 82 ms): one slow run is the size of the margin. Under
    # 10 ms jitter is the size of the figure itself, hence the floor.
    assert large_time < 8.0 * max(small_time, 0.01)


def test_the_restated_input_is_recognised_when_parroted():
    from engine.context import builder

    assert extract.RESTATED_OPENING == builder.RESTATED_OPENING
    line = builder.restated(builder.Line("player", "> You light the lantern.", 3))
    result = split("The gate shuts.\n" + line)
    assert result.prose == "The gate shuts." and rules_of(result) == [extract.RULE_INSTRUCTION_TAIL]


def test_the_short_rule_keeps_every_event_in_the_form_the_parser_reads():
    from engine.context import tokens
    from engine.narrative import apply, emit_rule
    from engine.narrative.events import SPECS

    short = extract.EMIT_RULE_SHORT
    objects = [json.loads(line) for line in vocabulary_for_prompt(compact=True).splitlines()]
    assert [o["type"] for o in objects] == list(SPECS) and vocabulary_for_prompt(compact=True) in short
    assert "```state" in short and tokens.count(short) < tokens.count(EMIT_RULE) / 2  # 227 of 529
    assert emit_rule(4096) == short and emit_rule(8192) == short
    assert emit_rule(16384) == EMIT_RULE and emit_rule(None) == EMIT_RULE
    # A reply written to the short rule is read and applied like one written to the full rule.
    reply = ('The smith hands you the key.\n```state\n{"events": [{"type":"create_entity","entity":"thora",'
             '"name":"Thora"},{"type":"create_entity","entity":"key","name":"Iron key"},'
             '{"type":"set_possession","item":"key","owner":"thora"}]}\n```')
    found = split(reply)
    assert found.prose == "The smith hands you the key." and len(found.events) == 3
    outcome = apply({}, found.events, source="narrator")
    assert not outcome.rejected and len(outcome.accepted) == 3


@pytest.mark.parametrize(("reply", "prose", "label"), [
    ("The next passage is: > You're standing by the quay. Gulls cry.", "You're standing by the quay. Gulls cry.",
     "The next passage is: >"),
    ("Here is the next part of the story:\nThe bell rings.", "The bell rings.", "Here is the next part of the story:"),
])
def test_a_reply_that_announces_itself_keeps_only_its_story(reply, prose, label):
    result = extract.split(reply)
    assert result.prose == prose
    assert result.removals == [(extract.RULE_LEADING_LABEL, label)]


@pytest.mark.parametrize("reply", [
    "The next passage opens slowly as gulls cry.",  # no label: a sentence that begins so
    "Rain falls. > You wait.",  # a marker later in the reply is not its opening
    "The next passage is:",  # a label with no story after it is left for the other rules
])
def test_story_that_only_looks_like_a_label_is_kept(reply):
    assert extract.RULE_LEADING_LABEL not in rules_of(extract.split(reply))
