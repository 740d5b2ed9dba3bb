"""The chunker and the intake on real public documents (tests/data/knowledge,
see SOURCES.md): setext headings, tables, entries, plain prose, encodings."""
from pathlib import Path

import pytest
from conftest import new_campaign

from engine.context import tokens
from engine.knowledge import KnowledgeRefused, Library
from engine.knowledge.chunking import ENTRY_BREAK, HARD_MAX, TARGET_MAX, chunk
from engine.knowledge.intake import MAX_SOURCE_BYTES, decode_with_encoding

DATA = Path(__file__).parents[1] / "data" / "knowledge"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8-sig")


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


@pytest.fixture(scope="module")
def srd() -> str:
    return _read("srd5.md")


def test_setext_headings_are_headings_and_their_underlines_are_not_text(srd):
    combat = _section(srd, "Combat\n======", "Spellcasting\n============")
    passages = chunk(combat)
    assert passages[0].heading.startswith("Combat > The Order of Combat")
    assert not any("=====" in p.text or "\n-------" in p.text for p in passages)
    grappling = [p for p in passages if "Grappling" in p.heading]
    assert grappling and grappling[0].heading == "Combat > Making an Attack > Melee Attacks > Grappling"


def test_a_setext_chapter_ends_the_previous_chapters_subheadings(srd):
    # In the reference the monsters' "Octopus" was filed under "Outer Planes".
    passages = chunk(_section(srd, "Appendix PH-C: The Planes", "Appendix MM-B"))
    octopus = [p for p in passages if p.heading.endswith("> Octopus")]
    assert octopus and {p.heading for p in octopus} == {"Appendix MM-A: Miscellaneous Creatures > Octopus"}


def test_a_long_table_is_split_by_rows_with_its_header_in_every_piece(srd):
    druid = srd[srd.index("#### The Druid"):]
    table = druid[druid.index("| Level"):]
    table = table[:table.index("\n\n")]
    assert tokens.count(table) > HARD_MAX  # the real table is long enough to need cutting
    pieces = chunk("#### The Druid\n\n" + table)
    header = table.split("\n")[0]
    assert len(pieces) > 1 and all(p.text.startswith(header) for p in pieces)
    assert all(p.tokens <= TARGET_MAX and "\n|---" in p.text for p in pieces)
    rows = [line for line in table.split("\n")[2:]]
    kept = [line for p in pieces for line in p.text.split("\n")[2:]]
    assert kept == rows  # every row once, in order, each on its own line


def test_an_entrys_inner_heading_never_parents_the_next_entry():
    book = "\n\n".join([
        "# Westhaven lorebook", ENTRY_BREAK, "## The Lighthouse", "# Keeper's log",
        "The lamp has been dark since the storm. " * 12, ENTRY_BREAK, "## The Harbour",
        "Fishing boats crowd the quay at dawn and the harbour master counts every crate. " * 8,
    ])
    harbour = [p for p in chunk(book) if "fishing boats" in p.text.lower()]
    assert harbour and all(p.heading == "Westhaven lorebook > The Harbour" for p in harbour)


def test_plain_text_is_cut_at_paragraphs_and_sentences_never_mid_sentence():
    novel = _read("treasure_island.txt")[:60_000]
    passages = chunk(novel, markdown=False)
    assert all(p.heading == "" and p.tokens <= TARGET_MAX for p in passages)
    endings = [p.text.rstrip()[-1] for p in passages]
    # A passage ends where a paragraph or a sentence ends (a closing quote may follow).
    assert sum(e in ".!?”’\"'—-:;)" for e in endings) >= 0.9 * len(endings), endings
    assert "".join(novel.split()) == "".join("".join(p.text for p in passages).split())


def test_a_cp1252_text_is_read_and_its_encoding_reported(db):
    excerpt = _read("treasure_island.txt")[:4000]
    raw = excerpt.encode("cp1252")
    assert b"\x93" in raw  # curly quotes, the bytes that are not UTF-8
    text, encoding = decode_with_encoding(raw, "island.txt")
    assert text == excerpt and encoding.startswith("cp125")
    summary = Library(db, new_campaign(db), progress=False).add("island.txt", raw)
    assert summary["encoding"] == encoding and encoding in summary["index_detail"]


