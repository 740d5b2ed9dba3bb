"""Played-line recall scores a bounded set of lines: the newest
`recall_scan_lines` by cosine, and older ones only through the reader's
rarer words (at most `recall_pool` of them)."""
from dataclasses import replace

from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench, memory
from engine.search import DEFAULT
from engine.store import CampaignRow
from engine.story import StoryTree

PLANTED = "Pell the ferryman keeps a silver ring under the jetty."
FILLER = ["The road bends past hedges and an open gate.", "Rain fills the ditches with brown water.",
          "A cart rattles by; the driver nods and does not stop."]


def _played(tmp_path, turns=30):
    embedder = BagOfWordsEmbedder(64)
    wb = Workbench.open(tmp_path / "scan.db", background=False)
    wb.configure(narrator=ScriptedNarrator([PLANTED] + FILLER * turns), embedder=embedder, auto_summarize=False,
                 memory_enabled=False, state_protocol=False)
    camp = wb.new_campaign("Lanes", protagonist="Wren", opening="Wren sets out at dawn.")
    camp.act("I ask about the crossing")
    for i in range(turns):
        camp.act(f"walk on past milestone {i}")
    return wb, camp, embedder


def _recall(wb, camp, embedder, line, tuning):
    with wb.db.reading() as s:
        path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
        return memory.recall(s, camp.id, path, embedder, 5, line, tuning=tuning)


def test_an_old_line_is_reached_through_a_rare_word_and_the_scan_is_bounded(tmp_path):
    wb, camp, embedder = _played(tmp_path)
    narrow = replace(DEFAULT, recall_scan_lines=10, recall_floor=0.0)
    found = _recall(wb, camp, embedder, "Where does Pell keep the ring?", narrow)
    lines = found.report["units"]["line"]
    assert lines > 60 and found.report["lines_scanned"] <= 10 + narrow.recall_pool
    assert any(PLANTED in u["text"] for u in found.used)  # older than the ten scanned, held by "pell"
    plain = _recall(wb, camp, embedder, "I walk on along the road", narrow)
    assert plain.report["lines_scanned"] == 10  # no rare word: the newest ten only
    assert not any(PLANTED in u["text"] for u in plain.used)
    whole = _recall(wb, camp, embedder, "Where does Pell keep the ring?", replace(narrow, recall_scan_lines=10_000))
    assert whole.report["lines_scanned"] == lines
    assert PLANTED in whole.used[0]["text"] and PLANTED in found.used[0]["text"]  # the best either way
    wb.close()
