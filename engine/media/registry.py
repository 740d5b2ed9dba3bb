"""The provider seam: what a media model must offer, and where to plug it in.

Five kinds: still images, video, audio (music, ambience), speech (text to
speech, "tts") and transcription (speech to text, "stt"). A provider is any
object with the methods of the matching protocol below; nothing here names
a product or a server, and nothing here opens a socket or starts a process.
Adapters live outside this module (`engine.media.espeak` is one) and are
registered only when someone asks.

Media is derived presentation. A provider receives a scene packet (a copy)
and returns bytes or a file path with provenance; no path leads from a
result back into the story. A transcription is a *draft*: the player reads
it, corrects it, and sends it as their ordinary input, which is the only way
words enter a turn.

The registry is process-wide and empty until something is registered;
playing a campaign registers nothing.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import MediaError

__all__ = [
    "AUDIO",
    "IMAGE",
    "MEDIA_KINDS",
    "SPEECH",
    "TRANSCRIPTION",
    "VIDEO",
    "DraftTranscription",
    "MediaProvider",
    "MediaRequest",
    "MediaResult",
    "ProviderCapabilities",
    "SpeechProvider",
    "TranscriptionProvider",
    "for_kind",
    "is_media_kind",
    "register",
    "registered",
    "speaker",
    "unregister",
]

IMAGE = "image"
VIDEO = "video"
AUDIO = "audio"
SPEECH = "tts"  # text read aloud
TRANSCRIPTION = "stt"  # speech written down, as a draft
MEDIA_KINDS = frozenset({IMAGE, VIDEO, AUDIO, SPEECH, TRANSCRIPTION})


def is_media_kind(value: Any) -> bool:
    return isinstance(value, str) and value in MEDIA_KINDS


def _kind(value: Any) -> str:
    if not is_media_kind(value):
        raise MediaError(f"There is no media kind {value!r}; the kinds are {', '.join(sorted(MEDIA_KINDS))} "
                         "(tts: speech from text, stt: a transcription).")
    return value


def _copied(mapping: Mapping | None) -> dict:
    """The dataclasses keep their own copy, so a caller's later edit changes nothing."""
    return copy.deepcopy(dict(mapping or {}))


@dataclass(frozen=True)
class ProviderCapabilities:
    provider_id: str
    kinds: tuple[str, ...] = ()
    details: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(_kind(k) for k in self.kinds))
        object.__setattr__(self, "details", _copied(self.details))

    def supports(self, kind: str) -> bool:
        return kind in self.kinds


@dataclass(frozen=True)
class MediaRequest:
    """One thing to make: its kind, the scene packet it depicts, free hints."""

    kind: str
    scene: Mapping
    hints: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        _kind(self.kind)
        object.__setattr__(self, "scene", _copied(self.scene))
        object.__setattr__(self, "hints", _copied(self.hints))


@dataclass(frozen=True)
class MediaResult:
    """What a provider made: bytes (`data`) or a file (`path`), with where it
    came from (`provenance`: the scene id, the turn range, the campaign)."""

    kind: str
    media_type: str
    provenance: Mapping = field(default_factory=dict)
    data: bytes | None = None
    path: str | None = None
    details: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        _kind(self.kind)
        object.__setattr__(self, "provenance", _copied(self.provenance))
        object.__setattr__(self, "details", _copied(self.details))


@dataclass(frozen=True)
class DraftTranscription:
    """Heard words for the player to check: never a turn, never a result.

    Its text goes into the input box; only the player sending it (as any
    typed input) puts it in the story."""

    text: str
    editable: bool = True
    confidence: float | None = None
    details: Mapping = field(default_factory=dict)


@runtime_checkable
class MediaProvider(Protocol):
    def capabilities(self) -> ProviderCapabilities: ...

    def generate(self, request: MediaRequest) -> MediaResult: ...


@runtime_checkable
class SpeechProvider(Protocol):
    def capabilities(self) -> ProviderCapabilities: ...

    def speak(self, text: str, hints: Mapping | None = None) -> MediaResult: ...


@runtime_checkable
class TranscriptionProvider(Protocol):
    def capabilities(self) -> ProviderCapabilities: ...

    def transcribe(self, audio: bytes, hints: Mapping | None = None) -> DraftTranscription: ...


_REGISTRY: dict[str, Any] = {}


def register(provider_id: str, provider: Any) -> None:
    """Make `provider` available under `provider_id` (replacing one of that id)."""
    if not isinstance(provider_id, str) or not provider_id.strip():
        raise MediaError("A provider needs a name to be registered under, e.g. register('my-images', provider).")
    if not callable(getattr(provider, "capabilities", None)):
        raise MediaError(f"{provider!r} cannot be registered: a provider says what it makes through a "
                         "capabilities() method returning ProviderCapabilities.")
    _REGISTRY[provider_id.strip()] = provider


def unregister(provider_id: str) -> None:
    _REGISTRY.pop(provider_id, None)


def registered() -> dict[str, Any]:
    """A copy: changing it changes nothing."""
    return dict(_REGISTRY)


def for_kind(kind: str) -> list[Any]:
    """Registered providers that make `kind`, in registration order. A
    provider whose capabilities() fails is skipped, not fatal: one broken
    plug-in must not hide the others."""
    kind = _kind(kind)
    found = []
    for provider in list(_REGISTRY.values()):
        try:
            able = provider.capabilities().supports(kind)
        except Exception:  # noqa: BLE001 - a broken provider is simply not offered
            continue
        if able:
            found.append(provider)
    return found


def speaker() -> SpeechProvider | None:
    """The first registered provider that reads text aloud, or None."""
    return next((p for p in for_kind(SPEECH) if isinstance(p, SpeechProvider)), None)
