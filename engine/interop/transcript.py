"""What the story readers share: a played transcript as bundle nodes, and AI Dungeon's
`${placeholder}` syntax (which KoboldAI saves of AI Dungeon stories carry too).
"""
from __future__ import annotations

import re

__all__ = ["PLACEHOLDER", "story_nodes"]

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def story_nodes(opening: str, actions: list[tuple[str, bool]]) -> list[dict]:
    """The opening and each (text, is the player's) action as bundle nodes on one branch."""
    nodes = []
    if opening.strip():
        nodes.append({"id": 1, "branch": 1, "depth": 0, "kind": "start", "text": opening, "live": True})
    for text, player in actions:
        depth = len(nodes)
        nodes.append({"id": depth + 1, "branch": 1, "depth": depth, "kind": "player" if player else "narrator",
                      "text": text, "live": True})
    if nodes and nodes[0]["kind"] != "start":
        nodes[0]["kind"] = "start"  # a story must open with its opening: the first action is it
    return nodes
