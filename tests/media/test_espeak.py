"""Narration read aloud by the real espeak-ng binary (`make media-deps`
installs it; nothing here is mocked): a WAV of non-zero duration whose length
grows with the text."""
from __future__ import annotations

import io
import shutil
import wave

import pytest

from engine.media import SPEECH, MediaError, MediaProviderError, SpeechProvider, espeak, for_kind, registered, speaker
from engine.media.espeak import MAX_TEXT, EspeakSpeech, wav_seconds

SHORT = "The door opens."
LONG = ("The door opens onto a corridor lit by a single flickering tube. Somewhere a printer wakes, "
        "coughs twice and falls silent again, and Alice says that nobody has fixed it since the spring.")


def test_the_binary_is_installed_by_the_setup():
    assert shutil.which("espeak-ng"), "run `make media-deps` (apt-get install espeak-ng)"
    assert espeak.available() and not espeak.available("no-such-speaker-binary")


def test_speaking_makes_a_wav_of_non_zero_duration():
    result = EspeakSpeech().speak(SHORT)
    assert result.kind == SPEECH and result.media_type == "audio/wav"
    assert result.data[:4] == b"RIFF" and result.data[8:12] == b"WAVE"
    with wave.open(io.BytesIO(result.data)) as recording:
        assert recording.getnframes() > 0 and recording.getframerate() > 0
    assert 0.3 < result.details["seconds"] == wav_seconds(result.data) < 10
    assert result.provenance == {"provider": "espeak-ng", "voice": "en", "characters": len(SHORT)}


def test_the_recording_grows_with_the_text():
    voice = EspeakSpeech()
    short, long_ = (wav_seconds(voice.speak(text).data) for text in (SHORT, LONG))
    words = len(LONG.split()) / len(SHORT.split())
    assert long_ > 4 * short  # 34 words against 3: roughly proportional, never flat
    assert long_ / short < 2 * words


def test_speed_and_voice_change_the_reading():
    slow = EspeakSpeech(words_per_minute=100).speak(LONG).details["seconds"]
    fast = EspeakSpeech(words_per_minute=300).speak(LONG).details["seconds"]
    assert slow > 2 * fast
    hinted = EspeakSpeech().speak(SHORT, {"voice": "en-gb", "words_per_minute": 120})
    assert hinted.provenance["voice"] == "en-gb" and hinted.details["words_per_minute"] == 120


def test_text_that_looks_like_an_option_is_read_not_obeyed():
    result = EspeakSpeech().speak("--version -w /tmp/elsewhere.wav")
    assert result.details["seconds"] > 1


@pytest.mark.parametrize("text, words", [("", "no text"), ("   ", "no text"), ("x" * (MAX_TEXT + 1), "at most 6,000")])
def test_nothing_or_too_much_text_is_refused_in_words(text, words):
    with pytest.raises(MediaError, match=words):
        EspeakSpeech().speak(text)


@pytest.mark.parametrize("options, words", [({"voice": "--help"}, "not an espeak-ng voice"),
                                            ({"voice": "en; rm -rf /"}, "not an espeak-ng voice"),
                                            ({"words_per_minute": 20}, "between 80 and 450"),
                                            ({"words_per_minute": True}, "between 80 and 450")])
def test_bad_options_are_refused_before_anything_runs(options, words):
    with pytest.raises(MediaError, match=words):
        EspeakSpeech(**options)


def test_an_unknown_voice_fails_in_words():
    with pytest.raises(MediaProviderError, match="could not read the text aloud"):
        EspeakSpeech(voice="zz-nonexistent").speak(SHORT)


def test_a_missing_binary_says_how_to_install_it():
    with pytest.raises(MediaProviderError, match="make media-deps"):
        EspeakSpeech(binary="no-such-speaker-binary")


def test_it_registers_only_when_asked_and_is_then_the_speaker():
    assert registered() == {} and speaker() is None
    voice = espeak.register()
    assert isinstance(voice, SpeechProvider) and registered() == {"espeak-ng": voice}
    assert for_kind(SPEECH) == [voice] and speaker() is voice
    assert voice.capabilities().details["offline"] is True
