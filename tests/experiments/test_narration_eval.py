"""The narration evaluation's code on a scripted narrator whose replies break
the rules on purpose: the table shows each break before the engine's rules and
its repair after them."""
from narrators import ScriptedNarrator

from experiments import narration_eval as ev

REPLIES = [
    "I'm Grimjack, the tavern's former captain. The lantern swings and",  # first person, cut short
    "A voice answers from the dark.",
    '```state\n{"events": []}\n```',  # protocol only: asked again
    "The storm breaks over the harbour and rain lashes the quay.",
    "You find a rope coiled in the hut. The wind",
]


def test_the_table_shows_rule_breaks_before_and_their_repair_after(tmp_path):
    steps = ev.SCRIPT[:4]
    frame, log = ev.play(tmp_path / "n.db", narrator=ScriptedNarrator(REPLIES), steps=steps, memory=False,
                         embedder="none", progress=False)
    assert list(frame["mode"]) == [s.mode for s in steps] and (frame["refused"] == "").all()
    first = frame.iloc[0]
    assert not first.second_person_before and first.second_person_after and first.repaired
    assert not first.ends_before and first.ends_after and first.cut
    assert first["tail"] == "The lantern swings and" and not first.uptake  # the lantern went with the cut part
    assert frame.iloc[2].uptake  # the storm direction was taken up
    s = ev.summarise(frame)
    assert s["second_person_before"] == 0.75 and s["second_person_after"] == 1.0
    assert s["ends_after"] == 1.0 and s["cut"] == 2 and s["asked_again"] == 1


def test_uptake_matches_forms_and_says_none_when_nothing_was_named():
    assert ev.took_up("Two wolves howl.", ("wolf",)) and ev.took_up("The lanterns glow.", ("lantern",))
    assert ev.took_up("It is quiet.", ("wolf",)) is False and ev.took_up("Anything.", ()) is None
    assert ev.took_up("The keeper's words echo.", ("keeper",))  # a possessive names its owner


def test_repeated_ngrams_count_what_an_earlier_reply_wrote():
    shares = ev.repeated_ngrams(["the cold wind blows hard", "the cold wind blows again", "something new entirely"])
    assert shares[0] == 0 and 0 < shares[1] < 1 and shares[2] == 0


def test_the_copied_share_is_of_the_replys_4grams_the_prompt_already_held():
    shown = "Rain drums on the slate roofs of Gull Harbour. The keeper is gone."
    assert ev.copied_share("Rain drums on the slate roofs of Gull Harbour.", shown) == 1.0
    # Of the reply's six 4-grams, "rain drums on the" and "drums on the slate" were shown.
    assert ev.copied_share("Rain drums on the slate, and a gull cries.", shown) == 2 / 6
    assert ev.copied_share("A gull cries.", shown) == 0.0  # under four words: nothing to copy


def test_memory_quality_scores_kept_items():
    log = [{"start": 1, "accepted": False, "reason": "x", "required": ["Thora Vance", "Greyford"],
            "raw": "Someone walked.", "kept": "Wren met Thora Vance at Greyford."}]
    q = ev.memory_quality(log)
    assert q.iloc[0].model_kept == 0 and q.iloc[0].stored_kept == 1


def test_prompt_memory_plays_on_the_engines_own_memory_and_summaries(tmp_path):
    """On the workbench's defaults the engine writes memories itself (a memory
    request after the story has 12 nodes) and the evaluation scores none."""
    narrator = ScriptedNarrator(["The tide turns and gulls cry over the quay."])
    frame, log = ev.play(tmp_path / "m.db", narrator=narrator, turns=8, prompt_memory=True, embedder="none",
                         progress=False)
    assert (frame["refused"] == "").all() and log == []
    assert any(p.task == "memory" for p in narrator.prompts)
    narrator = ScriptedNarrator(["The tide turns and gulls cry over the quay."])
    ev.play(tmp_path / "off.db", narrator=narrator, turns=8, memory=False, embedder="none", progress=False)
    assert not any(p.task == "memory" for p in narrator.prompts)  # off in the prompts by default
