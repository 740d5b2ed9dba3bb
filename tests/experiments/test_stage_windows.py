"""The window probe: a passage read by its sentences finds a scene that one
of its sentences answers, where the whole passage's vector is diluted."""
import json
import re
from collections import Counter

import numpy as np

from experiments.stage_windows import probe, windows


class Words:
    """Bag-of-words vectors over a fixed vocabulary: cosine is shared words."""

    def __init__(self, texts):
        self.vocab = sorted({w for t in texts for w in re.findall(r"[a-z]+", t.lower())})

    def embed(self, texts):
        out = np.zeros((len(texts), len(self.vocab)), dtype=np.float32)
        for row, text in enumerate(texts):
            for word, n in Counter(re.findall(r"[a-z]+", text.lower())).items():
                if word in self.vocab:
                    out[row, self.vocab.index(word)] = n
        return out


PASSAGES = {
    "farm": {"heading": "", "text": "Wheat grows in fields near Oakham. Barley grows tall in summer there. "
                                    "A lighthouse keeper trims his lamp nightly."},
    "tower": {"heading": "", "text": "Lighthouse lighthouse."},
}


def test_windows_keep_the_heading_and_skip_fragments():
    made = windows("Farming", "Wheat grows in fields near Oakham. Ok. Barley grows tall in summer there.", 1)
    assert made == ["Farming\nWheat grows in fields near Oakham.", "Farming\nBarley grows tall in summer there."]
    assert windows("", "Short.", 2) == ["Short."]


def test_a_scene_one_sentence_answers_is_found_by_its_window(tmp_path):
    pairs = {"passages": PASSAGES, "targeted": [{"query": "lighthouse keeper lamp", "passage": "farm"}],
             "off_topic": ["barley summer oakham wheat"]}
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(pairs), encoding="utf-8")
    embedder = Words([p["text"] for p in PASSAGES.values()] + ["lighthouse keeper lamp"])
    table = probe(path, embedder, sentences=1).set_index("score")
    assert table.loc["passage", "first"] == 0.0  # the short "tower" passage outscores the diluted farm
    assert table.loc["window", "first"] == 1.0
    assert table.loc["window", "windows"] == 4 and table.loc["window", "passages"] == 2
