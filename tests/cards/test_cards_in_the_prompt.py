"""Cards are live lore: a card's text reaches the narrator when one of its keys
is in the recent story or the pending input, never otherwise, and each turn's
report says which card fired, where and by which key."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from narrators import ScriptedNarrator  # noqa: E402

from engine import Workbench  # noqa: E402

SECRET = "Mara buried her brother under the chapel floor."
LAW = "Nobody may leave Westhaven while the bells are silent."


@pytest.fixture
def played(tmp_path):
    narrator = ScriptedNarrator(["The rain keeps falling on the harbour.",
                                 "The innkeeper pours a drink without asking.",
                                 "Gulls cry over the empty quay.",
                                 "The tide turns.", "A cart rattles past.", "Night comes early."])
    wb = Workbench.open(tmp_path / "lore.db", background=False)
    wb.configure(narrator=narrator, embedder="none")
    camp = wb.new_campaign("Westhaven", protagonist="Ila", opening="The bells have not rung for three days.")
    yield wb, camp, narrator
    wb.close()


def _prompt(narrator) -> str:
    last = narrator.prompts[-1]
    return last.system + "\n" + last.story


def test_a_card_enters_the_prompt_only_while_its_key_is_in_the_scene(played):
    wb, camp, narrator = played
    camp.add_story_card("Mara", keys=["Mara"], entry=SECRET)
    camp.act("I walk to the harbour.")
    assert SECRET not in _prompt(narrator)                         # nobody named her
    first = camp.act("I ask about Mara.")
    assert SECRET in _prompt(narrator)                             # named in the input
    fired = first.report["knowledge"]["cards_fired"]
    assert [(c["title"], c["found_in"], c["key"]) for c in fired] == [("Mara", "input", "Mara")]
    used = [u for u in first.report["knowledge"]["used"] if u["passage_id"] < 0]
    assert used and used[0]["classification"] == "canon" and used[0]["filename"].startswith("story lore")  # its own
    camp.continue_story()
    assert SECRET in _prompt(narrator)                             # still in the last four story nodes
    for _ in range(4):
        camp.continue_story()
    assert SECRET not in _prompt(narrator)                         # the mention has left the scanned story
    assert not (camp.turn(camp.history()[-1].id).report.get("knowledge") or {}).get("cards_fired")


def test_a_constant_card_is_always_in_force_and_a_disabled_one_never(played):
    wb, camp, narrator = played
    camp.add_story_card("Quarantine", keys=[], entry=LAW, constant=True)
    card = camp.add_story_card("Mara", keys=["Mara"], entry=SECRET)
    camp.edit_story_card(card, enabled=False)
    camp.act("I ask about Mara.")
    assert LAW in _prompt(narrator) and SECRET not in _prompt(narrator)
    assert LAW in narrator.prompts[-1].system                      # always-in-force Canon sits in the system block
    assert camp.records()["tok_knowledge"].iloc[-1] > 0             # and is counted as knowledge


def test_a_campaign_without_cards_or_sources_has_no_knowledge_section(played):
    wb, camp, narrator = played
    turn = camp.act("I ask about Mara.")
    assert not (turn.report.get("knowledge") or {}).get("used")
    assert camp.records()["tok_knowledge"].iloc[-1] == 0
