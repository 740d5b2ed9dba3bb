"""The provider seam: five kinds, small protocols, a registry empty until asked,
drafts for transcription, loopback-only endpoints (MED-10, MED-11, MED-13, MED-14)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import select

from engine import WorkbenchError
from engine.media import (
    AUDIO,
    IMAGE,
    MEDIA_KINDS,
    SPEECH,
    TRANSCRIPTION,
    VIDEO,
    DraftTranscription,
    MediaEndpointRefused,
    MediaError,
    MediaProvider,
    MediaRequest,
    MediaResult,
    ProviderCapabilities,
    SpeechProvider,
    TranscriptionProvider,
    check_endpoint,
    endpoint_rejection_reason,
    for_kind,
    is_media_kind,
    parse_scene_id,
    register,
    registered,
    speaker,
    unregister,
)
from engine.store import NodeRow


class FakeImageProvider:
    """A user's own image adapter: nothing but the protocol's two methods."""

    def __init__(self):
        self.requests: list[MediaRequest] = []

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities("fake-images", kinds=(IMAGE,))

    def generate(self, request: MediaRequest) -> MediaResult:
        self.requests.append(request)
        scene = request.scene
        return MediaResult(IMAGE, "image/png", data=b"\x89PNG fake",
                           provenance={"scene_id": scene["scene_id"], "turn_range": scene["turn_range"],
                                       "campaign_id": scene["campaign"]["id"]})


class HeardWords:
    """A transcription adapter that 'hears' a fixed, slightly wrong sentence."""

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities("heard", kinds=(TRANSCRIPTION,))

    def transcribe(self, audio: bytes, hints=None) -> DraftTranscription:
        return DraftTranscription("i opened the door", confidence=0.62)


class Broken:
    def capabilities(self):
        raise RuntimeError("the plug-in crashed")


def test_the_registry_is_empty_in_a_fresh_process():
    """MED-10: importing the engine and the seam registers nothing, and the
    offline speech adapter is not even imported."""
    code = ("import sys, engine, engine.media as m; "
            "print(m.registered(), [m.for_kind(k) for k in sorted(m.MEDIA_KINDS)], 'engine.media.espeak' in sys.modules); "
            "import widgets; print(m.registered())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["{} [[], [], [], [], []] False", "{}"]  # the app's Read aloud registers nothing either


def test_there_are_five_kinds_and_an_unknown_kind_is_refused():
    assert MEDIA_KINDS == {IMAGE, VIDEO, AUDIO, SPEECH, TRANSCRIPTION} == {"image", "video", "audio", "tts", "stt"}
    assert is_media_kind("image") and not is_media_kind("hologram") and not is_media_kind(None)
    with pytest.raises(MediaError) as refused:
        MediaRequest(kind="hologram", scene={})
    assert "hologram" in str(refused.value) and isinstance(refused.value, ValueError | WorkbenchError)
    with pytest.raises(MediaError):
        ProviderCapabilities("x", kinds=("smell",))
    with pytest.raises(MediaError):
        for_kind("smell")


def test_an_adapter_plugs_in_without_touching_story_code(office):
    """MED-10: a runtime-checkable protocol, register, for_kind, unregister."""
    provider = FakeImageProvider()
    assert isinstance(provider, MediaProvider) and not isinstance(provider, SpeechProvider)
    register("fake-images", provider)
    assert for_kind(IMAGE) == [provider] and for_kind(VIDEO) == []
    packet = office.scene()
    result = for_kind(IMAGE)[0].generate(MediaRequest(IMAGE, packet, {"size": "512x512"}))
    assert result.provenance["scene_id"] == packet["scene_id"] and result.data.startswith(b"\x89PNG")
    assert provider.requests[0].hints == {"size": "512x512"}
    unregister("fake-images")
    assert registered() == {} and for_kind(IMAGE) == []


def test_the_registry_hands_out_copies_and_refuses_nameless_or_shapeless_providers():
    register("fake", FakeImageProvider())
    listing = registered()
    listing.clear()
    assert list(registered()) == ["fake"]
    with pytest.raises(MediaError, match="needs a name"):
        register("  ", FakeImageProvider())
    with pytest.raises(MediaError, match="capabilities"):
        register("nothing", object())


def test_a_provider_whose_capabilities_fail_is_skipped_not_fatal():
    good = FakeImageProvider()
    register("broken", Broken())
    register("good", good)
    assert for_kind(IMAGE) == [good]


def test_a_request_is_a_copy_so_a_provider_cannot_reach_back(office):
    packet = office.scene()
    request = MediaRequest(IMAGE, packet)
    request.scene["characters"].clear()
    assert office.scene() == packet and len(packet["characters"]) == 3


def test_a_transcription_is_an_editable_draft_that_enters_only_as_normal_input(office):
    """MED-11: the draft is not a result and has no path into a turn; the
    player corrects it and plays it as any typed input."""
    register("heard", HeardWords())
    listener = for_kind(TRANSCRIPTION)[0]
    assert isinstance(listener, TranscriptionProvider)
    draft = listener.transcribe(b"RIFF....WAVE", hints=None)
    assert isinstance(draft, DraftTranscription) and not isinstance(draft, MediaResult)
    assert draft.editable and draft.text == "i opened the door"
    before = len(office.history())
    corrected = draft.text.replace("opened", "open")
    office.act(corrected)
    history = office.history()
    assert len(history) == before + 2
    assert history[-2].kind == "player" and history[-2].text.endswith("I open the door.")


def test_provenance_resolves_to_an_accepted_node_and_the_story_is_unchanged(office, wb):
    """MED-14: a result's scene id leads back to a node on the campaign's line."""
    provider = FakeImageProvider()
    register("fake", provider)
    state, head = office.state, office.head
    result = provider.generate(MediaRequest(IMAGE, office.scene()))
    where = parse_scene_id(result.provenance["scene_id"])
    assert where["campaign_id"] == result.provenance["campaign_id"] == office.id
    with wb.db.reading() as s:
        node = s.scalar(select(NodeRow).where(NodeRow.branch_id == where["branch_id"],
                                              NodeRow.depth == where["end"]))
    assert node is not None and node.campaign_id == office.id and node.kind == "narrator"
    assert office.state == state and office.head == head


def test_the_speech_lookup_finds_only_speakers():
    class Voice:
        def capabilities(self):
            return ProviderCapabilities("voice", kinds=(SPEECH,))

        def speak(self, text, hints=None):
            return MediaResult(SPEECH, "audio/wav", data=b"RIFF")

    assert speaker() is None
    register("images", FakeImageProvider())
    voice = Voice()
    register("voice", voice)
    assert speaker() is voice


@pytest.mark.parametrize("url", ["http://127.0.0.1:8188", "http://localhost:8188", "http://[::1]:5000/v1",
                                 "https://127.0.0.2:443"])
def test_media_endpoints_on_this_machine_are_accepted(url):
    assert endpoint_rejection_reason(url) is None
    check_endpoint(url)


def test_a_lan_address_is_refused_for_media_in_a_sentence():
    """MED-13: fine for the narrator, not for media."""
    from engine.providers.endpoints import rejection_reason

    assert rejection_reason("http://192.168.1.50:8188") is None  # the narrator's policy allows it
    reason = endpoint_rejection_reason("http://192.168.1.50:8188")
    assert "on this machine" in reason and "192.168.1.50" in reason
    with pytest.raises(MediaEndpointRefused) as refused:
        check_endpoint("http://192.168.1.50:8188")
    assert isinstance(refused.value, MediaError) and isinstance(refused.value, WorkbenchError)
    assert str(refused.value).startswith("That media endpoint can't be used: a media provider endpoint must be")


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "http://8.8.8.8:8188", "", "not a url",
                                 "https://api.openai.com/v1", "https://replicate.com", "http://example.com",
                                 "http://169.254.169.254/latest", "ftp://127.0.0.1/"])
def test_public_and_malformed_endpoints_are_refused_by_the_narrators_policy_first(url):
    resolver = {"api.example.com": ["93.184.216.34"], "api.openai.com": ["104.18.7.192"],
                "replicate.com": ["104.18.2.3"], "example.com": ["93.184.216.34"]}
    assert endpoint_rejection_reason(url, lambda host: resolver[host])
    with pytest.raises(MediaEndpointRefused):
        check_endpoint(url, lambda host: resolver[host])


def test_a_name_that_resolves_to_the_lan_is_refused_and_one_that_resolves_here_is_not():
    assert "on this machine" in endpoint_rejection_reason("http://gpu-box:8188", lambda host: ["10.0.0.7"])
    assert endpoint_rejection_reason("http://my-images:8188", lambda host: ["127.0.0.1", "::1"]) is None
    mixed = endpoint_rejection_reason("http://sneaky:8188", lambda host: ["127.0.0.1", "192.168.0.9"])
    assert "192.168.0.9" in mixed


def test_results_and_requests_keep_their_own_copies():
    hints = {"style": "ink"}
    request = MediaRequest(IMAGE, {"scene_id": "c1:b1:0-0"}, hints)
    hints["style"] = "oil"
    assert request.hints == {"style": "ink"}
    result = MediaResult(SPEECH, "audio/wav", provenance={"a": [1]})
    assert json.loads(json.dumps(dict(result.provenance))) == {"a": [1]}
