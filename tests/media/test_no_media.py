"""The storyteller is unaware of media (MED-12, NOM-01 to NOM-04): the story,
context and narrative code import nothing of the seam, no product vocabulary
leaks out of it, the seam itself opens no socket and starts no process, and
play neither needs nor writes anything of it."""
from __future__ import annotations

import dataclasses
import re

from office import ALICE
from sqlalchemy import func, select
from test_layers import ROOT, graph

from engine import Settings
from engine.media import registered
from engine.store.media_tables import VisualProfileRow

MEDIA = ROOT / "engine" / "media"
# The story's own path: none may import the seam, directly or through another module.
STORY_PACKAGES = ("engine.story", "engine.context", "engine.narrative", "engine.turns", "engine.memory",
                  "engine.knowledge", "engine.budget", "engine.providers", "engine.settings", "engine.cards")
# Words that name particular image, speech or transcription products and their knobs. (The
# reference's list also had "safetensors"; here it is the text embedders' model file format too.
# The transcription model is named with what marks it as the product (whisper.cpp, faster-whisper,
# openai-whisper, WhisperX): the bare word is an English speech verb the prose repair needs.)
VOCABULARY = re.compile(r"comfyui|stable[ -]diffusion|automatic1111|num_inference_steps|cfg_scale|"
                        r"denoising_strength|whisper[.-]cpp|(?:faster|openai|insanely-fast)[-_]whisper|whisperx|"
                        r"whisper[-_](?:tiny|base|small|medium|large)|kokoro|flux\.1", re.IGNORECASE)
NETWORK = ("import httpx", "import requests", "urllib.request", "urlopen", "import socket", "socket.socket",
           "aiohttp", "http.client")
ADAPTERS = {"espeak.py"}  # the one module that runs a program; it is not imported by the seam


def importers_of_media(edges) -> list[str]:
    """Story modules that reach engine.media, following imports through any module."""
    reach: dict[str, set[str]] = {m: {t for t, _, _ in targets} for m, targets in edges.items()}
    found = []
    for start in edges:
        if not start.startswith(STORY_PACKAGES):
            continue
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            if module == "engine.media" or module.startswith("engine.media."):
                found.append(start)
                break
            todo += [t for t in reach.get(module, ()) if t not in seen]
    return sorted(found)


def test_story_context_and_narrative_code_never_import_the_seam():
    edges = graph(ROOT, ("engine",))
    assert importers_of_media(edges) == []


def test_the_check_would_see_an_import_of_the_seam():
    """The control: one story module that imports media, directly or via a helper."""
    edges = {"engine.narrative.render": [("engine.narrative.helper", 1, "render.py")],
             "engine.narrative.helper": [("engine.media.scene", 3, "helper.py")],
             "engine.media.scene": [], "engine.story.tree": []}
    assert importers_of_media(edges) == ["engine.narrative.helper", "engine.narrative.render"]


def test_no_provider_vocabulary_outside_the_seam():
    offenders = []
    for top in ("engine", "widgets", "experiments"):
        for path in (ROOT / top).rglob("*.py"):
            if MEDIA in path.parents:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if VOCABULARY.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert offenders == []
    assert VOCABULARY.search("a ComfyUI workflow") and VOCABULARY.search("whisper.cpp")  # the pattern's control
    assert VOCABULARY.search("faster-whisper") and not VOCABULARY.search('she whispers: "go"')


def test_the_seam_opens_no_socket_and_starts_no_process():
    for path in MEDIA.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert not [word for word in NETWORK if word in source], path.name
        if path.name not in ADAPTERS:
            assert "subprocess" not in source, path.name
    init = (MEDIA / "__init__.py").read_text(encoding="utf-8")
    assert "espeak" not in re.sub(r'"""[\s\S]*?"""', "", init)  # the adapter is imported only when asked


def test_play_needs_no_media_and_writes_none(office, wb):
    """NOM-01 / NOM-02: a whole sitting with an empty registry, and no profile
    rows appear unless someone sets one."""
    other = wb.new_campaign("Plain", opening="A quiet street.")
    other.act("walk")
    point = other.save_point("Mid-walk")
    other.act("stop at the corner")
    other.undo()
    other.redo()
    other.retry()
    other.restore(point)
    with wb.db.reading() as s:
        rows = s.scalar(select(func.count()).select_from(VisualProfileRow)
                        .where(VisualProfileRow.campaign_id == other.id))
    assert rows == 0 and registered() == {}


def test_profiles_and_packets_never_reach_the_narrator(office):
    """NOM-03: a profile is presentation; the prompt carries none of it."""
    report = office.context("look at Alice")
    prompt = report["system"] + report["story"]
    assert "Alice" in prompt  # the control: the entity itself is story
    for words in ("tortoiseshell", ALICE["style_notes"], "visual_profile", "scene_id", "short black"):
        assert words not in prompt, words
    labels = {section["name"] for section in report["sections"]}
    assert not {name for name in labels if "media" in name or "visual" in name or "scene_packet" in name}


def test_no_setting_configures_media():
    """NOM-04: nothing to configure, so nothing can be misconfigured."""
    names = [f.name for f in dataclasses.fields(Settings)]
    assert not [n for n in names if re.search(r"media|image|video|tts|stt|speech|voice", n)]