def test_text_whose_encoding_cannot_be_trusted_is_refused_with_nothing_written(db):
    lib = Library(db, new_campaign(db), progress=False)
    with pytest.raises(KnowledgeRefused, match="could not be recognised"):
        lib.add("noise.txt", bytes(range(128, 256)) * 4)
    assert lib.list().empty


def test_a_source_larger_than_the_old_one_megabyte_limit_imports(db):
    raw = (DATA / "srd5.md").read_bytes()
    assert 1024 * 1024 < len(raw) < MAX_SOURCE_BYTES
    summary = Library(db, new_campaign(db), progress=False).add("srd5.md", raw)
    assert summary["index_state"] == "ready" and summary["passages"] > 2000


def test_a_source_from_an_older_chunker_is_named_until_reindexed(db):
    from engine.knowledge.chunking import CHUNKING_VERSION
    from engine.store.knowledge_tables import KnowledgeSourceRow

    lib = Library(db, new_campaign(db), progress=False)
    src = lib.add("lore.md", _read("openlore.md")[:20_000])
    with db.writing() as s:
        s.get(KnowledgeSourceRow, src["id"]).chunking_version = CHUNKING_VERSION - 1
    assert "older version of the chunker" in str(lib.status())
    lib.reindex(src["id"])
    assert lib.status().data["stale_chunking"] == [] and "older version" not in str(lib.status())


def test_a_worldbook_imported_as_knowledge_files_each_entry_under_its_own_title(tmp_path):
    """The reference's failure: an entry's own '# heading' parented every later entry."""
    from engine import Workbench

    lighthouse = ("# Keeper's log\n\n" + "The lamp has been dark since the autumn storm, and the keeper counts "
                  "the ships that pass without it. " * 6)
    harbour = "Fishing boats crowd the quay at dawn while the harbour master counts every crate. " * 6
    book = {"name": "Westhaven lore", "entries": {
        "0": {"uid": 0, "key": ["lighthouse"], "comment": "The Lighthouse", "content": lighthouse},
        "1": {"uid": 1, "key": ["harbour"], "comment": "The Harbour", "content": harbour}}}
    wb = Workbench.open(tmp_path / "lore.db", background=False)
    report = wb.import_sillytavern(book, as_knowledge=True)
    lib = Library(wb.db, report.campaign_id, progress=False)
    (source_id,) = lib.list().index
    passages = lib.passages(source_id)
    quay = passages[passages.text.str.contains("Fishing boats")]
    assert len(quay) and set(quay.heading) == {"Westhaven lore > The Harbour"}
    wb.close()


def test_a_sixteen_megabyte_source_imports_with_progress_and_is_searchable(db, capfd):
    """Ten copies of the rules reference (14.9 MiB, 22,880 passages): imported
    in 10-18 s on this machine while other jobs shared its two cores."""
    raw = b"\n\n".join([(DATA / "srd5.md").read_bytes()] * 10)
    assert 14.5 * 2**20 < len(raw) <= MAX_SOURCE_BYTES
    lib = Library(db, new_campaign(db), progress=True)
    summary = lib.add("srd-x10.md", raw, embed_now=0)
    assert summary["index_state"] == "ready" and summary["passages"] > 20_000
    assert "chunking" in capfd.readouterr().err  # the bar a reader watches
    found = lib.retrieve("The orc grapples me and I try to escape the grapple.", budget_tokens=2664)
    assert any("Grappling" in p.heading or "## " in p.text and "Grappling" in p.text for p in found.passages)


def test_embedding_can_be_left_to_derived_work(db):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from knowledge_doubles import TopicEmbedder

    lib = Library(db, new_campaign(db), lambda: TopicEmbedder(), progress=False)
    summary = lib.add("lore.md", _read("openlore.md")[:20_000], embed_now=0)
    assert summary["embedded"] == 0 and "remain pending" in summary["embedding"]
    assert lib.embed_pending().remaining == 0 and lib.list()["embedded"].iloc[0] == summary["passages"]
