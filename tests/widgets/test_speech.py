"""The Read aloud control: the newest passage spoken by the real espeak-ng into
an audio player in the notebook, refusals in words, the story untouched."""
from __future__ import annotations

import ipywidgets as w
import pytest
from widget_helpers import walk

from engine.media import SPEECH, MediaProviderError, MediaResult, ProviderCapabilities, register, unregister
from engine.media.espeak import EspeakSpeech, wav_seconds
from widgets import CampaignApp
from widgets.speech import NO_SPEAKER, ReadAloud, default_speaker, newest_passage


class Recorder:
    """A speech provider that records what it was asked to read."""

    def __init__(self, media_type: str = "audio/wav"):
        self.heard: list[str] = []
        self.media_type = media_type

    def capabilities(self):
        return ProviderCapabilities("recorder", kinds=(SPEECH,))

    def speak(self, text, hints=None):
        self.heard.append(text)
        return MediaResult(SPEECH, self.media_type, data=b"RIFF fake", details={"seconds": 75})


class Silent(Recorder):
    def speak(self, text, hints=None):
        return MediaResult(SPEECH, "audio/wav")


class Down(Recorder):
    def speak(self, text, hints=None):
        raise MediaProviderError("the voice server is not running")


@pytest.fixture
def registry():
    yield
    for name in ("recorder", "espeak-ng"):
        unregister(name)


def test_the_real_voice_plays_the_passage_in_an_audio_widget():
    control = ReadAloud(lambda: "The lamp gutters and goes out.", EspeakSpeech())
    control.button.click()
    assert isinstance(control.audio, w.Audio) and control.audio.format == "wav"
    assert control.audio.value[:4] == b"RIFF" and wav_seconds(control.audio.value) > 0.5
    assert control.audio.layout.display == "" and control.audio.autoplay
    assert "Reading 6 words aloud (0:0" in control.message.value
    longer = ReadAloud(lambda: "The lamp gutters and goes out. " * 6, EspeakSpeech())
    longer.read()
    assert wav_seconds(longer.audio.value) > 3 * wav_seconds(control.audio.value)


def test_the_player_is_hidden_until_there_is_something_to_play():
    control = ReadAloud(lambda: "", Recorder())
    assert control.audio.layout.display == "none"
    control.button.click()
    assert control.audio.layout.display == "none" and "no passage to read yet" in control.message.value


def test_without_a_speaker_the_control_says_how_to_get_one():
    control = ReadAloud(lambda: "Words.", None)
    assert control.read() is None
    assert "espeak-ng" in NO_SPEAKER and "make media-deps" in control.message.value


def test_a_failing_or_silent_provider_is_reported_in_words():
    down = ReadAloud(lambda: "Words.", Down())
    down.button.click()
    assert "not running" in down.message.value and not down.button.disabled
    silent = ReadAloud(lambda: "Words.", Silent())
    silent.button.click()
    assert "returned no audio" in silent.message.value and silent.audio.value == b""


def test_the_speaker_is_found_when_clicked_and_its_format_is_used():
    found: list = []
    recorder = Recorder("audio/mpeg")
    control = ReadAloud(lambda: "One two three.", lambda: found[0] if found else None)
    control.read()
    assert "make media-deps" in control.message.value
    found.append(recorder)
    control.read()
    assert recorder.heard == ["One two three."] and control.audio.format == "mpeg"
    assert "(1:15)" in control.message.value


def test_a_registered_speaker_comes_before_espeak(registry):
    assert isinstance(default_speaker(), EspeakSpeech)  # installed, used, not registered
    recorder = Recorder()
    register("recorder", recorder)
    assert default_speaker() is recorder


def test_the_newest_passage_is_the_newest_narration_not_the_players_line(camp):
    camp.act("light the lamp")
    entries = camp.history()
    assert entries[-1].kind == "narrator" and newest_passage(entries) == entries[-1].text
    assert newest_passage(entries[:-1]) == entries[0].text  # only the opening before the narration
    assert newest_passage([]) == ""


def test_the_app_reads_the_newest_passage_aloud_and_the_story_is_untouched(camp, registry):
    app = CampaignApp(camp, threaded=False)
    assert any(isinstance(x, w.Audio) for x in walk(app.widget))
    app.send("light the lamp")
    recorder = Recorder()
    register("recorder", recorder)
    history, state, head = camp.history(), camp.state, camp.head
    app.read_aloud.button.click()
    assert recorder.heard == [history[-1].text] == ["Narration 1."]
    assert camp.history() == history and camp.state == state and camp.head == head


def test_the_app_speaks_with_the_real_voice_when_nothing_is_registered(camp):
    app = CampaignApp(camp, threaded=False)
    app.send("light the lamp")
    app.read_aloud.button.click()
    assert wav_seconds(app.read_aloud.audio.value) > 0.3
