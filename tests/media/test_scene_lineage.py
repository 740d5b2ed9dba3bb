"""The scene obeys the history rules because it is part of the state: it
follows the head through Undo, Redo, a restore and a new branch, and an
abandoned scene is kept on its own line, never deleted (LIN-01 to LIN-03)."""
from __future__ import annotations

from narrators import ScriptedNarrator
from office import block
from sqlalchemy import select
from sqlalchemy.orm import undefer

from engine import Workbench
from engine.media import parse_scene_id
from engine.store import NodeRow

SETUP = [{"type": "create_entity", "entity": "mara", "entity_type": "character", "name": "Mara"},
         {"type": "create_entity", "entity": "cellar", "entity_type": "location", "name": "The cellar"},
         {"type": "create_entity", "entity": "upstairs", "entity_type": "location", "name": "Upstairs"}]


def scene(summary: str, where: str) -> str:
    return block(summary, [{"type": "set_scene", "summary": summary, "location": where, "present": ["mara"]}])


def narrate(wb, camp, reply: str, words: str = "go on") -> None:
    wb.configure(narrator=ScriptedNarrator([reply]))
    camp.act(words)


def retained(wb, camp) -> list[tuple[int, int, str]]:
    """(branch, depth, summary) of every scene any node ever held."""
    with wb.db.reading() as s:
        nodes = s.scalars(select(NodeRow).options(undefer(NodeRow.state_after))
                          .where(NodeRow.campaign_id == camp.id).order_by(NodeRow.id))
        return [(n.branch_id, n.depth, n.state_after["scene"]["summary"]) for n in nodes
                if (n.state_after or {}).get("scene", {}).get("summary")]


def summaries(rows) -> list[str]:
    return list(dict.fromkeys(summary for _, _, summary in rows))


def test_after_divergence_the_scene_is_the_new_lines_and_the_old_is_kept(wb):
    """LIN-01 / LIN-02."""
    camp = wb.new_campaign("Cellar", opening="A house by the marsh.")
    narrate(wb, camp, block("Mara is here.", SETUP))
    narrate(wb, camp, scene("Mara enters the cellar.", "cellar"))
    first = camp.scene()
    assert first["location"]["name"] == "The cellar"
    camp.undo()
    narrate(wb, camp, scene("Mara remains upstairs.", "upstairs"), "stay")
    second = camp.scene()
    assert second["location"]["name"] == "Upstairs" and second["action_summary"] == "Mara remains upstairs."
    assert second["scene_id"] != first["scene_id"]
    assert parse_scene_id(second["scene_id"])["branch_id"] != parse_scene_id(first["scene_id"])["branch_id"]
    kept = {summary: branch for branch, _, summary in retained(wb, camp)}
    assert kept["Mara enters the cellar."] != kept["Mara remains upstairs."]


def test_the_scene_tracks_the_head_through_every_move_and_nothing_is_lost(wb, db_path):
    """LIN-03: A, save point, B, Undo, Redo, restore, then C on a new line."""
    camp = wb.new_campaign("Cellar", opening="A house by the marsh.")
    narrate(wb, camp, block("Mara is here.", SETUP))
    camp.set_visual_profile("mara", {"build": "sturdy"})
    narrate(wb, camp, scene("Scene A.", "cellar"))
    point = camp.save_point("At scene A")
    narrate(wb, camp, scene("Scene B.", "upstairs"))

    def now() -> str:
        return camp.scene()["action_summary"]
    assert now() == "Scene B."
    camp.undo()
    assert now() == "Scene A."
    camp.redo()
    assert now() == "Scene B."
    camp.restore(point)
    assert now() == "Scene A." and "Scene B." in summaries(retained(wb, camp))
    narrate(wb, camp, scene("Scene C.", "upstairs"), "something else")
    assert now() == "Scene C."
    assert {"Scene A.", "Scene B.", "Scene C."} <= set(summaries(retained(wb, camp)))
    assert camp.scene()["characters"][0]["visual_profile"]["descriptors"] == {"build": "sturdy"}
    wb.close()
    with Workbench.open(db_path, background=False) as again:
        assert again.campaign(camp.id).scene()["action_summary"] == "Scene C."
