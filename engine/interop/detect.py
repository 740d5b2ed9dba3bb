"""Which tool wrote a file, decided by that format's own markers.

Every reader of another tool's file asks `detect` first and refuses anything
that is not its own format, naming what it looks like instead: a NovelAI
lorebook handed to the SillyTavern reader used to arrive as cards with empty
texts, and a KoboldAI save handed to the AI Dungeon reader lost its story.
Markers are checked from the most specific to the least, and a file that
matches none is refused by name when it is a known unsupported format
(Agnai, a NovelAI story, a RisuAI preset) or described when it is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "AID_CARDS", "AID_SCENARIO", "CHARACTER_CARD", "KOBOLDAI", "LABELS", "NOVELAI", "RISUAI", "SILLYTAVERN",
    "WORKBENCH",
    "Detected", "detect", "detect_bytes",
]

WORKBENCH = "workbench"
CHARACTER_CARD = "character card"
SILLYTAVERN = "sillytavern"
NOVELAI = "novelai"
KOBOLDAI = "koboldai"
AID_SCENARIO = "aidungeon"
AID_CARDS = "aidungeon cards"
RISUAI = "risuai"

LABELS = {
    WORKBENCH: "a campaign bundle (this workbench's or the reference app's)",
    CHARACTER_CARD: "a character card",
    SILLYTAVERN: "SillyTavern World Info",
    NOVELAI: "a NovelAI lorebook",
    KOBOLDAI: "a KoboldAI save",
    AID_SCENARIO: "an AI Dungeon scenario or adventure",
    AID_CARDS: "an AI Dungeon story-card (or World Info) export",
    RISUAI: "a RisuAI lorebook",
}

_PNG = b"\x89PNG\r\n\x1a\n"
_ZIP = b"PK\x03\x04"
_JPEG = b"\xff\xd8\xff"
_ZIP_END = b"PK\x05\x06"  # a zip's end-of-directory record, in its last 64 KB + 22 bytes
_ZIP_TAIL = 65_557
_RISU_ENTRY = {"insertorder", "alwaysActive", "secondkey"}
_CARD_V1 = {"first_mes", "mes_example"}


@dataclass(frozen=True)
class Detected:
    """`format` is one of the module's names, or "" for a file no reader
    takes; `label` says it in words ("a NovelAI lorebook", "a RisuAI
    lorebook, which is not supported")."""

    format: str
    label: str
    version: str = ""

    @property
    def supported(self) -> bool:
        return bool(self.format)


def _is_dicts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _unsupported(label: str) -> Detected:
    return Detected("", f"{label}, which is not supported")


def detect_bytes(raw: bytes) -> Detected | None:
    """Binary carriers, by magic number; None for anything else (text)."""
    if raw.startswith(_PNG):
        return Detected(CHARACTER_CARD, "a character card in a PNG image", "png")
    if raw.startswith(_ZIP):
        return Detected(CHARACTER_CARD, "a character card archive (.charx)", "charx")
    if raw.startswith(_JPEG) and _ZIP_END in raw[-_ZIP_TAIL:]:
        # RisuAI writes .charx as a JPEG with the zip after it, so the file shows as a picture.
        return Detected(CHARACTER_CARD, "a character card archive (.charx, after a JPEG image)", "charx")
    return None


def detect(data: Any) -> Detected:
    """The format of parsed JSON `data`, by its own markers."""
    if isinstance(data, dict):
        return _object(data)
    if isinstance(data, list):
        return _list(data)
    return Detected("", f"a JSON {type(data).__name__}, which no importer reads")


def _object(data: dict) -> Detected:
    spec = data.get("spec")
    if isinstance(data.get("format"), str) and ("version" in data or data["format"].startswith("ai-dnd-adventure")):
        return Detected(WORKBENCH, LABELS[WORKBENCH], data["format"])
    if spec in ("chara_card_v2", "chara_card_v3"):
        return Detected(CHARACTER_CARD, f"a character card ({spec})", spec)
    if spec == "lorebook_v3":
        return Detected(SILLYTAVERN, "a character-card lorebook (lorebook_v3)", spec)
    if data.get("type") == "risuModule":
        return Detected(RISUAI, "a RisuAI module", "module")
    if data.get("type") == "risu" and isinstance(data.get("data"), list) \
            or (_is_dicts(data.get("data")) and _RISU_ENTRY <= set(data["data"][0])):
        return Detected(RISUAI, LABELS[RISUAI], str(data.get("ver", "")))
    if data.get("type") == "risu":
        return _unsupported("a RisuAI preset or settings file (not a lorebook)")
    if data.get("kind") == "memory":
        return _unsupported("an Agnai memory book")
    if "storyContainerVersion" in data:
        return _unsupported("a NovelAI story (.story); export its lorebook from NovelAI and import that")
    if "scenarioVersion" in data:
        return _unsupported("a NovelAI scenario; export its lorebook from NovelAI and import that")
    if "lorebookVersion" in data:
        return Detected(NOVELAI, LABELS[NOVELAI], str(data["lorebookVersion"]))
    if "gamestarted" in data or ({"authorsnote", "worldinfo"} & set(data) and ("prompt" in data or "actions" in data)):
        return Detected(KOBOLDAI, LABELS[KOBOLDAI], str(data.get("file_version", 1)))
    if isinstance(data.get("character_book"), dict):
        return Detected(SILLYTAVERN, "a character book (a character card's embedded lorebook)", "character_book")
    if isinstance(data.get("entries"), dict):
        return Detected(SILLYTAVERN, LABELS[SILLYTAVERN], "world info")
    if isinstance(data.get("entries"), list) and all(
            isinstance(e, dict) and ("content" in e and ("keys" in e or "key" in e)) for e in data["entries"]):
        return Detected(SILLYTAVERN, "a character book", "character_book")
    if isinstance(data.get("scenario"), dict) or {"storyCards", "worldInfo", "plotEssentials", "authorsNote"} & set(data) \
            or ("prompt" in data and "memory" in data):
        return Detected(AID_SCENARIO, LABELS[AID_SCENARIO], "")
    if _is_dicts(data.get("actions")) and any("type" in a and "text" in a for a in data["actions"]):
        return Detected(AID_SCENARIO, "an AI Dungeon adventure", "adventure")
    if _CARD_V1 <= set(data) and "name" in data:
        return Detected(CHARACTER_CARD, "a character card (v1, TavernAI)", "v1")
    if "prompt" in data and "title" in data:
        return Detected(AID_SCENARIO, LABELS[AID_SCENARIO], "")
    keys = ", ".join(sorted(map(str, data))[:8]) or "nothing"
    return Detected("", f"a JSON object with {keys}, which matches no format this workbench reads")


def _list(data: list) -> Detected:
    if not data:
        return Detected("", "an empty list, which holds nothing to import")
    if not all(isinstance(v, dict) for v in data):
        return Detected("", "a list whose items are not all objects, which matches no format this workbench reads")
    fields = set().union(*data)
    if _RISU_ENTRY & fields:
        return Detected(RISUAI, "a RisuAI lorebook (its entries as a list)", "list")
    if any("value" in v or "entry" in v for v in data) and any("keys" in v for v in data):
        return Detected(AID_CARDS, LABELS[AID_CARDS], "")
    return Detected("", f"a list of objects with {', '.join(sorted(fields)[:8])}, which matches no format this "
                        "workbench reads")
