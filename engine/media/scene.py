"""The scene packet: what an image, video or speech model is told about a scene.

A packet is a pure read of the narrative state at the head: where the scene
is, who is in it (in the order the story listed them), what they carry or
what lies there, what just happened, and the continuity a picture must not
break ("Mara is wounded.", "Bill is carrying the security badge."), each
entity with its visual profile. It stores nothing and moves nothing.

It is built from the state document alone, on purpose: never the transcript,
memories, summaries or knowledge sources. A hidden source is narrator-only,
and a memory or summary is an interpretation; an image of the scene must show
only what the story has accepted. Facts, relationships and threads stay out
too: they are the narrator's bookkeeping, not something to draw.

Identity: `c{campaign}:b{branch}:{start}-{end}`. The range defaults to the
depth where the scene was set; a given range is kept (reversed ends are put
in order) and must lie on the story being read.
"""
from __future__ import annotations

import copy
import re
from typing import Any

from ..errors import MediaError, NotFound
from ..narrative import model
from ..store import CampaignRow, Database
from ..story.lineage import branch_table, path_to
from .profiles import by_key

__all__ = [
    "MAX_CHARACTERS",
    "MAX_CONSTRAINTS",
    "MAX_OBJECTS",
    "OBJECT_TYPES",
    "PACKET_VERSION",
    "ScenePacket",
    "build",
    "packet_of",
    "parse_scene_id",
    "scene_id",
]

PACKET_VERSION = 1
# The reference system's caps: a crowd scene of 30 named extras still makes a
# packet a model can read, and a packet never grows with the campaign.
MAX_CHARACTERS = 24
MAX_OBJECTS = 24
MAX_CONSTRAINTS = 24
# Entity types that are things rather than people or places: an entity of
# one of these types standing at the scene's location (and held by nobody)
# is an object lying there.
OBJECT_TYPES = ("item", "object", "thing")
AMBIENCE = ("time_of_day", "lighting", "mood")

_SCENE_ID = re.compile(r"c(\d+):b(\d+):(\d+)-(\d+)")


def scene_id(campaign_id: int, branch_id: int | None, start: int, end: int) -> str:
    return f"c{campaign_id}:b{branch_id or 0}:{start}-{end}"


def parse_scene_id(value: Any) -> dict | None:
    """{campaign_id, branch_id, start, end}, or None for anything that is not a scene id."""
    found = _SCENE_ID.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return None
    campaign, branch, start, end = (int(part) for part in found.groups())
    return {"campaign_id": campaign, "branch_id": branch, "start": start, "end": end}


class ScenePacket(dict):
    """A plain dict (it serialises as JSON and compares as one) that shows as
    a table in a notebook."""

    def _repr_html_(self) -> str:
        from .view import packet_html

        return str(packet_html(self))


