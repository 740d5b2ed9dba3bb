"""A scene packet as a table a person reads at a glance in a notebook.

Every name, summary and profile in a packet was written by a narrator, an
imported file or a player, so all of it goes through `engine.html`, which
escapes; nothing here builds markup by hand.
"""
from __future__ import annotations

from ..html import Html, bullet_list, key_values, table, tag

__all__ = ["looks_text", "packet_html"]

NO_PROFILE = "no visual profile"


def looks_text(look: dict | None) -> str:
    """A profile in one line: traits, then features, then style notes."""
    if look is None:
        return NO_PROFILE
    parts = [f"{trait}: {words}" for trait, words in (look.get("descriptors") or {}).items()]
    parts += list(look.get("features") or [])
    if look.get("style_notes"):
        parts.append(f"style: {look['style_notes']}")
    return "; ".join(parts) or "an empty profile"


def _who(view: dict) -> str:
    status = view.get("status")
    return view["name"] if status in (None, "", "active") else f"{view['name']} ({status})"


def packet_html(packet: dict) -> Html:
    location = packet.get("location")
    span = packet.get("turn_range") or {}
    heading = tag("h4", f"Scene {packet.get('scene_id', '')}", style="margin:.2em 0")
    facts = key_values([
        ("Campaign", (packet.get("campaign") or {}).get("title", "")),
        ("Turns", f"depth {span.get('start')} to {span.get('end')} on branch {span.get('branch_id')}"),
        ("Where", f"{location['name']} — {looks_text(location['visual_profile'])}" if location else "not set"),
        ("What happens", packet.get("action_summary") or "no scene summary yet"),
    ])
    people = table([(_who(c), c.get("type", ""), looks_text(c.get("visual_profile")))
                    for c in packet.get("characters") or []], header=("Character", "Type", "Looks")) \
        if packet.get("characters") else tag("p", "Nobody is listed as present.")
    things = table([(o["name"], _holder(packet, o.get("held_by")), looks_text(o.get("visual_profile")))
                    for o in packet.get("objects") or []], header=("Object", "Where", "Looks")) \
        if packet.get("objects") else Html("")
    keep = bullet_list(packet.get("continuity_constraints") or [], heading="Keep")
    return tag("div", heading + facts + people + things + keep, cls="story-workbench-scene")


def _holder(packet: dict, key: str | None) -> str:
    if key is None:
        return "lying here"
    location = packet.get("location")
    if location and key == location["key"]:
        return f"kept at {location['name']}"
    names = {v["key"]: v["name"] for v in packet.get("characters") or []}
    return f"held by {names.get(key, key)}"
