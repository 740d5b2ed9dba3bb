"""Replay plays a recorded campaign's moves into a fresh file and joins the two
runs turn by turn, without touching the original."""
import pickle
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import census  # noqa: E402
from narrators import CountingNarrator  # noqa: E402
from research_doubles import CachingNarrator, EchoNarrator  # noqa: E402

from engine import NotAllowed, Workbench, WorkbenchError  # noqa: E402
from experiments.replay import Factory, record, replay  # noqa: E402

MOVES = [("act", "open the door"), ("continue", ""), ("direct", "Make the storm break."), ("act", "I run for the boat"),
         ("continue", ""), ("act", '"Who goes there?"')]


def play_moves(camp, moves=MOVES):
    for mode, text in moves:
        if mode == "act":
            camp.act(text)
        elif mode == "direct":
            camp.direct(text)
        else:
            camp.continue_story()


@pytest.fixture
def original(tmp_path):
    wb = Workbench.open(tmp_path / "original.db", background=False)
    # CountingNarrator reports 10 prompt tokens: within a 16,384 budget's safety reserve of the
    # estimate ("fits"), not within the 4,096 one the default now follows (n_ctx).
    wb.configure(narrator=CountingNarrator(), embedder="none", trim_fraction=4, context_budget=16384)
    camp = wb.new_campaign("Cove", premise="A smugglers' cove.", protagonist="Ila", opening="The tide is out.")
    play_moves(camp)
    yield camp
    wb.close()


def test_replay_plays_the_same_moves_and_leaves_the_original_alone(original, tmp_path):
    before = census(original.workbench)
    story_before = original.story
    df = replay(original, tmp_path / "replay.db", narrator=CachingNarrator(), progress=False)
    assert census(original.workbench) == before and original.story == story_before
    assert list(df["mode"]) == ["act", "continue", "direct", "act", "continue", "act"]
    assert df.loc[2, "input"] == "Make the storm break." and df.loc[5, "input"] == '> You say "Who goes there?"'
    assert list(df["text_original"]) == [f"Narration {i}." for i in range(1, 7)]
    assert df["text_replay"].str.startswith("Beat ").all()
    # The replay's own file holds the same moves in the same order.
    again = Workbench.open(tmp_path / "replay.db")
    replayed = again.campaigns()[0]
    assert [e.kind for e in replayed.history()] == [e.kind for e in original.history()]
    assert replayed.title == "Cove"
    again.close()


def test_the_servers_cache_figures_and_section_tokens_come_through(original, tmp_path):
    # A window past SHORT_RULE_WINDOW, as the original's budget is: the same protocol rule, the same system part.
    df = replay(original, tmp_path / "replay.db", narrator=CachingNarrator(window=16384), progress=False)
    assert (df["cached_tokens_replay"] + df["processed_tokens_replay"] == df["prompt_tokens_replay"]).all()
    assert df.loc[0, "cached_tokens_replay"] == 0  # a cold first prompt
    assert (df.loc[1:, "cached_tokens_replay"] > df.loc[1:, "processed_tokens_replay"]).all()
    # The original narrator reported no cache figures: absent, not zero.
    assert df["cached_tokens_original"].isna().all()
    assert (df["tok_system_replay"] == df["tok_system_original"]).all()
    assert (df["tok_history_replay"] > df["tok_history_original"]).iloc[1:].all()  # longer replies, longer history
    assert (df["ttft_ms_replay"] >= 0).all() and (df["accounting_replay"] == "fits").all()
    assert (df["leaks_replay"] == 0).all() and (df["refusals_replay"] == 0).all()


def test_settings_of_the_replay_override_the_recorded_ones(original, tmp_path):
    df = replay(original, tmp_path / "replay.db", narrator=CountingNarrator(), progress=False,
                context_budget=2048, max_output_tokens=64)
    wb = Workbench.open(tmp_path / "replay.db")
    assert wb.settings.context_budget == 2048 and wb.settings.trim_fraction == 4  # copied unless overridden
    wb.close()
    assert (df["estimate_tokens_replay"] < df["estimate_tokens_original"]).all()  # a smaller reply cap, a shorter hint


def test_a_turn_refused_every_time_keeps_its_row_and_the_replay_goes_on(original, tmp_path):
    df = replay(original, tmp_path / "replay.db", narrator=CountingNarrator(), progress=False,
                context_budget=700, max_output_tokens=64)
    assert list(df["turn"]) == list(range(1, 7))
    assert (df["refusals_replay"] == 3).all()
    assert df["refusal_replay"].str.contains("protected context").all()
    assert df["text_replay"].isna().all() and df["text_original"].notna().all()


def test_keep_first_copies_the_original_narration_then_hands_over(original, tmp_path):
    df = replay(original, tmp_path / "replay.db", narrator=CachingNarrator(), keep_first=3, progress=False)
    assert list(df["text_replay"][:3]) == list(df["text_original"][:3])
    assert list(df["recorded_replay"]) == [True] * 3 + [False] * 3
    assert df["text_replay"][3:].str.startswith("Beat 1:").iloc[0]


def test_knowledge_sources_travel_with_the_recording(original, tmp_path):
    original.knowledge.add("coast.md", "# The coast\n\nThe lighthouse keeper hides the boat keys under the stair.\n",
                           classification="canon", always_include=True)
    df = replay(original, tmp_path / "replay.db", narrator=EchoNarrator("lighthouse"), progress=False)
    assert (df["knowledge_admitted_replay"] >= 1).all()
    assert df["text_replay"].str.contains("boat keys").all()


def test_a_recording_is_plain_data_that_survives_pickling(original, tmp_path):
    recording = pickle.loads(pickle.dumps(record(original)))
    assert len(recording) == 6 and recording.brief["protagonist"] == "Ila"
    factory = Factory("research_doubles:CachingNarrator", path=str(Path(__file__).parent))
    df = replay(recording, tmp_path / "replay.db", narrator=factory, progress=False)
    assert df["text_replay"].str.startswith("Beat ").all()


def test_replay_refuses_to_reuse_a_file_and_an_empty_campaign(original, tmp_path):
    (tmp_path / "taken.db").write_bytes(b"")
    with pytest.raises(WorkbenchError, match="fresh file"):
        replay(original, tmp_path / "taken.db", narrator=CountingNarrator(), progress=False)
    empty = original.workbench.new_campaign("Empty")
    with pytest.raises(NotAllowed, match="nothing to replay"):
        replay(empty, tmp_path / "empty.db", narrator=CountingNarrator(), progress=False)
    with pytest.raises(WorkbenchError, match="module:Name"):
        Factory("no_colon_here").build()


def test_replay_against_the_loopback_server(original, tmp_path, fake_server):
    fake_server.script.kind = "llamacpp"
    fake_server.script.timings, fake_server.script.cached = True, 100  # llama.cpp's figures in the last chunk
    df = replay(original, tmp_path / "replay.db", narrator="endpoint", endpoint_url=fake_server.base,
                model="story-model", progress=False)
    assert (df["text_replay"] == "The door opens.").all()
    assert (df["prompt_tokens_replay"] == 120).all()
    assert (df["cached_tokens_replay"] == 100).all() and (df["processed_tokens_replay"] == 20).all()
    assert (df["prompt_ms_replay"] == 12.5).all() and (df["generation_ms_replay"] == 40.25).all()
    assert df["accounting_replay"].notna().all()
    posts = [p for m, p, _ in fake_server.requests if m == "POST"]
    assert posts.count("/v1/chat/completions") == 6
