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


def _halves():
    """Tuning and held-out fusion tables where, read whole, the relevant
    passage of half the targeted scenes is under an irrelevant one (0.30 and
    0.60 against 0.45: no single direction orders them) and by its window it
    is best in every scene (0.90 against 0.40); everyday scenes' best is 0.45
    whole and 0.35 by window. Lexical and MiniLM evidence are equal
    everywhere, so only the second model's score can tell."""
    import pandas as pd

    def half(tag):
        rows = []
        for n in range(6):
            sid = f"{tag}-t{n}"
            for pid, relevant, whole, window in ((1, True, 0.30 + 0.30 * (n % 2), 0.90), (2, False, 0.45, 0.40)):
                rows.append({"kind": "targeted", "id": sid, "passage_id": pid + 10 * n, "relevant": relevant,
                             "second": whole, "window": window})
        for n in range(4):
            rows.append({"kind": "off_topic", "id": f"off-{tag}{n}", "passage_id": 900 + n, "relevant": False,
                         "second": 0.45, "window": 0.35})
        table = pd.DataFrame(rows).assign(lex_rank=1, sem_rank=1, scan_rank=None, cosine=0.5, evidence_ratio=1.0,
                                          cost=50, weight=1.0, **{"class": "canon"})
        return table.assign(windowed=(table.second + table.window) / 2)

    return half("tune"), half("held")


def test_the_arms_are_chosen_on_one_half_and_reported_on_the_other():
    from experiments.stage_windows import compare_arms

    tune, held = _halves()
    arms = compare_arms(tune, held, {4096: 900}, paraphrase={"held-t0", "tune-t0"})
    assert list(arms.index) == ["whole", "mean of whole and best window", "best window"]
    window = arms.loc["best window"]
    assert window.held_relevant_first == 6 and window.held_hits_4096 == 6 and window.held_precision_4096 == 1.0
    assert window.held_everyday_admitting_4096 == 0 and window.held_paraphrase_hits_4096 == 1
    whole = arms.loc["whole"]  # read whole, the irrelevant passage leads half the scenes, or ties them
    assert whole.held_relevant_first <= 3 and whole.held_hits_4096 < 6
    assert (arms.held_targeted == 6).all()


def test_window_scores_take_each_candidates_best_window():
    import pandas as pd

    from experiments.stage_windows import window_scores

    spans = {1: ["Farm\nWheat grows near Oakham.", "Farm\nThe lighthouse keeper trims his lamp."],
             2: ["Tower\nWheat wheat wheat."]}
    words = Words([t for s in spans.values() for t in s] + ["lighthouse lamp"])
    query = words.embed(["lighthouse lamp"])
    query /= np.linalg.norm(query)
    table = pd.DataFrame([{"id": "s", "passage_id": 1, "second": 0.2}, {"id": "s", "passage_id": 2, "second": 0.1},
                          {"id": "s", "passage_id": 3, "second": None}])
    scored = window_scores(table, {"s": query}, spans, words)
    assert list(scored.passage_id) == [1, 2]  # a candidate the second model did not score is left out
    assert scored.window.iloc[0] > 0.5 and scored.window.iloc[1] == 0.0
    assert scored.windowed.tolist() == [(0.2 + scored.window.iloc[0]) / 2, 0.05]
