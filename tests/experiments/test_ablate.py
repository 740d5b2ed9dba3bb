"""Ablation re-narrates a recorded turn's exact prompt with one section removed
or replaced, stores one row per narration, and never changes the story."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import census  # noqa: E402
from narrators import BagOfWordsEmbedder, CountingNarrator  # noqa: E402
from research_doubles import EchoNarrator  # noqa: E402

from engine import NotAllowed, Workbench  # noqa: E402
from experiments.ablate import BASELINE, ablate, load, variants  # noqa: E402

LORE = "The lighthouse keeper hides the boat keys under the third stair."


@pytest.fixture
def played(tmp_path):
    """A campaign whose last turn was shown knowledge, two memories and a summary."""
    wb = Workbench.open(tmp_path / "story.db", background=False)
    wb.configure(narrator=CountingNarrator(), embedder=BagOfWordsEmbedder(), auto_summarize=False)
    camp = wb.new_campaign("Cove", premise="A smugglers' cove.", protagonist="Ila", opening="The tide is out.")
    camp.act("walk to the lighthouse")
    camp.knowledge.add("coast.md", f"# The coast\n\n{LORE}\n", classification="canon", always_include=True)
    keep = camp.memories.add("Ila saw a lantern in the lighthouse window.", pinned=True)
    other = camp.memories.add("Ila owes the ferryman two coins.", pinned=True)
    camp.act("wait for the lamp")  # the turn's derived work embeds the new memories
    camp.set_summary("Ila came to the cove at low tide looking for the lighthouse keeper.")
    wb.configure(narrator=EchoNarrator("lighthouse"))
    turn = camp.act("knock on the lighthouse door")
    yield camp, turn, keep, other
    wb.close()


def test_the_unchanged_variant_is_exactly_the_prompt_the_turn_was_shown(played):
    camp, turn, *_ = played
    base = variants(turn.report)[0]
    assert base.name == BASELINE and base.removed_tokens == 0
    assert (base.system, base.story) == (turn.report["prompt"]["system"], turn.report["prompt"]["story"])


def test_removing_knowledge_changes_what_the_narrator_saw_and_nothing_in_the_story(played, tmp_path):
    camp, turn, *_ = played
    before = census(camp.workbench)
    store = tmp_path / "ablations.db"
    ab = ablate(camp, turn.id, remove=["knowledge"], samples=2, store=store, progress=False)
    assert census(camp.workbench) == before
    table = ab.side_by_side()
    assert list(table.columns) == [BASELINE, "without knowledge"] and list(table.index) == [1, 2]
    assert all("boat keys" in r for r in table[BASELINE]) and not any("boat keys" in r for r in table["without knowledge"])
    without = ab.prompts["without knowledge"]
    assert LORE not in without.system + without.story and without.removed_tokens > 0
    diff = ab.prompt_diff("without knowledge").splitlines()
    assert any(LORE in line for line in diff if line.startswith("-"))
    assert not [line for line in diff[2:] if line.startswith("+")]  # only taken away, nothing added
    assert "[-" in ab.reply_diff("without knowledge")
    summary = ab.summary()
    assert summary.loc[BASELINE, "similarity_to_unchanged"] == 1.0  # an echo narrator has no sampling noise
    assert summary.loc["without knowledge", "similarity_to_unchanged"] < 1.0
    stored = load(store)
    assert len(stored) == 4 and set(stored["variant"]) == {BASELINE, "without knowledge"}
    assert (stored["node_id"] == turn.id).all() and stored["experiment"].nunique() == 1


def test_one_memory_goes_and_the_other_stays(played, tmp_path):
    camp, turn, keep, other = played
    ab = ablate(camp, turn.id, remove=[f"memory:{keep}"], samples=1, store=tmp_path / "a.db", progress=False)
    prompt = ab.prompts[f"without memory:{keep}"].story
    assert "lantern in the lighthouse window" not in prompt and "two coins" in prompt
    assert "lantern in the lighthouse window" in ab.side_by_side()[BASELINE][1]
    # Appended to the same store, under a new experiment id.
    again = ablate(camp, turn.id, remove=["memories"], samples=1, store=tmp_path / "a.db", progress=False)
    assert "two coins" not in again.prompts["without memories"].story
    assert load(tmp_path / "a.db")["experiment"].nunique() == 2


def test_a_replaced_summary_is_what_the_narrator_reads(played, tmp_path):
    camp, turn, *_ = played
    ab = ablate(camp, turn.id, replace={"summary": "Story summary:\nIla is searching the lighthouse for a map."},
                samples=1, store=tmp_path / "a.db", progress=False)
    assert "searching the lighthouse for a map" in ab.side_by_side()["summary replaced"][1]
    assert "low tide" not in ab.prompts["summary replaced"].story


def test_what_cannot_be_ablated_is_refused_in_words(played, tmp_path):
    camp, turn, *_ = played
    with pytest.raises(NotAllowed, match="Unknown section 'weather'"):
        ablate(camp, turn.id, remove=["weather"], store=tmp_path / "a.db")
    with pytest.raises(NotAllowed, match="Memory 999 was not recalled"):
        ablate(camp, turn.id, remove=["memory:999"], store=tmp_path / "a.db")
    with pytest.raises(NotAllowed, match="Name something to ablate"):
        ablate(camp, turn.id, store=tmp_path / "a.db")
    with pytest.raises(NotAllowed, match="at least one sample"):
        ablate(camp, turn.id, remove=["knowledge"], samples=0, store=tmp_path / "a.db")
    assert not (tmp_path / "a.db").exists()


def test_ablation_through_the_loopback_server_sends_each_variant(played, tmp_path, fake_server):
    from engine.providers.openai import OpenAINarrator

    camp, turn, *_ = played
    narrator = OpenAINarrator(fake_server.base, "story-model")
    ab = ablate(camp, turn.id, remove=["knowledge"], samples=2, store=tmp_path / "a.db", narrator=narrator,
                progress=False)
    sent = [json.dumps(body) for method, path, body in fake_server.requests if path == "/v1/chat/completions"]
    assert len(sent) == 4
    assert sum("boat keys" in body for body in sent) == 2
    assert (ab.frame["reply"] == "The door opens.").all() and (ab.frame["prompt_tokens"] == 120).all()


def test_one_passage_goes_and_the_other_stays(played, tmp_path):
    camp, *_ = played
    camp.knowledge.add("tides.md", "# Tides\n\nThe lighthouse tide tables say the causeway floods at dusk.\n",
                       classification="canon", always_include=True)
    camp.knowledge.add("bells.md", "# Bells\n\nThe lighthouse bell rings twice when a ship is sighted.\n",
                       classification="canon", always_include=True)
    turn = camp.act("read the lighthouse notices")
    used = turn.report["knowledge"]["used"]
    flood = next(p["passage_id"] for p in used if "causeway floods" in p["text"])
    ab = ablate(camp, turn.id, remove=[f"passage:{flood}"], samples=1, store=tmp_path / "a.db", progress=False)
    prompt = ab.prompts[f"without passage:{flood}"]
    assert "causeway floods" not in prompt.system + prompt.story
    assert "bell rings twice" in prompt.system + prompt.story and LORE in prompt.system + prompt.story
    assert "causeway floods" not in ab.side_by_side()[f"without passage:{flood}"][1]
