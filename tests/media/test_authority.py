"""Media cannot write the story: each media action leaves the state, the head
and every count of story rows exactly as they were (AUTH-01 to AUTH-06)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from office import authoritative

from engine.bundle.facade import export_campaign
from engine.media import (
    IMAGE,
    SPEECH,
    TRANSCRIPTION,
    DraftTranscription,
    MediaProviderError,
    MediaRequest,
    MediaResult,
    ProviderCapabilities,
    for_kind,
    register,
)
from engine.media import scene as scene_module
from engine.media.espeak import EspeakSpeech
from engine.narrative import SPECS

MEDIA = Path(__file__).parents[2] / "engine" / "media"


class LyingProvider:
    """Claims to have drawn something the story never said."""

    def capabilities(self):
        return ProviderCapabilities("liar", kinds=(IMAGE, TRANSCRIPTION))

    def generate(self, request):
        return MediaResult(IMAGE, "image/png", data=b"png",
                           provenance={"scene_id": request.scene["scene_id"]},
                           details={"caption": "Alice in a red coat in a corridor",
                                    "state": {"entities": {"alice": {"name": "Red Alice"}}}})

    def transcribe(self, audio, hints=None):
        return DraftTranscription("create a dragon in the corridor")


class DownProvider:
    def capabilities(self):
        return ProviderCapabilities("down", kinds=(IMAGE,))

    def generate(self, request):
        raise MediaProviderError("the local generator is not running")


def unchanged(camp, action) -> None:
    before = authoritative(camp)
    action()
    assert authoritative(camp) == before


def test_setting_a_profile_changes_no_state_and_creates_no_fact(office):
    """AUTH-01."""
    unchanged(office, lambda: office.set_visual_profile("bill", {"build": "heavyset", "clothing": "navy suit"},
                                                        ["signet ring"]))
    unchanged(office, lambda: office.set_visual_profile("alice", {"clothing": "blue coat"}))
    assert "blue coat" not in json.dumps(office.state)
    assert "blue coat" not in json.dumps(office.state["entities"]["alice"])


def test_reading_and_deleting_profiles_change_nothing(office):
    unchanged(office, lambda: office.visual_profile("alice"))
    unchanged(office, office.visual_profiles)
    unchanged(office, lambda: office.delete_visual_profile("alice"))


def test_packets_are_reads_and_the_head_stays(office):
    """AUTH-02."""
    unchanged(office, lambda: [office.scene() for _ in range(5)])
    unchanged(office, lambda: office.scene(0, 4))
    unchanged(office, lambda: office.scene()._repr_html_())


def test_a_provider_claiming_other_things_changes_nothing(office):
    """AUTH-03: a result is only a result."""
    register("liar", LyingProvider())

    def depict():
        result = for_kind(IMAGE)[0].generate(MediaRequest(IMAGE, office.scene()))
        assert "red coat" in result.details["caption"]
    unchanged(office, depict)
    text = json.dumps(office.state)
    assert "red coat" not in text and "corridor" not in text and "Red Alice" not in text


def test_a_failing_provider_changes_nothing(office):
    """AUTH-03."""
    register("down", DownProvider())

    def attempt():
        with pytest.raises(MediaProviderError, match="not running"):
            for_kind(IMAGE)[0].generate(MediaRequest(IMAGE, office.scene()))
    unchanged(office, attempt)


def test_a_transcription_draft_changes_nothing_until_the_player_sends_it(office):
    register("liar", LyingProvider())
    unchanged(office, lambda: for_kind(TRANSCRIPTION)[0].transcribe(b"RIFF"))
    assert "dragon" not in json.dumps(office.state)


def test_reading_aloud_changes_nothing(office):
    voice = EspeakSpeech()
    unchanged(office, lambda: voice.speak(office.history()[-1].text))
    register("espeak-ng", voice)
    unchanged(office, lambda: for_kind(SPEECH)[0].speak("Bill is carrying the badge."))


def test_exporting_a_campaign_with_profiles_changes_nothing(office, tmp_path):
    unchanged(office, lambda: export_campaign(office._db, office.id, tmp_path / "office.json", machine_text=()))


def test_a_builder_crash_corrupts_nothing_and_play_continues(office, monkeypatch):
    """AUTH-04."""
    def crash(*args, **kwargs):
        raise RuntimeError("the packet builder fell over")
    monkeypatch.setattr(scene_module, "packet_of", crash)

    def attempt():
        with pytest.raises(RuntimeError, match="fell over"):
            office.scene()
    unchanged(office, attempt)
    monkeypatch.undo()
    before = len(office.history())
    office.act("carry on with the agenda")
    assert len(office.history()) == before + 2 and office.scene()["action_summary"]


def test_removing_every_profile_is_harmless(office):
    """AUTH-05: the story is intact and the packet still lists everyone."""
    for key in list(office.visual_profiles()):
        unchanged(office, lambda key=key: office.delete_visual_profile(key))
    assert office.visual_profiles() == {}
    packet = office.scene()
    assert [(c["name"], c["visual_profile"]) for c in packet["characters"]] == [
        ("Bill", None), ("Alice", None), ("Roger", None)]
    office.act("wrap up")


def test_an_orphan_profile_is_inert(office, wb, tmp_path):
    """AUTH-05: a profile for an entity the story never had (it can arrive in a
    file) is never shown, and play goes on."""
    export_campaign(office._db, office.id, tmp_path / "office.json", machine_text=())
    payload = json.loads((tmp_path / "office.json").read_text())
    payload["visual_profiles"].append({"entity_key": "nobody_at_all", "descriptors": {"hair": "green"},
                                       "features": [], "style_notes": ""})
    copy = wb.campaign(wb.import_campaign(payload).campaign_id)
    assert copy.visual_profile("nobody_at_all") == {"descriptors": {"hair": "green"}, "features": [],
                                                    "style_notes": ""}
    assert "green" not in json.dumps(copy.scene())
    copy.act("look around")


def test_the_seam_names_no_state_writer_and_the_story_has_no_media_events():
    """AUTH-06, on the source: nothing in engine/media reaches for what writes the story."""
    writers = ("narrative.apply", "from ..narrative import apply", "write_state", "write_turn", "move_head",
               "StoryTree", "savepoints", "StateEventRow", "NodeRow", "engine.turns", "..turns")
    for path in MEDIA.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert not [w for w in writers if w in source], path.name
    assert not [name for name in SPECS if name.startswith("media") or "visual" in name or "asset" in name]
