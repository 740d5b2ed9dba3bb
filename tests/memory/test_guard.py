"""The memory guard: a memory that loses the block's facts, narrates as "I"
or talks about the prompt is replaced by the block's own sentences."""
import itertools

from narrators import TaskNarrator

from engine import Workbench
from engine.memory.guard import check, extractive, salient, third_person

BLOCK = [
    "> I cross the ford and look for someone to mend my buckle.",
    "At the ford you meet the smith of Greyford, a broad woman named Thora Vance, who mends your buckle for two "
    "coppers. The wind drops and the air turns mild.",
    "> I walk on along the salt road.",
    "A thin rain drifts in from the west. Carters pass with loads of turnips and say little. The hours pass quietly.",
    "> I rest for a while near Millbridge.",
    "Mist hangs low over the ground. A dog barks somewhere behind a hedge. You press on as the day wears away.",
]


def test_salient_items_are_names_numbers_and_quotes_not_sentence_starters():
    items = salient(["The password is 'gull and anchor'. You meet Thora Vance at Greyford in 1184."])
    assert {"Thora Vance", "Greyford", "1184", "gull and anchor"} <= set(items)
    assert not {"The", "You"} & set(items)


def test_the_weak_models_memories_are_rejected_with_a_reason():
    assert not check("I am the protagonist, I travel on (7).", BLOCK).ok
    assert not check("The story is about Thora Vance of Greyford near Millbridge.", BLOCK).ok
    assert "you" in check("You met Thora Vance of Greyford near Millbridge.", BLOCK).reason
    assert "prompt" in check("The story excerpt is a continuation of the cast list, and it goes on.", BLOCK).reason
    dropped = check("Wren walked a long way in the rain and rested by a hedge.", BLOCK)
    assert not dropped.ok and "kept 0" in dropped.reason


def test_a_memory_that_keeps_the_names_stands():
    verdict = check("Wren met Thora Vance, the smith of Greyford, who mends buckles near Millbridge.", BLOCK, "Wren")
    assert verdict.ok, verdict.reason
    invented = check("The pedlar Thora Vance sold Wren a magic sword at Greyford near Millbridge.", BLOCK, "Wren")
    assert not invented.ok and "words are in the story" in invented.reason


def test_quoted_speech_in_first_person_is_not_narration_as_i():
    assert check('Thora Vance of Greyford told Wren "I mend buckles for two coppers" near Millbridge.', BLOCK,
                 "Wren").ok


def test_extractive_memory_keeps_the_planted_fact_over_filler():
    memory = extractive(BLOCK, 50, "Wren")
    assert "Thora Vance" in memory and "Greyford" in memory
    assert "turnips" not in memory  # filler loses to the line that named someone
    assert len(memory.split()) <= 50 and "you " not in f" {memory.lower()} "


def test_third_person_names_the_protagonist_outside_quotes():
    assert third_person('You are tired. "You there!" you hear.', "Wren") == 'Wren is tired. "You there!" Wren hear.'


class StoryAndMemories(TaskNarrator):
    """Narrates BLOCK's narration lines in turn; memory replies from a list."""

    def __init__(self, memories):
        super().__init__(memory_reply=lambda excerpt: next(memories, "The story excerpt says nothing."))
        self.story = [line for line in BLOCK if not line.startswith(">")]

    def execute(self, prompt):
        if prompt.task != "narrate":
            yield from super().execute(prompt)
            return
        from engine.providers import Text

        self.turns += 1
        yield Text(self.story[(self.turns - 1) % len(self.story)])


def test_the_bank_replaces_a_rejected_memory_and_keeps_a_good_one(db_path):
    good = "Wren met Thora Vance, the smith of Greyford, who mends buckles for two coppers."
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=StoryAndMemories(iter(["I am the protagonist, I travel on.", good])), embedder="none",
                 auto_summarize=False)
    camp = wb.new_campaign("Salt", protagonist="Wren", opening="Dawn on the salt road.")
    for line in ["cross the ford", "walk on", "rest", "look around", "wait", "sleep", "wake", "go on", "sit",
                 "stand"]:
        camp.act(line)
    frame = camp.memories.frame()
    blocks = [list(frame[frame["depth"] == d]["text"]) for d in sorted(set(frame["depth"]))]
    assert len(blocks) >= 2
    # The rejected reply is replaced by facts made from the block's own lines, in the third person.
    assert any("Thora Vance" in m for m in blocks[0]) and not any(m.startswith("I ") for m in blocks[0])
    assert "Wren meets the smith of Greyford" in " ".join(blocks[0])
    assert good in blocks[1]  # the model's fact stands


