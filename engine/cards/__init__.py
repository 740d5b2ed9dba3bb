"""Story cards as live lore: storage from Python, and which cards fire.

    from engine.cards import add_card, edit_card, lore_for
    with wb.db.writing() as s:
        card_id = add_card(s, camp.id, title="Mara", keys=["Mara", "innkeeper"], entry="Mara keeps the inn.")
    with wb.db.reading() as s:
        fired = lore_for(s, camp.id, recent_texts=[...story, oldest first...], pending="I ask Mara")

Lower layers take plain values (a session, a campaign id), never the facade.
"""
from .editing import EDITABLE, LOGICS, Card, add_card, cards, delete_card, edit_card, normal_keys
from .errors import CardRefused
from .triggers import SCAN_DEPTH, Fired, fired_cards, key_pattern, logic_name, lore_for, unusable, unusable_keys

__all__ = [
    "EDITABLE",
    "LOGICS",
    "SCAN_DEPTH",
    "Card",
    "CardRefused",
    "Fired",
    "add_card",
    "cards",
    "delete_card",
    "edit_card",
    "fired_cards",
    "key_pattern",
    "logic_name",
    "lore_for",
    "normal_keys",
    "unusable",
    "unusable_keys",
]
