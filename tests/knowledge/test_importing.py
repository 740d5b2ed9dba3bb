"""Import checks: every refusal is a clear message and writes nothing."""
import pytest
from conftest import ABBEY, TAVERN, new_campaign
from sqlalchemy import text

from engine.errors import WorkbenchError
from engine.knowledge import CHUNKING_VERSION, PARSER_VERSION, KnowledgeRefused, Library
from engine.knowledge.intake import MAX_SOURCE_BYTES, MAX_SOURCES_PER_CAMPAIGN, safe_filename, size_label

TABLES = ("knowledge_sources", "knowledge_passages", "knowledge_embeddings", "knowledge_fts")


def census(db) -> dict[str, int]:
    with db.reading() as s:
        return {t: s.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in TABLES}


@pytest.fixture
def lib(db, campaign):
    return Library(db, campaign, progress=False)


def refused(lib, db, *args, **kwargs) -> str:
    before = census(db)
    with pytest.raises(KnowledgeRefused) as err:
        lib.add(*args, **kwargs)
    assert census(db) == before, "a refused import wrote rows"
    return str(err.value)


def test_refusal_is_a_workbench_error_and_a_value_error():
    assert issubclass(KnowledgeRefused, WorkbenchError) and issubclass(KnowledgeRefused, ValueError)


def test_unsupported_extension(lib, db):
    message = refused(lib, db, "notes.pdf", b"hello")
    assert "“notes.pdf”" in message and ".txt and .md" in message


def test_invalid_utf8_names_the_byte(lib, db):
    message = refused(lib, db, "bad.md", b"good start \xff\xfe bad")
    assert "byte 11" in message and "UTF-8" in message and "untouched" in message


@pytest.mark.parametrize("control", [b"\x00", b"\x0b", b"\x0c", b"\x7f"])
def test_control_characters_are_refused(lib, db, control):
    message = refused(lib, db, "bin.txt", b"text " + control + b" more")
    assert "control character(s)" in message


def test_tabs_and_windows_newlines_are_fine(lib):
    assert lib.add("ok.txt", b"col\tcol\r\nline two\r\n")["passages"] == 1


def test_oversized_bytes_and_files_are_refused_before_reading(lib, db, tmp_path):
    message = refused(lib, db, "big.md", b"a" * (MAX_SOURCE_BYTES + 1))
    assert "16 MB" in message and "smaller files" in message
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * (MAX_SOURCE_BYTES // 5 + 100))
    assert "at most 16 MB" in refused(lib, db, big)
    assert size_label(MAX_SOURCE_BYTES) == "16 MB" and size_label(int(1.4 * 2**20)) == "1.4 MB"


@pytest.mark.parametrize("raw", [b"", b"   \n\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf  \n"])
def test_empty_files_are_refused(lib, db, raw):
    assert "empty" in refused(lib, db, "empty.md", raw)


def test_a_bom_is_not_content(lib):
    a = lib.add("a.md", b"\xef\xbb\xbf# Title\n\nBody text.")
    assert lib.passages(a["id"]).text.tolist() == ["Body text."]


def test_duplicates_are_refused_with_the_conflict_unless_allowed(lib, db):
    first = lib.add("abbey.md", ABBEY, classification="canon")
    before = census(db)
    with pytest.raises(KnowledgeRefused) as err:
        lib.add("copy.md", ABBEY.replace("\n", "\r\n") + "   \n")  # same text once normalised
    assert census(db) == before
    assert err.value.conflict["source_id"] == first["id"] and "“abbey” (Canon)" in str(err.value)
    second = lib.add("copy.md", ABBEY, allow_duplicate=True)
    assert second["id"] != first["id"] and second["class"] == "reference"


def test_duplicates_are_per_campaign(lib, db):
    lib.add("abbey.md", ABBEY)
    other = Library(db, new_campaign(db), progress=False)
    assert other.add("abbey.md", ABBEY)["passages"] == 1


def test_the_source_limit(lib, db, monkeypatch):
    from engine.knowledge import importer

    monkeypatch.setattr(importer, "MAX_SOURCES_PER_CAMPAIGN", 3)
    for i in range(3):
        lib.add(f"s{i}.txt", f"source number {i}")
    message = refused(lib, db, "s3.txt", b"source number 3")
    assert "limit of 3" in message and "Delete one" in message and "holds 3" in message
    assert MAX_SOURCES_PER_CAMPAIGN == 200


def test_bad_class_and_visibility(lib, db):
    assert "not a knowledge class" in refused(lib, db, "a.md", b"x", classification="lore")
    assert "Canon" in refused(lib, db, "a.md", b"x", classification="lore")
    assert "not a visibility" in refused(lib, db, "a.md", b"x", visibility="secret")


def test_a_file_of_only_unicode_spaces_has_nothing_to_index(lib, db):
    assert "no text" in refused(lib, db, "nbsp.txt", "\u00a0\u2003\n".encode())


def test_filenames_are_names_not_paths():
    assert safe_filename("../../../../etc/passwd.md") == "passwd.md"
    assert safe_filename("C:\\Users\\x\\lore.txt") == "lore.txt"
    assert safe_filename("evil\u202eexe.dm.md") == "evilexe.dm.md"  # bidi override dropped
    assert safe_filename("...hidden.md") == "hidden.md"
    assert safe_filename("  a   b.md ") == "a b.md"
    assert safe_filename("") == "imported.txt" and safe_filename("..") == "imported.txt"
    assert len(safe_filename("x" * 400 + ".md")) == 255


def test_source_fields_and_always_include_is_canon_only(lib, db):
    ref = lib.add("tavern.md", TAVERN, always_include=True, notes="from the wiki", visibility="hidden",
                  title="  Taverns  ")
    assert (ref["title"], ref["class"], ref["always_include"], ref["visibility"], ref["notes"]) == \
           ("Taverns", "reference", False, "hidden", "from the wiki")
    canon = lib.add("abbey.md", ABBEY, classification="Canon", always_include=True)
    assert canon["always_include"] is True and canon["class"] == "canon"
    assert lib.reclassify(canon["id"], "reference")["always_include"] is False
    with db.reading() as s:
        row = s.execute(text("SELECT content, byte_size, media_type, content_hash, index_state, parser_version, "
                             "chunking_version FROM knowledge_sources WHERE id = :i"), {"i": canon["id"]}).one()
    assert row.content == ABBEY and row.byte_size == len(ABBEY.encode()) and row.media_type == "text/markdown"
    assert len(row.content_hash) == 64 and row.index_state == "ready"
    assert (row.parser_version, row.chunking_version) == (PARSER_VERSION, CHUNKING_VERSION)


def test_add_from_a_path_and_from_str(lib, tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(ABBEY, encoding="utf-8")
    a = lib.add(path, classification="canon")
    assert (a["file"], a["title"], a["passages"]) == ("guide.md", "guide", 1)
    b = lib.add("notes.txt", "# not a heading in plain text\n\nbody")
    assert lib.passages(b["id"]).text.tolist() == ["# not a heading in plain text\n\nbody"]
    with pytest.raises(KnowledgeRefused):
        lib.add(tmp_path / "missing.md")


def test_same_bytes_give_the_same_passages_and_hashes(lib):
    a = lib.add("abbey.md", ABBEY * 1)
    b = lib.add("abbey-again.md", ABBEY, allow_duplicate=True)
    pa, pb = lib.passages(a["id"]), lib.passages(b["id"])
    assert pa[["heading", "text", "content_hash"]].equals(pb[["heading", "text", "content_hash"]])
