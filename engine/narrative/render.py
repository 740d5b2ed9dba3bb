"""The narrative state as the narrator reads it: one section of the prompt.

Caps, and where each applies (the numbers carry over from the reference
system; the entity and held caps are this workbench's own):

- `PROMPT_ENTITIES = 30` entities. Those the scene names (its location and who
  is present) always make the list; the rest are the most recently created.
  The reference listed every entity; a long campaign grows a cast no prompt
  should pay for in full, and a cap equal to the facts' keeps the two in step.
- `PROMPT_HELD = 30` possessions, sorted by item name, the first 30 shown.
- `PROMPT_FACTS = 30` of the newest active facts, and separately 30 of the
  newest withdrawn ones: the newest are the ones the next turn contradicts.
- `PROMPT_RELATIONSHIPS = 20` of the newest active relationships.
- `PROMPT_THREADS = 12` of the oldest open threads: a thread waits longest to
  be paid off, so the old ones must not scroll out of sight.

The headings are named once here, because the extractor recognises a copy of
this section pasted back into a narration by exactly these lines.
"""
from __future__ import annotations

from typing import Any

from . import model

__all__ = [
    "HEADING_ENTITIES",
    "HEADING_FACTS",
    "HEADING_HELD",
    "HEADING_RELATIONSHIPS",
    "HEADING_SCENE",
    "HEADING_THREADS",
    "HEADING_WITHDRAWN",
    "PROMPT_ENTITIES",
    "PROMPT_FACTS",
    "PROMPT_HELD",
    "PROMPT_RELATIONSHIPS",
    "PROMPT_THREADS",
    "SECTION_HEADINGS",
    "fact_line",
    "render_state",
]

PROMPT_ENTITIES = 30
PROMPT_HELD = 30
PROMPT_FACTS = 30
PROMPT_RELATIONSHIPS = 20
PROMPT_THREADS = 12

HEADING_SCENE = "Scene:"
HEADING_ENTITIES = "Who and what exists:"
HEADING_HELD = "Held:"
HEADING_FACTS = "Established:"
HEADING_WITHDRAWN = "No longer true — do not treat these as established:"
HEADING_RELATIONSHIPS = "Between them:"
HEADING_THREADS = "Still open:"
# The scene heading opens its own line's content, so it is not a whole-line heading.
SECTION_HEADINGS = (
    HEADING_ENTITIES,
    HEADING_HELD,
    HEADING_FACTS,
    HEADING_WITHDRAWN,
    HEADING_RELATIONSHIPS,
    HEADING_THREADS,
)


def render_state(state: Any) -> str:
    """The prompt section, or "" when nothing is established yet (no empty headings)."""
    document = model.normalised(state)
    parts = [
        _scene(document),
        _section(HEADING_ENTITIES, _entities(document)),
        _section(HEADING_HELD, _held(document)),
        _section(HEADING_FACTS, [_keyed_fact(document, f) for f in model.active_facts(document)[-PROMPT_FACTS:]]),
        _section(HEADING_WITHDRAWN, _withdrawn(document)),
        _section(HEADING_RELATIONSHIPS, _relationships(document)),
        _section(HEADING_THREADS, _threads(document)),
    ]
    return "\n\n".join(part for part in parts if part)


def _section(heading: str, lines: list[str]) -> str:
    return "\n".join([heading, *(f"  {line}" for line in lines)]) if lines else ""


def _scene(document: dict) -> str:
    scene = document["scene"]
    summary = str(scene.get("summary") or "").strip()
    where = scene.get("location")
    if not summary and not where:
        return ""
    line = f"{HEADING_SCENE} {summary}".rstrip()
    present = [model.entity_name(document, k) for k in scene.get("present") or [] if isinstance(k, str)]
    if present:
        line += f" (present: {', '.join(present)})"
    if where:  # last, so an echoed scene line is recognisable by its ending
        line += f" (at {model.entity_name(document, where)})"
    return line


def _shown_entities(document: dict) -> list[str]:
    keys = list(document["entities"])
    scene = document["scene"]
    named = [k for k in [scene.get("location"), *(scene.get("present") or [])] if k in document["entities"]]
    chosen = list(dict.fromkeys(named))[:PROMPT_ENTITIES]
    for key in reversed(keys):
        if len(chosen) >= PROMPT_ENTITIES:
            break
        if key not in chosen:
            chosen.append(key)
    kept = set(chosen)
    return [k for k in keys if k in kept]


def _entities(document: dict) -> list[str]:
    return [f"{key}: {_entity_line(document, key)}" for key in _shown_entities(document)]


def _entity_line(document: dict, key: str) -> str:
    found = model.entity(document, key) or {}
    kind = str(found.get("type") or model.DEFAULT_TYPE)
    status = str(found.get("status") or model.DEFAULT_STATUS)
    line = f"{model.entity_name(document, key)} ({kind}{'' if status == model.DEFAULT_STATUS else ', ' + status})"
    description = str(found.get("description") or "").strip()
    if description:
        line += f" — {description}"
    if found.get("location"):
        line += f"; at {model.entity_name(document, found['location'])}"
    return line


def _held(document: dict) -> list[str]:
    pairs = [(model.entity_name(document, item), model.entity_name(document, owner))
             for item, owner in document["possessions"].items()]
    return [f"{item} — {owner}" for item, owner in sorted(pairs)[:PROMPT_HELD]]


def fact_line(document: dict, fact: dict) -> str:
    """A fact as one readable clause: subject, predicate, object, value."""
    words = [
        model.entity_name(document, fact["subject"]) if fact.get("subject") else "",
        str(fact.get("predicate") or "").strip(),
        model.entity_name(document, fact["object"]) if fact.get("object") else "",
    ]
    line = " ".join(word for word in words if word)
    value = fact.get("value")
    if value not in (None, ""):
        line += f": {value}"
    return line


def _keyed_fact(document: dict, fact: dict) -> str:
    """Prefixed by its id, which is what withdraw_fact must name."""
    line = fact_line(document, fact)
    return f"{fact['id']}: {line}" if fact.get("id") else line


def _withdrawn(document: dict) -> list[str]:
    lines = []
    for fact in model.withdrawn_facts(document)[-PROMPT_FACTS:]:
        reason = str(fact.get("invalidated_reason") or "").strip()
        lines.append(_keyed_fact(document, fact) + (f" (withdrawn: {reason})" if reason else ""))
    return lines


def _relationships(document: dict) -> list[str]:
    return [
        f"{model.entity_name(document, r.get('source'))} — {r.get('label', '')} — "
        f"{model.entity_name(document, r.get('target'))}"
        for r in model.active_relationships(document)[-PROMPT_RELATIONSHIPS:]
    ]


def _threads(document: dict) -> list[str]:
    threads = list(model.open_threads(document).items())[:PROMPT_THREADS]
    return [f"{key}: {thread.get('title') or key}" for key, thread in threads]
