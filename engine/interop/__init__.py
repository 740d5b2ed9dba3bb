"""Other tools' files: one reader module per tool, none importing another.

    aidungeon    AI Dungeon scenarios, adventures, story-card exports
    koboldai     KoboldAI saves (story, memory, author's note, world info)
    novelai      NovelAI lorebooks
    sillytavern  SillyTavern World Info
    risuai       RisuAI lorebooks and modules
    charcard     character cards v1/v2/v3 (JSON, PNG, .charx)

What the readers share sits beside them and reads no reader: `detect`
(which tool wrote a file), `ledger` (every field carried or named),
`worldinfo` (a World Info book's entries), `transcript` (a played story as
nodes). `files` is the one entry point: recognise, read, commit through
`engine.bundle`, which owns the checked plan and its single writer.
"""
from .files import import_ai_dungeon, import_character_card, import_file, import_sillytavern, read_any

__all__ = ["import_ai_dungeon", "import_character_card", "import_file", "import_sillytavern", "read_any"]
