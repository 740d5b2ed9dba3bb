"""The long-conversation memory evaluation: its conversations, a
LoCoMo-format file, the project's recall beside the baselines on real files
with the real MiniLM, and the notebook with small parameters."""
import json
from pathlib import Path

import papermill as pm
import pytest

from engine.providers import Text
from experiments import memory_eval as ev
from experiments.results import read_metrics

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"


class Quiet:
    """A narrator that writes nothing for memory and summary requests, so the
    memories are the facts made from the lines."""

    model_id = "quiet"

    def context_window(self):
        from engine.providers.window import LOADED, Window

        return Window(8192, LOADED, detail="quiet", reachable=True)

    def execute(self, prompt):
        yield Text("")


def test_the_conversations_are_long_dated_and_asked_of_every_kind():
    talks = ev.conversations(320)
    assert [t.title for t in talks] == list(ev.CONVERSATIONS)
    assert all(len(t.lines) >= 600 and len(t.speakers) >= 3 for t in talks)
    assert sum(len(t.questions) for t in talks) >= 200
    assert {q.kind for t in talks for q in t.questions} == set(ev.KINDS)
    assert ev.conversations(320)[0] == talks[0]  # seeded
    sessions = [text for t in talks for _, speaker, text in t.lines if not speaker]
    assert len(sessions) == 36 and all(text.startswith("Session ") for text in sessions)
    ids = {lid for t in talks for lid, _, _ in t.lines}
    assert all(e in ids for t in talks for q in t.questions for e in q.evidence)


def test_a_locomo_format_file_is_read(tmp_path):
    sample = {"sample_id": "mine", "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to the support group yesterday."},
                      {"speaker": "Melanie", "dia_id": "D1:2", "text": "That is wonderful!"}]},
        "qa": [{"question": "When did Caroline go to the support group?", "answer": "7 May 2023",
                "evidence": ["D1:1"], "category": 2},
               {"question": "What is Melanie's dog called?", "adversarial_answer": "Rex", "evidence": [],
                "category": 5}]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    talk = ev.load_locomo(path)[0]
    assert talk.speakers == ("Caroline", "Melanie")
    assert talk.lines[0] == ("D1:0", "", "Session 1. 1:56 pm on 8 May, 2023.")
    assert [q.kind for q in talk.questions] == ["temporal", "unanswerable"]
    assert talk.questions[1].answer == ""


@pytest.mark.realmodel
def test_a_played_conversation_is_answered_from_lines_that_left_the_window(tmp_path):
    talk = ev.conversation("Harbour Street", ("Dana", "Omar", "Lucia"), turns=160, sessions=6, seed=1)
    played = ev.play(talk, tmp_path / "talk.db", narrator=Quiet(), progress=False)
    frame = ev.probe(played, window=2048)
    left = frame[(frame.kind != "unanswerable") & frame.left_window]
    assert len(left) >= 10
    assert left.project.mean() >= 0.6  # the project's prompt holds most answers
    temporal = left[left.kind == "temporal"]
    assert len(temporal) and temporal.project.mean() > temporal.bm25.mean()  # the date rides with the line
    assert set(left[left.project]["where"]) <= {"line", "memory", "summary", "history", "elsewhere"}
    assert frame[frame.kind == "unanswerable"].invented.sum() == 0
    quality = ev.memory_quality([played])
    assert quality.loc[0, "copied_share"] <= 0.10
    # Asked one after another, each prompt holding the memories of the one before: most answers still there.
    chained = ev.probe(played, window=2048, baselines=False, chained=True)
    held = chained[(chained.kind != "unanswerable") & chained.left_window]
    assert held.project.mean() >= 0.6


@pytest.mark.realmodel
def test_the_notebook_runs_with_small_parameters(tmp_path):
    out = tmp_path / "memory_eval.ipynb"
    pm.execute_notebook(str(NOTEBOOKS / "memory_eval.ipynb"), str(out), kernel_name="python3", cwd=str(NOTEBOOKS),
                        progress_bar=False, parameters={"turns": 40, "conversations": 1, "floors": [0.0, 0.4],
                                                        "reuse": False, "workdir": str(tmp_path),
                                                        "sidecar": str(tmp_path / "memory_eval.json")})
    m = read_metrics(out)
    assert (tmp_path / "memory_eval.json").exists()
    assert m["floor"] in (0.0, 0.4) and m["questions"] > 0 and m["memories"] > 0
    assert set(m["held_out"]["targets"]) == {"answered >= 60%", "beats the better baseline by 20 points",
                                             "temporal >= 40%", "no invented memory for unanswerable"}