FACT = "the brass key lies under the ninth stair of the lighthouse"


def test_a_memory_must_keep_what_the_narrators_state_events_recorded():
    from engine.memory.guard import fact_kept, state_facts

    facts = state_facts([{"type": "add_fact", "fact_id": "key", "predicate": FACT},
                         {"type": "set_possession", "item": "iron_lantern", "owner": "wren"},
                         {"type": "create_entity", "entity": "wren", "name": "Wren"}])  # a name, not a fact
    assert facts == [FACT, "wren holds iron lantern"]
    # Otherwise acceptable (names kept, grounded), but the recorded fact is lost: rejected, and said why.
    verdict = check("Wren met Thora Vance, the smith of Greyford, who mends buckles near Millbridge.", BLOCK,
                    "Wren", facts[:1])
    assert not verdict.ok and "narrator recorded" in verdict.reason
    assert check("Wren met Thora Vance, the smith of Greyford near Millbridge; the brass key lies under the ninth "
                 "stair of the lighthouse.", BLOCK, "Wren", facts[:1]).ok
    assert fact_kept("Ada owes the guild nine marks.", "Ada owes the guild of apothecaries nine marks in dues")
    assert not fact_kept("Ada paid the guild.", "Ada owes the guild of apothecaries nine marks in dues")


def test_the_extractive_memory_states_the_recorded_facts_first_within_its_words():
    memory = extractive(BLOCK, 50, "Wren", facts=[FACT])
    assert memory.startswith("The brass key lies under the ninth stair of the lighthouse.")
    assert "Thora Vance" in memory and len(memory.split()) <= 50  # the block's own best line still fits


class FactNarrator(StoryAndMemories):
    """BLOCK's narration, the second reply recording FACT in a state block the
    prose never states; every memory reply keeps the block's names but not FACT."""

    def execute(self, prompt):
        if prompt.task != "narrate":
            yield from super().execute(prompt)
            return
        from engine.providers import Text

        self.turns += 1
        prose = self.story[(self.turns - 1) % len(self.story)]
        if self.turns == 2:
            prose += ('\n\n```state\n{"events": [{"type": "add_fact", "fact_id": "key", "predicate": "' + FACT
                      + '"}]}\n```')
        yield Text(prose)


def test_state_events_reach_the_memory_of_their_block(db_path):
    good = "Wren met Thora Vance, the smith of Greyford, who mends buckles for two coppers near Millbridge."
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=FactNarrator(itertools.repeat(good)), embedder="none", auto_summarize=False)
    camp = wb.new_campaign("Salt", protagonist="Wren", opening="Dawn on the salt road.")
    for line in ["cross the ford", "walk on", "rest", "look around", "wait", "sleep", "wake", "go on"]:
        camp.act(line)
    assert any(e.get("type") == "add_fact" for e in camp.events()["event"])  # the event was written
    memories = camp.memories.frame()["text"].tolist()
    assert len(memories) >= 2
    assert "ninth stair" in memories[0].lower()  # the block with the event keeps its fact
    assert memories[1] == good  # a block without one keeps the model's memory that passes the guard


def test_the_readers_own_line_outweighs_the_narrators_inventions():
    # The release run's block, shortened: the clue is the reader's line; the 135M narrator's prose
    # around it carries a year and a name it made up, which would otherwise win the memory's words.
    block = ["> I hide the brass key under the ninth stair of the lighthouse.",
             "Once upon a time, in the year 2073, the keeper vanished into an endless fog. The scene was not any "
             "ordinary lighthouse in 2073; it had been a beacon over the island. Auntie Rose came to the island "
             "with her family in 2073, but she never returned to Gull Point.",
             "> I read the storm log.",
             "The storm log of 2073 was kept by Auntie Rose, who wrote of Gull Point every night of the year."]
    memory = extractive(block, 30, "Wren")
    assert "Wren hide the brass key under the ninth stair" in memory and len(memory.split()) <= 30


def test_a_sentence_repeated_across_sources_is_kept_once():
    # A summary's sources are memories, and extractive memories repeat the story's lines.
    memories = ["Wren met Thora Vance at Greyford. The hours pass quietly."] * 5 + ["Pell keeps the ferry at Ashwater."]
    summary = extractive(memories, 250, "Wren")
    assert summary.count("Thora Vance") == 1 and "Pell" in summary
