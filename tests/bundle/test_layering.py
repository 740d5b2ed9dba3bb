"""The bundle layer takes plain values (a database, a campaign id), never the
notebook objects: nothing in engine/bundle imports `Workbench` or `Campaign`
(not even for type checking), and no module calls a facade's private names.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from narrators import BagOfWordsEmbedder
from sqlalchemy import func, select

import engine
from engine.bundle import facade
from engine.interop import files as interop
from engine.store import TurnRecordRow
from engine.store.memory_tables import MemoryRow

ENGINE = Path(engine.__file__).parent
FACADE = "engine.bundle.facade"
NOTEBOOK_OBJECTS = {"engine.workbench", "engine.campaign"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _module_of(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module a `from ... import` names, relative ones resolved against `path`'s package."""
    if not node.level:
        return node.module or ""
    base = _package(path).split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imported(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` anywhere in the file names
    (inside functions and `if TYPE_CHECKING:` too), relative ones resolved;
    `from pkg import name` counts as both `pkg` and `pkg.name`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = _module_of(node, path)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("module", [facade, interop], ids=["facade", "interop"])
def test_the_facade_and_interop_never_import_the_notebook_objects(module):
    path = Path(module.__file__)
    assert not _imported(path) & NOTEBOOK_OBJECTS


def test_no_module_in_engine_bundle_or_interop_imports_the_notebook_objects():
    offenders = {p.name: sorted(_imported(p) & NOTEBOOK_OBJECTS) for folder in ("bundle", "interop")
                 for p in (ENGINE / folder).glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_resolver_sees_a_type_checking_import():
    """The check above would pass vacuously if relative imports were misread."""
    sample = ENGINE / "campaign.py"  # it imports Settings under TYPE_CHECKING, relatively
    assert "engine.settings" in _imported(sample)


def _private_facade_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            target = node.value
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if name == "facade":
                uses.append(f"line {node.lineno}: facade.{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            if _module_of(node, path) == FACADE:
                uses += [f"line {node.lineno}: from facade import {a.name}" for a in node.names
                         if a.name.startswith("_")]
    return uses


def test_no_module_calls_a_private_name_of_the_facade():
    offenders = {str(p.relative_to(ENGINE)): found for p in ENGINE.rglob("*.py")
                 if _module_name(p) != FACADE and (found := _private_facade_uses(p))}
    assert offenders == {}


def test_engine_bundle_reads_nothing_off_a_workbench():
    """No `.workbench`, `.settings` or `.embedder_or_none()` reached through an object."""
    reached = {}
    for path in [*(ENGINE / "bundle").glob("*.py"), *(ENGINE / "interop").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"workbench", "embedder_or_none", "settings"}:
                reached.setdefault(path.name, []).append(f"line {node.lineno}: .{node.attr}")
    assert reached == {}


# ------------------------------------------------------------------ the plain-value signatures
def _memory_vectors(db, campaign_id: int) -> tuple[int, int]:
    with db.reading() as s:
        total = s.scalar(select(func.count()).select_from(MemoryRow).where(MemoryRow.campaign_id == campaign_id))
        embedded = s.scalar(select(func.count()).select_from(MemoryRow).where(
            MemoryRow.campaign_id == campaign_id, MemoryRow.vector.is_not(None)))
    return total, embedded


def test_an_import_reports_what_the_campaign_says_of_itself(fresh, rich):
    report = facade.import_campaign(fresh.db, rich[2])
    camp = fresh.campaign(report.campaign_id)
    assert (report.title, report.head, report.can_undo, report.can_redo) == (
        camp.title, camp.head, camp.can_undo, camp.can_redo)
    assert report.can_redo  # the rich campaign was exported undone
    total, embedded = _memory_vectors(fresh.db, report.campaign_id)
    assert total and embedded == 0  # no embedder given: vectors wait for the next turn's derived work


def test_an_import_with_an_embedder_rebuilds_the_vectors(fresh, rich):
    report = facade.import_campaign(fresh.db, rich[2], embedder=BagOfWordsEmbedder())
    total, embedded = _memory_vectors(fresh.db, report.campaign_id)
    assert total and embedded == total


def test_export_takes_a_database_an_id_and_the_strings_to_scrub(fresh, tmp_path):
    camp = fresh.new_campaign("Evidence", opening="It begins.")
    camp.act("wait")
    with fresh.db.writing() as s:
        record = s.get(TurnRecordRow, camp.history()[-1].id)
        record.window = {**record.window, "detail": "asked http://10.1.2.3:8080/api/ps"}
    kept = facade.export_campaign(fresh.db, camp.id, tmp_path / "kept.json", machine_text=())
    assert kept.importable and kept.machine_text_removed == 0
    assert "10.1.2.3:8080" in kept.path.read_text(encoding="utf-8")
    scrub = facade.machine_text(fresh.db.path, "http://10.1.2.3:8080/v1")
    scrubbed = facade.export_campaign(fresh.db, camp.id, tmp_path / "scrubbed.json", machine_text=scrub)
    assert scrubbed.importable and scrubbed.machine_text_removed == 1
    assert "10.1.2.3:8080" not in scrubbed.path.read_text(encoding="utf-8")


def test_machine_text_names_the_database_and_the_endpoint(tmp_path):
    found = facade.machine_text(tmp_path / "story.db", "http://10.1.2.3:8080/v1")
    assert {str((tmp_path / "story.db").resolve()), "story.db", "http://10.1.2.3:8080/v1", "http://10.1.2.3:8080",
            "10.1.2.3:8080"} <= set(found)
    assert list(found) == sorted(found, key=len, reverse=True)


def test_story_cards_by_database_and_campaign_id(fresh):
    camp = fresh.new_campaign("Cards")
    card = facade.add_story_card(fresh.db, camp.id, title="Mara", keys=["Mara"], entry="Mara keeps the inn.")
    facade.edit_story_card(fresh.db, camp.id, card, entry="Mara keeps the Crooked Lantern.")
    cards = facade.story_cards(fresh.db, camp.id)
    assert cards["entry"].tolist() == ["Mara keeps the Crooked Lantern."]
    assert cards.equals(camp.story_cards())
    facade.delete_story_card(fresh.db, camp.id, card)
    assert facade.story_cards(fresh.db, camp.id).empty


def test_interop_imports_into_a_campaign_by_id(fresh):
    camp = fresh.new_campaign("Lore", protagonist="Ila")
    book = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "{{user}} hears the drowned bell.",
                              "comment": "The bell"}}}
    report = interop.import_file(fresh.db, book, campaign_id=camp.id)
    assert report.campaign_id == camp.id and report.title == "Lore"
    assert camp.story_cards()["entry"].tolist() == ["Ila hears the drowned bell."]
