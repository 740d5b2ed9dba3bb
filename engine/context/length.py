"""The length hint: a ceiling in words the narrator is told, never a target.

The reply cap (max_output_tokens) is never lowered for a shorter band: a
brief turn must not become likelier to be cut off, because whatever the
model appends last (a state block) would be lost first.
"""
from __future__ import annotations

__all__ = ["length_hint", "LENGTH_BANDS", "LENGTH_HINT_OPENING", "LENGTH_HINT_TAIL"]

LENGTH_HINT_OPENING = "[Hard limit:"
LENGTH_HINT_TAIL = "Bring the passage to a close well inside that limit."
# Words per band (floor, ceiling), as the reference's setup form offers them.
LENGTH_BANDS = {"brief": (70, 180), "medium": (150, 380), "long": (320, 700)}
BAND_FLOOR_SHARE = 0.5
# The unbanded hint at an 800-token cap reads "not exceed 506 words ... about
# 177": (800 - 50) * 0.75 words/token * 0.9 buffer = 506; 0.35 of it = 177.
LENGTH_HEADROOM = 50
WORDS_PER_TOKEN = 0.75
LENGTH_BUFFER = 0.9
LENGTH_FLOOR_SHARE = 0.35
MIN_LENGTH_HINT_WORDS = 20
MIN_LENGTH_FLOOR_WORDS = 60
MAX_LENGTH_FLOOR_WORDS = 300


def length_hint(max_output_tokens: int, narration_length: str = "") -> str:
    words = int((max_output_tokens - LENGTH_HEADROOM) * WORDS_PER_TOKEN * LENGTH_BUFFER)
    if words < MIN_LENGTH_HINT_WORDS:
        return ""
    band = LENGTH_BANDS.get((narration_length or "").strip().lower())
    if band:
        words = min(words, band[1])
        floor = min(band[0], int(words * BAND_FLOOR_SHARE))
    else:
        floor = min(int(words * LENGTH_FLOOR_SHARE), MAX_LENGTH_FLOOR_WORDS)
    if floor < MIN_LENGTH_FLOOR_WORDS:
        return (f"{LENGTH_HINT_OPENING} this passage must not run past {words} words; most moments need "
                f"far fewer. {LENGTH_HINT_TAIL}]")
    return (f"{LENGTH_HINT_OPENING} this passage must not run past {words} words, and should not stop "
            f"short of about {floor}. Stay near the lower end unless the scene truly needs more. "
            f"{LENGTH_HINT_TAIL}]")
