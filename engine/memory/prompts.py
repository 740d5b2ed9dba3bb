"""The two prompts derived work sends: a memory of one block, and the summary.

Both ask for the third person with names. Without that, one bank held "You
entered the crypt", "The player entered the crypt" and "He entered the crypt"
for the same kind of event, and a block of second-person prose produced
memories that named nobody; explaining why made the model comply more often.
The protagonist's name goes in the user message so the system text stays the
same across campaigns and calls.
"""
from __future__ import annotations

from ..budget import tokens

__all__ = ["MEMORY_SYSTEM", "SUMMARY_SYSTEM", "cast_brief", "clip_words", "memory_request", "summary_request",
           "MEMORY_MAX_WORDS", "SUMMARY_MAX_WORDS", "EXCERPT_TOKENS"]

# Told only "one or two sentences", a real model wrote 34 words for one block
# and 105 for the next; five memories go into every prompt, so this sets the
# bank's cost.
MEMORY_MAX_WORDS = 50
SUMMARY_MAX_WORDS = 250
# A block is cut to its last 2,000 tokens before it is summarised.
EXCERPT_TOKENS = 2000
MAX_CAST = 8
CAST_ENTRY_CHARS = 240

MEMORY_SYSTEM = (
    "You keep the memory of a long interactive story. Read the excerpt and write one or two plain "
    f"sentences, {MEMORY_MAX_WORDS} words at most, in the past tense, recording the concrete facts a later "
    "scene could turn on: names, places, objects, promises, wounds, debts. Write in the third person: the "
    "\"you\" of the excerpt is the protagonist named in the cast list (or \"the player\" if unnamed). Name "
    "every character instead of using bare pronouns, because the memory will be read on its own, much "
    "later. Answer with the memory only, no preamble."
)

SUMMARY_SYSTEM = (
    "You maintain the running summary of a long interactive story. Update the current summary with the new "
    f"events and answer with the updated summary only: one prose overview of at most {SUMMARY_MAX_WORDS} "
    "words. Keep every established fact, compress older events harder than recent ones, write in the third "
    "person, and call the protagonist by the name in the cast list (or \"the player\"), never \"you\"."
)


def _clip(text: str, limit: int = CAST_ENTRY_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + "…"


def cast_brief(protagonist: str, state: dict | None) -> str:
    """Fixed descriptions only (never live values), so one event summarised at two
    different times is framed the same way."""
    lines = [f"- {_clip(protagonist) if protagonist else 'The player'}: the protagonist."]
    seen = {(protagonist or "").strip().lower()}
    entities = (state or {}).get("entities") or {}
    for entity in entities.values() if isinstance(entities, dict) else []:
        if not isinstance(entity, dict) or str(entity.get("type", "")).strip().lower() not in ("character", "person"):
            continue
        name = str(entity.get("name") or "").strip()
        if not name or name.lower() in seen or len(lines) >= MAX_CAST:
            continue
        seen.add(name.lower())
        described = _clip(str(entity.get("description") or ""))
        lines.append(f"- {name}: {described}" if described else f"- {name}")
    return "Cast:\n" + "\n".join(lines)


def clip_words(text: str, limit: int) -> str:
    """At most `limit` words, ending on a sentence when one ends in range. The
    limit is stated to the model, and enforced here: a 135M model wrote
    600-token summaries against a 250-word instruction."""
    words = " ".join((text or "").split()).split(" ")
    if len(words) <= limit:
        return " ".join(words).strip()
    head = " ".join(words[:limit])
    end = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    return head[: end + 1] if end > len(head) // 2 else head.rstrip(",;:") + "…"


def memory_request(brief: str, block_texts: list[str]) -> str:
    excerpt = tokens.last("\n\n".join(block_texts), EXCERPT_TOKENS)
    return f"{brief}\n\nStory excerpt:\n\n{excerpt}\n\nMemory:"


def summary_request(brief: str, current: str, events: str) -> str:
    return (f"{brief}\n\nCurrent story summary:\n{current.strip() or '(none yet)'}"
            f"\n\nNew events since the last update:\n{events}\n\nUpdated summary:")
