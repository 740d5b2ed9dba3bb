"""RisuAI lorebooks and modules, as story cards or as one knowledge source.

RisuAI writes a lorebook export as `{"type": "risu", "ver": 1, "data": [...]}`
(its own save folders keep the bare list), and a module as `{"type":
"risuModule", "lorebook": [...], ...}`. RisuAI's character exports are
character cards (v3 PNG, JSON or .charx), read by `charcard`, whose book this
reader never sees.

Each entry becomes a card as RisuAI fires it: `key` (one comma-separated
string, split where RisuAI splits it) are its keys, `secondkey` of a
`selective` entry must also match one of its keys (the "and_any" logic),
`alwaysActive` (or the old `mode: "constant"`) makes it constant, `comment`
is its title, and its folder's name goes into its notes. A folder entry
(`mode: "folder"`) is not lore and becomes no card. `content` is carried
exactly as written, RisuAI's `@@decorators` included (counted in the report:
they are not interpreted here). Everything else (insertion order,
activation percent, case sensitivity, caches...) is named with a count.
"""
from __future__ import annotations

from typing import Any

from ..bundle.errors import BundleRefused
from ..bundle.plan import Notes, Plan
from ..cards import CardRefused, normal_keys
from .detect import RISUAI, detect
from .ledger import Macros, account
from .worldinfo import Entry, book_parts, book_plan

__all__ = ["FORMAT_NAME", "read_risuai"]

FORMAT_NAME = "RisuAI lorebook"
_CARRIED = {"key", "secondkey", "comment", "content", "mode", "alwaysActive", "selective", "folder", "useRegex"}
_MEANINGS = {
    "insertorder": "insertion order among fired entries (here cards rank with the knowledge library)",
    "activationPercent": "activation probability (here a card fires every time its key appears)",
    "extentions": "RisuAI's per-entry options (case sensitivity)",
    "loreCache": "RisuAI's cache of the entry's matches", "bookVersion": "RisuAI's lorebook version",
    "id": "its id in RisuAI",
}
_FILE_CARRIED = {"type", "data", "lorebook", "name"}
_FILE_MEANINGS = {
    "ver": "the export format version", "description": "the module's description",
    "regex": "regex scripts that rewrite text (never run here)", "trigger": "trigger scripts (never run here)",
    "cjs": "scripts (never run here)", "lowLevelAccess": "scripts' low-level access (never run here)",
    "hideIcon": "a display option", "backgroundEmbedding": "HTML for the chat background",
    "assets": "images and other assets", "namespace": "the module's namespace", "id": "its id in RisuAI",
    "customModuleToggle": "a module toggle",
}
_FOLDER_KEY = "\uf000folder:"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _rows(data: Any) -> tuple[str, list, dict]:
    """(the book's name, its entries, the file's own fields) for every RisuAI shape."""
    if isinstance(data, list):
        return "", data, {}
    if data.get("type") == "risuModule":
        return _text(data.get("name")).strip(), data.get("lorebook") if isinstance(data.get("lorebook"), list) else [], data
    return _text(data.get("name")).strip(), data.get("data") if isinstance(data.get("data"), list) else [], data


def _keys(value: Any) -> list[str]:
    """RisuAI's comma-separated key string, split as RisuAI splits it."""
    try:
        return normal_keys(value) if isinstance(value, (str, list)) else []
    except CardRefused:
        return []


def read_risuai(data: Any, *, as_knowledge: bool = False, attach: bool = False, fallback_title: str = "",
                classification: str = "reference", protagonist: str | None = None) -> Plan:
    """A new campaign holding the book (or, with `attach`, only what to add); pure."""
    found = detect(data)
    if found.format != RISUAI:
        raise BundleRefused(f"This is not a RisuAI lorebook: it looks like {found.label}. Nothing was imported.")
    name, rows, fields = _rows(data)
    name = name or fallback_title or "RisuAI lorebook"
    notes, macros = Notes(), Macros(user=protagonist)
    folders = {_text(r.get("key")): _text(r.get("comment")).strip() for r in rows
               if isinstance(r, dict) and r.get("mode") == "folder"}
    entries, decorated, children = [], 0, 0
    for row in rows:
        if not isinstance(row, dict):
            notes.drop("a RisuAI lorebook entry that was not an object was dropped")
            continue
        if row.get("mode") == "folder":
            continue
        entry = _entry(row, folders, macros)
        decorated += entry.content.lstrip().startswith("@@")
        children += row.get("mode") == "child"
        entries.append(entry)
    if not entries:
        raise BundleRefused("The RisuAI lorebook has no entries (only folders, or nothing). Nothing was imported.")
    _report(notes, rows, fields, len(folders), decorated, children)
    macros.report(notes)
    knowledge, cards = book_parts(name, entries, as_knowledge, classification, notes, origin=f"{FORMAT_NAME}: {name}")
    return book_plan(FORMAT_NAME, name, knowledge, cards, notes, attach)


def _entry(row: dict, folders: dict[str, str], macros: Macros) -> Entry:
    keys = [macros(k) for k in _keys(row.get("key"))]
    secondary = [macros(k) for k in _keys(row.get("secondkey"))]
    folder = folders.get(_text(row.get("folder")), "")
    title = _text(row.get("comment")).strip() or (keys[0] if keys else "")
    return Entry(title=title, keys=keys, secondary=secondary, content=macros(_text(row.get("content"))), enabled=True,
                 constant=row.get("alwaysActive") is True or row.get("mode") == "constant",
                 selective=row.get("selective") is True, logic="and_any",
                 note=f"In the RisuAI folder “{folder}”." if folder else "")


def _report(notes: Notes, rows: list, fields: dict, folders: int, decorated: int, children: int) -> None:
    entries = [r for r in rows if isinstance(r, dict) and r.get("mode") != "folder"]
    account(notes, entries, _CARRIED, _MEANINGS, "lorebook entries")
    if fields:
        account(notes, [fields], _FILE_CARRIED, _FILE_MEANINGS, "file")
    if folders:
        notes.warnings.append(f"{folders} RisuAI folder{'s' if folders != 1 else ''} became no card; each entry "
                              "in a folder names it in its notes.")
    if decorated:
        notes.warnings.append(f"{decorated} entr{'y starts' if decorated == 1 else 'ies start'} with RisuAI "
                              "decorators (@@depth, @@activate...), kept in the text as written: this workbench "
                              "does not interpret them.")
    if children:
        notes.lose(f"`mode: child` on {children} of {len(entries)} lorebook entries: RisuAI copies such an entry's "
                   "text from the entry it belongs to; here each keeps its own")
    notes.warnings.append("RisuAI matches a key inside longer words unless full-word matching is on; here a key "
                          "matches whole words only (write /pattern/i to match inside words).")
