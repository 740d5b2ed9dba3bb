"""The media seam: scenes handed to image, video, speech and transcription models.

The story is unaware of media. Nothing in the story, context, narrative or
turn code imports this package, and nothing here writes the state, moves
the head or records an event:

    from engine import media
    packet = media.build(wb.db, camp.id)          # or camp.scene(): a pure read
    media.set_profile(wb.db, camp.id, "alice", {"hair": "short black"})
    media.register("my-images", provider)         # any object with capabilities() and generate()
    media.check_endpoint("http://127.0.0.1:8188") # media servers live on this machine only

- `scene`: the scene packet and its id;
- `profiles`: visual profiles, one per entity, campaign-scoped;
- `registry`: the five kinds, the protocols and the registry (empty by default);
- `endpoints`: the loopback-only rule for media servers;
- `view`: a packet as a table for a notebook;
- `espeak` (imported only when asked): narration read aloud offline.
"""
from ..errors import MediaEndpointRefused, MediaError, MediaProviderError, ProfileError
from .endpoints import check_endpoint, endpoint_rejection_reason
from .profiles import all_profiles, delete_profile, profile, set_profile
from .registry import (
    AUDIO,
    IMAGE,
    MEDIA_KINDS,
    SPEECH,
    TRANSCRIPTION,
    VIDEO,
    DraftTranscription,
    MediaProvider,
    MediaRequest,
    MediaResult,
    ProviderCapabilities,
    SpeechProvider,
    TranscriptionProvider,
    for_kind,
    is_media_kind,
    register,
    registered,
    speaker,
    unregister,
)
from .scene import ScenePacket, build, parse_scene_id, scene_id

__all__ = [
    "AUDIO",
    "IMAGE",
    "MEDIA_KINDS",
    "SPEECH",
    "TRANSCRIPTION",
    "VIDEO",
    "all_profiles",
    "DraftTranscription",
    "MediaEndpointRefused",
    "MediaError",
    "MediaProvider",
    "MediaProviderError",
    "MediaRequest",
    "MediaResult",
    "ProfileError",
    "ProviderCapabilities",
    "ScenePacket",
    "SpeechProvider",
    "TranscriptionProvider",
    "build",
    "check_endpoint",
    "delete_profile",
    "endpoint_rejection_reason",
    "for_kind",
    "is_media_kind",
    "parse_scene_id",
    "profile",
    "register",
    "registered",
    "scene_id",
    "set_profile",
    "speaker",
    "unregister",
]
