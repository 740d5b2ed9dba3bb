"""The packet is built from the narrative state alone (MED-08, NOM-05 to NOM-07).

Each exclusion has its positive control: the same material demonstrably
reaches the narrator's prompt, so its absence from the packet is the packet's
rule and not an empty source."""
from __future__ import annotations

import json

import pytest
from narrators import ScriptedNarrator
from office import block, build

SENTINEL = "ZARQUON-CONCEALED-OBSERVER-7731"
SECRET = (f"# Observer\n\nA concealed observer watches the office from behind the north wall panelling. "
          f"Code name {SENTINEL}.\n")
HANDBOOK = "# Handbook\n\nThe building was refurbished in the spring; the north wall panelling is new.\n"
MEMORY = "Roger once fixed the fax machine with a paperclip."
SUMMARY_TEXT = "Bill distrusts the quarterly forecast and says so at every meeting."


def prompt_of(camp, words: str) -> str:
    report = camp.context(words)
    return report["system"] + "\n" + report["story"]


def packet_text(camp) -> str:
    return json.dumps(camp.scene(), ensure_ascii=False)


@pytest.fixture
def sources(wb):
    camp = build(wb)
    camp.knowledge.add("observer.md", SECRET.encode(), classification="canon", visibility="hidden",
                       always_include=True)
    camp.knowledge.add("handbook.md", HANDBOOK.encode(), classification="canon", always_include=True)
    camp.memories.add(MEMORY, pinned=True)
    camp.set_summary(SUMMARY_TEXT)
    camp.act("wait")  # the turn's derived work embeds the memory, so recall can offer it
    return camp


def test_the_controls_every_source_reaches_the_narrator(sources):
    prompt = prompt_of(sources, "look at the north wall panelling of the office")
    for words in (SENTINEL, "refurbished", "fax machine", "quarterly forecast", "air conditioning"):
        assert words in prompt, words


def test_a_hidden_source_never_reaches_the_packet(sources):
    """NOM-05: narrator-only material is not drawn."""
    text = packet_text(sources)
    assert SENTINEL not in text and "concealed observer" not in text.lower()


def test_a_visible_source_is_excluded_too_by_class_not_by_visibility(sources):
    """NOM-06 / MED-08: no imported knowledge at all."""
    assert "refurbished" not in packet_text(sources)


def test_memories_summaries_and_the_transcript_stay_out(sources):
    """MED-08: the packet is the accepted state, not what was said or remembered."""
    text = packet_text(sources).lower()
    for words in ("fax machine", "quarterly forecast", "air conditioning", "printer", "long table", "arrive at"):
        assert words not in text, words


def test_facts_relationships_and_threads_stay_out(sources, wb):
    events = [{"type": "add_fact", "subject": "bill", "predicate": "owes money to the canteen"},
              {"type": "add_relationship", "source": "alice", "target": "roger", "label": "quietly resents"},
              {"type": "open_thread", "thread": "audit", "title": "Who leaked the budget?"}]
    wb.configure(narrator=ScriptedNarrator([block("Nobody speaks for a moment.", events)]))
    sources.act("wait")
    prompt = prompt_of(sources, "wait")  # the control: all three are accepted story the narrator is shown
    assert "canteen" in prompt and "quietly resents" in prompt and "leaked the budget" in prompt
    text = packet_text(sources)
    for words in ("canteen", "quietly resents", "leaked the budget"):
        assert words not in text, words


def test_what_the_story_accepts_does_reach_the_packet_and_the_secret_still_does_not(sources, wb):
    """NOM-07: an observer the story itself introduces is depicted; the code name is not."""
    events = [{"type": "create_entity", "entity": "observer", "entity_type": "character", "name": "The observer"},
              {"type": "set_scene", "summary": "The observer steps out of the panelling.", "location": "office",
               "present": ["bill", "observer"]}]
    wb.configure(narrator=ScriptedNarrator([block("A panel slides open.", events)]))
    sources.act("look at the north wall panelling of the office")
    packet = sources.scene()
    assert [c["name"] for c in packet["characters"]] == ["Bill", "The observer"]
    assert SENTINEL in prompt_of(sources, "look again")  # still the narrator's secret
    assert SENTINEL not in packet_text(sources)
