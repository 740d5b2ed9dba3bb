"""A "Read aloud" control: the newest passage, spoken, in the notebook.

Self-contained on purpose: it is given a callable that returns the text to
read and a speech provider (or a callable that finds one when clicked), so
the app, a panel or a user's own cell can each place one. It only reads:
speaking a passage never touches the story.

    from widgets.speech import ReadAloud, default_speaker
    ReadAloud(lambda: camp.history()[-1].text, default_speaker).widget
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import ipywidgets as w

from engine.media import MediaResult, SpeechProvider, espeak, speaker

from .common import Message
from .runner import describe_error

__all__ = ["PASSAGE_KINDS", "ReadAloud", "default_speaker", "newest_passage"]

# What counts as a passage to read: the opening and the narrator's replies,
# never the player's own input or a direction.
PASSAGE_KINDS = ("narrator", "start")
NO_SPEAKER = ("Nothing can read aloud yet: install espeak-ng (`make media-deps`) or register a speech "
              "provider (see docs/media.md).")

Speaker = SpeechProvider | Callable[[], SpeechProvider | None] | None


def newest_passage(entries: Iterable[Any]) -> str:
    """The text of the newest opening or narration among story entries, or ''."""
    found = [e for e in entries if getattr(e, "kind", None) in PASSAGE_KINDS]
    return found[-1].text if found else ""


def default_speaker() -> SpeechProvider | None:
    """A registered speech provider first; else espeak-ng if it is installed
    (used, not registered: the registry stays as the user left it)."""
    chosen = speaker()
    if chosen is None and espeak.available():
        chosen = espeak.EspeakSpeech()
    return chosen


def _sound(result: Any) -> bytes:
    """The recording's bytes, whether the provider returned them or a file."""
    data = getattr(result, "data", None)
    if data:
        return bytes(data)
    path = getattr(result, "path", None)
    return Path(path).read_bytes() if path and Path(path).is_file() else b""


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


class ReadAloud:
    """A button, a line that says what happened, and an audio player that
    appears once there is something to play."""

    def __init__(self, passage: Callable[[], str], speaker: Speaker = default_speaker):
        self.passage = passage
        self.speaker = speaker
        self.result: MediaResult | None = None
        self.button = w.Button(description="Read aloud", icon="volume-up", layout=w.Layout(width="auto"),
                               tooltip="Read the newest passage aloud, on this machine")
        self.message = Message()
        self.audio = w.Audio(value=b"", format="wav", autoplay=True, controls=True, loop=False)
        self.audio.layout.display = "none"
        self.widget = w.VBox([w.HBox([self.button, self.message]), self.audio])
        self.widget.add_class("story-workbench-read-aloud")
        self.button.on_click(lambda _: self.read())

    def _speaker(self) -> SpeechProvider | None:
        if self.speaker is None or isinstance(self.speaker, SpeechProvider):
            return self.speaker
        return self.speaker()

    def read(self) -> MediaResult | None:
        """Speak the newest passage into the audio player; any refusal in words."""
        self.button.disabled = True
        try:
            text = (self.passage() or "").strip()
            chosen = self._speaker() if text else None
            result = chosen.speak(text) if chosen is not None else None
            sound = _sound(result) if result is not None else b""
        except Exception as exc:  # noqa: BLE001 - shown in words beside the button
            self.message.say(describe_error(exc), error=True)
            return None
        finally:
            self.button.disabled = False
        problem = ("There is no passage to read yet: play a turn first." if not text else
                   NO_SPEAKER if chosen is None else
                   "The speech provider returned no audio; nothing was played." if not sound else None)
        if problem:
            self.message.say(problem, error=True)
            return None
        self.result = result
        self.audio.format = (result.media_type or "audio/wav").partition("/")[2] or "wav"
        self.audio.value = sound
        self.audio.layout.display = ""
        seconds = result.details.get("seconds")
        length = f" ({_minutes(seconds)})" if isinstance(seconds, int | float) else ""
        self.message.say(f"Reading {len(text.split())} words aloud{length}.")
        return result