def _depth(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MediaError(f"The scene's {name} is a depth in the story (a whole number, 0 for the opening), "
                         f"not {value!r}.")
    return value


def build(db: Database, campaign_id: int, start: int | None = None, end: int | None = None) -> ScenePacket:
    """The packet of the scene at the head, in one read transaction."""
    start, end = _depth(start, "start"), _depth(end, "end")
    with db.reading() as session:
        campaign = session.get(CampaignRow, campaign_id)
        if campaign is None:
            raise NotFound(f"There is no campaign {campaign_id}.")
        return packet_of(campaign_id, campaign.title, campaign.state, (campaign.head_branch_id, campaign.head_depth),
                         branch_table(session, campaign_id), by_key(session, campaign_id), start, end)


def packet_of(campaign_id: int, title: str, state: Any, head: tuple[int | None, int],
              branches: dict[int, tuple[int | None, int]], looks: dict[str, dict],
              start: int | None = None, end: int | None = None) -> ScenePacket:
    """The packet from plain values: the state at the head, the head, the
    branch table and the campaign's profiles."""
    scene = _scene(state)
    head_branch, head_depth = head
    first, last = _range(scene, head_depth, start, end)
    path = path_to(branches, head_branch, head_depth) if head_branch in branches else None
    at = scene.get("at") if isinstance(scene.get("at"), dict) else {}
    branch = (path.branch_at(last) if path else None) or at.get("branch_id") or head_branch
    location_key = scene.get("location") if model.entity(state, scene.get("location")) else None
    present = _present(state, scene)
    objects = _objects(state, present, location_key, looks)
    return ScenePacket({
        "scene_id": scene_id(campaign_id, branch, first, last),
        "campaign": {"id": campaign_id, "title": title},
        "turn_range": {"branch_id": branch, "start": first, "end": last},
        "lineage": [{"branch_id": s.branch_id, "through_depth": s.last} for s in path.segments] if path else [],
        "location": _view(state, location_key, looks) if location_key else None,
        "characters": [_view(state, key, looks) for key in present],
        "objects": objects,
        "action_summary": scene["summary"] if isinstance(scene.get("summary"), str) else "",
        "continuity_constraints": _constraints(state, present, objects),
        "ambience": {name: scene[name] if isinstance(scene.get(name), str) else None for name in AMBIENCE},
        "source": {"packet_version": PACKET_VERSION, "head_depth": head_depth},
    })


def _scene(state: Any) -> dict:
    scene = state.get("scene") if isinstance(state, dict) else None
    return scene if isinstance(scene, dict) else {}


def _range(scene: dict, head_depth: int, start: int | None, end: int | None) -> tuple[int, int]:
    at = scene.get("at") if isinstance(scene.get("at"), dict) else {}
    depth = at.get("depth")
    valid = isinstance(depth, int) and not isinstance(depth, bool) and 0 <= depth <= head_depth
    scene_depth = depth if valid else max(head_depth, 0)
    first = scene_depth if start is None else start
    last = max(first, scene_depth) if end is None else end
    first, last = min(first, last), max(first, last)
    if (start is not None or end is not None) and last > max(head_depth, 0):
        raise MediaError(f"The story being read ends at depth {max(head_depth, 0)}; a scene range "
                         f"({first}-{last}) cannot reach past it.")
    return first, last


def _present(state: Any, scene: dict) -> list[str]:
    """The present keys that name an entity, in the story's order, once each."""
    listed = scene.get("present") if isinstance(scene.get("present"), list) else []
    keys = [k for k in dict.fromkeys(k for k in listed if isinstance(k, str)) if model.entity(state, k)]
    return keys[:MAX_CHARACTERS]


def _view(state: Any, key: str, looks: dict[str, dict]) -> dict:
    found = model.entity(state, key) or {}
    look = looks.get(key)
    return {"key": key, "name": model.entity_name(state, key),
            "type": str(found.get("type") or model.DEFAULT_TYPE),
            "status": str(found.get("status") or model.DEFAULT_STATUS),
            "description": found.get("description") if isinstance(found.get("description"), str) else "",
            "visual_profile": copy.deepcopy(look) if look is not None else None}


def _objects(state: Any, present: list[str], location: str | None, looks: dict[str, dict]) -> list[dict]:
    """Things held by someone present or by the location itself, then things
    of an object type lying at the location that nobody holds."""
    holders = set(present) | ({location} if location else set())
    possessions = state.get("possessions") if isinstance(state, dict) else None
    possessions = possessions if isinstance(possessions, dict) else {}
    out: list[dict] = []
    seen = set(present) | {location}
    for item, holder in possessions.items():
        if holder in holders and item not in seen and model.entity(state, item):
            out.append({**_view(state, item, looks), "held_by": holder})
            seen.add(item)
    entities = state.get("entities") if isinstance(state, dict) and location else None
    for key, thing in (entities if isinstance(entities, dict) else {}).items():
        lying = isinstance(thing, dict) and thing.get("location") == location and thing.get("type") in OBJECT_TYPES
        if lying and key not in seen and model.owner_of(state, key) is None:
            out.append({**_view(state, key, looks), "held_by": None})
            seen.add(key)
    return out[:MAX_OBJECTS]


def _constraints(state: Any, present: list[str], objects: list[dict]) -> list[str]:
    """What a depiction must keep: who is not in their usual state, who carries what."""
    lines = []
    for key in present:
        status = (model.entity(state, key) or {}).get("status") or model.DEFAULT_STATUS
        if str(status) != model.DEFAULT_STATUS:
            lines.append(f"{model.entity_name(state, key)} is {status}.")
    for thing in objects:
        if thing["held_by"] in present:
            lines.append(f"{model.entity_name(state, thing['held_by'])} is carrying {thing['name']}.")
    return lines[:MAX_CONSTRAINTS]
