"""Narration read aloud offline, by Debian's `espeak-ng`: one real speech provider.

This is an adapter, not part of the seam: `engine.media` does not import it,
so importing the seam starts no process and registers nothing. It joins the
registry only when asked:

    from engine.media import espeak
    espeak.register()            # or EspeakSpeech() passed straight to a widget

`make media-deps` installs the binary (apt-get, only when it is missing). The
voice is robotic but needs no model download, no network and no GPU, and it
speaks a passage in about a tenth of a second.
"""
from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import MediaError, MediaProviderError
from .registry import SPEECH, MediaResult, ProviderCapabilities
from .registry import register as _register

__all__ = ["BINARY", "MAX_TEXT", "PROVIDER_ID", "EspeakSpeech", "available", "register", "wav_seconds"]

BINARY = "espeak-ng"
PROVIDER_ID = "espeak-ng"
# Measured on this machine with `-s 165` (Treasure Island prose): 8,000
# characters became 514 s of speech, a 22.7 MB WAV, in 1.0 s. 6,000
# characters is a long narration passage (about 1,000 words, ~6.5 minutes
# of speech, ~17 MB); past it the notebook would be sent tens of megabytes.
MAX_TEXT = 6_000
# espeak-ng's default speed is 175 words a minute; a little slower is easier
# to follow for narration. Its accepted range is 80-450.
WORDS_PER_MINUTE = 165
TIMEOUT_SECONDS = 60.0
_VOICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,39}")


def available(binary: str | None = None) -> bool:
    return shutil.which(binary or BINARY) is not None


def wav_seconds(data: bytes) -> float:
    """The length of a WAV recording, from its header."""
    with wave.open(io.BytesIO(data)) as recording:
        return recording.getnframes() / float(recording.getframerate())


class EspeakSpeech:
    """A `SpeechProvider`: text in, a WAV recording out."""

    def __init__(self, voice: str = "en", words_per_minute: int = WORDS_PER_MINUTE, binary: str | None = None):
        found = shutil.which(binary or BINARY)
        if found is None:
            raise MediaProviderError(f"{binary or BINARY} is not installed, so nothing can be read aloud. Install it "
                                     "with `make media-deps` (or `sudo apt-get install espeak-ng`).")
        self.binary = found
        self.voice = _checked_voice(voice)
        self.words_per_minute = _checked_speed(words_per_minute)

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(PROVIDER_ID, kinds=(SPEECH,),
                                    details={"voice": self.voice, "words_per_minute": self.words_per_minute,
                                             "offline": True})

    def speak(self, text: str, hints: Mapping | None = None) -> MediaResult:
        """`hints` may carry `voice` and `words_per_minute` for this one reading."""
        hints = dict(hints or {})
        text = text.strip() if isinstance(text, str) else ""
        if not text:
            raise MediaError("There is no text to read aloud.")
        if len(text) > MAX_TEXT:
            raise MediaError(f"The text is {len(text):,} characters long; espeak-ng reads at most {MAX_TEXT:,} at a "
                             "time (about six minutes of speech). Read a shorter passage.")
        voice = _checked_voice(hints.get("voice", self.voice))
        speed = _checked_speed(hints.get("words_per_minute", self.words_per_minute))
        data = self._run(text, voice, speed)
        seconds = wav_seconds(data)
        return MediaResult(SPEECH, "audio/wav", data=data,
                           provenance={"provider": PROVIDER_ID, "voice": voice, "characters": len(text)},
                           details={"seconds": seconds, "words_per_minute": speed})

    def _run(self, text: str, voice: str, speed: int) -> bytes:
        """The text goes in on stdin (never as an argument, where a leading
        '-' would read as an option) and the WAV comes back through a file:
        `--stdout` writes a header with no length, which players and the
        `wave` module misread."""
        with tempfile.TemporaryDirectory(prefix="story-workbench-speech-") as folder:
            target = Path(folder) / "speech.wav"
            command = [self.binary, "-v", voice, "-s", str(speed), "-b", "1", "-w", str(target), "--stdin"]
            try:
                done = subprocess.run(command, input=text.encode("utf-8"), capture_output=True,
                                      timeout=TIMEOUT_SECONDS, check=False)
            except subprocess.TimeoutExpired:
                raise MediaProviderError(f"espeak-ng did not finish within {TIMEOUT_SECONDS:.0f} s; nothing was "
                                         "read aloud.") from None
            if done.returncode != 0 or not target.exists():
                detail = done.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit status {done.returncode}"
                raise MediaProviderError(f"espeak-ng could not read the text aloud ({detail}).")
            return target.read_bytes()

    def __repr__(self) -> str:
        return f"<EspeakSpeech voice={self.voice!r} {self.words_per_minute} wpm>"


def _checked_voice(value: Any) -> str:
    if not isinstance(value, str) or not _VOICE.fullmatch(value):
        raise MediaError(f"{value!r} is not an espeak-ng voice name; use one such as 'en', 'en-gb' or 'fr' "
                         "(`espeak-ng --voices` lists them).")
    return value


def _checked_speed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 80 <= value <= 450:
        raise MediaError(f"The speaking speed is words per minute between 80 and 450, not {value!r}.")
    return value


def register(provider_id: str = PROVIDER_ID, **options: Any) -> EspeakSpeech:
    """Register espeak-ng as a speech provider (options: voice, words_per_minute)."""
    provider = EspeakSpeech(**options)
    _register(provider_id, provider)
    return provider
