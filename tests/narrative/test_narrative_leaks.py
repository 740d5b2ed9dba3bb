import pytest

from engine.narrative import count_leaks
from engine.narrative.extract import RULE_PASTED_STATE, RULE_TRAILING_OBJECT

# Ids 1 and 2 are clean narration (2 is a story's own lone "Held:"), 3-5 leak
# three different ways, and 6 is the player's line, which is never judged.
FIXTURE = [
    (1, "narrator", "The rain eases."),
    (2, "narrator", "The notice read:\nHeld:\nnothing at all."),
    (3, "narrator", "Mara listens.\n\nWho and what exists:\n  mara: Mara"),
    (4, "narrator", 'The door shuts.\n\n> {"events": []}'),
    (5, "narrator", "She nods.\n\n## Established:\n  The clue is under the third stone."),
    (6, "player", '> I type {"events": []} into the terminal.'),
]
EXPECTED = {"ai": 5, "leaking": 3, "ids": [3, 4, 5]}


def subset(result):
    return {key: result[key] for key in EXPECTED}


def test_bundle_of_nodes():
    bundle = {"nodes": [{"id": i, "kind": kind, "text": text} for i, kind, text in FIXTURE]}
    result = count_leaks(bundle)
    assert subset(result) == EXPECTED
    assert [e["id"] for e in result["examples"]] == [3, 4, 5]
    assert [e["rule"] for e in result["examples"]] == [RULE_PASTED_STATE, RULE_TRAILING_OBJECT, RULE_PASTED_STATE]
    assert result["examples"][0]["text"].startswith("Who and what exists:")


def test_pairs_and_a_store_with_stored_replies():
    pairs = [(i, text) for i, kind, text in FIXTURE if kind == "narrator"]
    assert subset(count_leaks(pairs)) == EXPECTED
    assert subset(count_leaks(iter(pairs))) == EXPECTED

    class Store:
        def stored_replies(self):
            return pairs

    assert subset(count_leaks(Store())) == EXPECTED


def test_a_reply_still_carrying_a_block_leaks():
    result = count_leaks([(7, 'Rain.\n```state\n{"events": []}\n```'), (8, "Rain.")])
    assert result["ids"] == [7] and result["examples"][0]["rule"] == "state_fence"


def test_examples_are_capped_and_ids_sorted():
    pairs = [(i, f"Story {i}.\nState") for i in range(9, 0, -1)]
    result = count_leaks(pairs)
    assert result["leaking"] == 9 and result["ids"] == list(range(1, 10)) and len(result["examples"]) == 5


@pytest.mark.parametrize("source", [[], {"nodes": []}, {}, {"nodes": [None, {"kind": "narrator"}]}])
def test_empty_or_odd_sources(source):
    result = count_leaks(source)
    assert result["leaking"] == 0 and result["ids"] == [] and result["examples"] == []


def test_mixed_id_kinds_still_sort():
    assert count_leaks([("b", "x\nState"), (2, "y\nState")])["ids"] == [2, "b"]
