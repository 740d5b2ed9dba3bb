"""Files in the reference web app's bundle formats, built by hand from its
published shape, and aged backwards era by era as its own tests did."""
from __future__ import annotations

import base64
import copy
import json
import zlib

from engine.knowledge import digest

CANON = "# Canon\n\nThe dead do not return. The sea cave floods at high tide.\n"


def _snapshot(system: str, source_id: int = 5) -> dict:
    return {"prompt": {"system": system, "story": "It begins.\n\n> You go north."},
            "sections": [{"name": "premise", "part": "system", "tokens": 5}],
            "tokens": {"budget": 4000, "estimate": 120}, "usage": {"prompt_tokens": 118, "completion_tokens": 9},
            "accounting": {"status": "fits"}, "window": {"tokens": 8192, "source": "loaded", "verified": True},
            "knowledge": {"used": [{"source_id": source_id, "title": "Canon"}]}}


def _packed(value: dict) -> str:
    return base64.b64encode(zlib.compress(json.dumps(value).encode("utf-8"))).decode("ascii")


def v3() -> dict:
    """A campaign with a retry (two takes), an abandoned line, a head behind
    the tip, and every evidence section the current format carries."""
    return {
        "format": "ai-dnd-adventure-v3",
        "title": "Cave", "memory": "A cave by the sea.", "authorsNote": "Fog rolls in.",
        "aiInstructions": "Be terse.", "narrationLength": "medium", "personaName": "Ila", "personaDesc": "A diver.",
        "campaignCanon": {"rules": ["The dead do not return."]},
        "narrativeState": {"entities": {"ila": {"type": "character", "name": "Ila"}}, "possessions": {"lamp": "ila"}},
        "storySummary": "Ila went north.",
        "headBranch": 1, "headDepth": 4,
        "branches": [{"id": 1, "parent": None, "forkDepth": -1, "name": "main"},
                     {"id": 2, "parent": 1, "forkDepth": 1}, {"id": 3, "parent": 1, "forkDepth": 3}],
        "actions": [
            {"id": 10, "parentId": None, "branch": 1, "depth": 0, "type": "start", "text": "It begins.", "live": True,
             "narrativeStateAfter": {}},
            {"id": 11, "parentId": 10, "branch": 1, "depth": 1, "type": "do", "text": "> You go north.", "live": True},
            {"id": 12, "parentId": 11, "branch": 1, "depth": 2, "type": "ai", "text": "One.", "live": True,
             "narrativeStateAfter": {"entities": {"ila": {"type": "character", "name": "Ila"}}},
             "stateChanges": ["Ila appears"], "contextSnapshot": _snapshot("Narrate the cave.", source_id=-1)},
            {"id": 13, "parentId": 11, "branch": 2, "depth": 2, "type": "ai", "text": "One again.", "live": False,
             "contextSnapshotZ": _packed(_snapshot("Narrate the cave, again."))},
            {"id": 14, "parentId": 12, "branch": 1, "depth": 3, "type": "say", "text": '> You say "Hello?"',
             "live": True},
            {"id": 15, "parentId": 14, "branch": 1, "depth": 4, "type": "ai", "text": "Two.", "live": True,
             "narrativeStateAfter": {"entities": {"ila": {"type": "character", "name": "Ila"}},
                                     "possessions": {"lamp": "ila"}}},
            {"id": 16, "parentId": 15, "branch": 1, "depth": 5, "type": "story", "text": "Ila lights the lamp.",
             "live": True},
            {"id": 17, "parentId": 16, "branch": 1, "depth": 6, "type": "ai", "text": "Three.", "live": True},
            {"id": 18, "parentId": 14, "branch": 3, "depth": 4, "type": "ai", "text": "Two, differently.",
             "live": False},
        ],
        "checkpoints": [{"name": "At the mouth", "branch": 1, "depth": 2}],
        "stateEvents": [
            {"eventType": "create_entity", "action": 12, "source": "accepted_story",
             "payload": {"entity": "ila", "entity_type": "character", "name": "Ila"}},
            {"eventType": "set_possession", "action": 15, "source": "manual_correction", "item": "lamp",
             "owner": "ila", "before": None, "after": "ila"},
        ],
        "stateProposals": [{"action": 12, "raw": "{...}", "parsed": {"events": []}, "rejected": []}],
        "memories": [{"text": "Ila went north into the cave.", "branch": 1, "depth": 2, "sourceStart": 0,
                      "sourceEnd": 2, "authority": "accepted_story", "pinned": True, "forgotten": False,
                      "useCount": 3, "embedded": True}],
        "summaries": [{"text": "Ila went north.", "branch": 1, "depth": 2, "sourceStart": 0, "sourceEnd": 2,
                       "trigger": "interval", "modelName": "summariser"}],
        "knowledge": [{"sourceId": 5, "title": "Canon", "originalFilename": "canon.md", "classification": "canon",
                       "visibility": "normal", "enabled": True, "alwaysInclude": True, "content": CANON,
                       "contentHash": digest(CANON), "parserVersion": 1, "chunkingVersion": 1}],
        "visualProfiles": [{"entityKey": "ila", "descriptors": {"hair": "black"}, "features": [], "styleNotes": ""}],
        "storyCards": [{"keys": "cave, sea", "entry": "A sea cave.", "type": "location", "title": "Cave"}],
        "scriptState": {"turns": 3}, "scripts": ["state.turns += 1"],
    }


def aged(era: str) -> dict:
    """The v3 file with what each earlier era could not carry removed
    (the removals accumulate, newest era first)."""
    out = copy.deepcopy(v3())
    eras = ["pre-m9", "pre-m7", "pre-m5", "pre-save-points", "pre-active-head"]
    for step in eras[: eras.index(era) + 1]:
        if step == "pre-m9":
            out["format"] = "ai-dnd-adventure-v2"
            for key in ("stateEvents", "stateProposals", "summaries"):
                out.pop(key)
            for action in out["actions"]:
                for key in ("contextSnapshot", "contextSnapshotZ", "id", "parentId"):
                    action.pop(key, None)
            for memory in out["memories"]:
                memory.pop("authority")
            for source in out["knowledge"]:
                for key in ("sourceId", "parserVersion", "chunkingVersion"):
                    source.pop(key)
        elif step == "pre-m7":
            out.pop("knowledge")
        elif step == "pre-m5":
            for key in ("narrativeState", "campaignCanon"):
                out.pop(key)
            for action in out["actions"]:
                action.pop("narrativeStateAfter", None)
                action.pop("stateChanges", None)
        elif step == "pre-save-points":
            out.pop("checkpoints")
        elif step == "pre-active-head":
            out.pop("headDepth")
    return out


ERAS = ["pre-m9", "pre-m7", "pre-m5", "pre-save-points", "pre-active-head"]

FLAT = {
    "format": "ai-dnd-adventure-v1",
    "title": "Flat", "memory": "A flat story.",
    "actions": [
        {"index": 0, "type": "start", "text": "It begins."},
        {"index": 1, "type": "do", "text": "look around"},
        {"index": 2, "type": "ai", "text": "Take two.", "variants": ["Take one.", "Take two."], "variantIndex": 1},
    ],
    "scripts": ["while(true){}"], "scriptState": {"x": 1},
}
