
"""The notebook facade: import, inspect, change, reindex, status, display."""
from pathlib import Path

import pandas as pd
import pytest
from conftest import ABBEY, CRYPT_SCENE, TAVERN

from engine.errors import NotFound
from engine.knowledge import KnowledgeRefused, Library
from engine.knowledge import __all__ as public


def test_the_public_api_is_exactly_this():
    assert sorted(public) == sorted([
        "CANON", "CHUNKING_VERSION", "CLASSES", "CLASS_WEIGHTS", "HIDDEN", "INSPIRATION", "NORMAL",
        "PARSER_VERSION", "QUERY_STORY_TEXTS", "REFERENCE", "Chunk", "EmbeddingPass", "KnowledgeRefused", "Library",
        "Retrieved", "Selection", "Status", "catch_up", "chunk", "digest", "has_sources", "normalize", "render",
        "retrieve", "scene_query", "StagePass", "stage_for", "start_background", "prepare_query", "start_prepare",
        "wait_prepared",
    ])


def test_the_search_layer_exports_what_research_tunes_with():
    """Calibration, floors and the tuning value moved below knowledge, to the
    layer knowledge and memory share; research code imports them from there."""
    import engine.search as search

    assert {"Tuning", "DEFAULT", "find", "floor_for", "calibrate", "register", "FUSIONS", "relevance"} \
        <= set(search.__all__)
    assert all(hasattr(search, name) for name in search.__all__)


def test_list_and_passages_are_dataframes(library):
    a = library.add("abbey.md", ABBEY, classification="canon", notes="the bible")
    library.add("tavern.md", TAVERN)
    frame = library.list()
    assert isinstance(frame, pd.DataFrame) and list(frame.index) == [a["id"], a["id"] + 1]
    row = frame.loc[a["id"]]
    assert (row["title"], row["file"], row["class"], row["passages"], row["embedded"], row["notes"]) == \
        ("abbey", "abbey.md", "canon", 1, 1, "the bible")
    passages = library.passages(a["id"])
    assert list(passages.columns[:5]) == ["passage_id", "passage", "heading", "tokens", "text"]
    assert passages.iloc[0]["heading"] == "The Old Abbey" and passages.iloc[0]["passage"] == 1
    assert passages.iloc[0]["embedded_with"] == "test-topic-embedder"


def test_an_empty_library(db, campaign):
    lib = Library(db, campaign, progress=False)
    assert lib.list().empty and "empty" in str(lib.status())
    assert lib.status().data["semantic_enabled"] is False
    assert "empty" in lib._repr_html_()


def test_changes_are_read_at_the_next_retrieval(library):
    src = library.add("abbey.md", ABBEY)
    assert library.retrieve(CRYPT_SCENE, budget_tokens=6000).passages[0].classification == "reference"
    library.reclassify(src["id"], "canon")
    assert library.retrieve(CRYPT_SCENE, budget_tokens=6000).passages[0].classification == "canon"
    library.hide(src["id"])
    assert library.retrieve(CRYPT_SCENE, budget_tokens=6000).passages[0].hidden
    library.show(src["id"])
    library.disable(src["id"])
    assert library.retrieve(CRYPT_SCENE, budget_tokens=6000).passages == ()
    library.enable(src["id"])
    assert library.always_include(src["id"])["always_include"] is True
    assert library.retrieve("kiln", budget_tokens=6000).passages[0].always
    assert library.always_include(src["id"], False)["always_include"] is False
    with pytest.raises(KnowledgeRefused, match="not a knowledge class"):
        library.reclassify(src["id"], "gospel")


def test_always_include_is_refused_for_non_canon(library):
    src = library.add("tavern.md", TAVERN)
    with pytest.raises(KnowledgeRefused, match="Only Canon"):
        library.always_include(src["id"])
    assert library.list().loc[src["id"], "always_include"] == False  # noqa: E712


def test_sources_of_other_campaigns_are_not_reachable(library, db):
    # by path: a bare `import conftest` takes whichever test folder's conftest was imported last
    import importlib.util
    spec = importlib.util.spec_from_file_location("knowledge_conftest", Path(__file__).with_name("conftest.py"))
    here = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(here)
    new_campaign = here.new_campaign

    src = library.add("abbey.md", ABBEY)
    other = Library(db, new_campaign(db), progress=False)
    for action in (other.disable, other.delete, other.passages, other.hide):
        with pytest.raises(NotFound):
            action(src["id"])
    with pytest.raises(NotFound):
        Library(db, 999, progress=False).add("a.md", b"x y z")


def test_delete_removes_everything_derived(library, db):
    from sqlalchemy import text

    src = library.add("abbey.md", ABBEY)
    library.delete(src["id"])
    with db.reading() as s:
        for table in ("knowledge_sources", "knowledge_passages", "knowledge_embeddings", "knowledge_fts"):
            assert s.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0, table
    assert library.list().empty


def test_a_failing_reindex_marks_the_source_and_spares_the_rest(library, monkeypatch):
    good = library.add("tavern.md", TAVERN)
    bad = library.add("abbey.md", ABBEY)
    from engine.knowledge import importer

    real = importer.chunk
    monkeypatch.setattr(importer, "chunk", lambda text, markdown=True, **kw: [] if "Abbey" in text else real(text, markdown))
    result = library.reindex()
    assert result["sources"] == 1 and result["failed"][0]["id"] == bad["id"]
    frame = library.list()
    assert frame.loc[bad["id"], "index_state"] == "failed" and "no text" in frame.loc[bad["id"], "index_detail"]
    assert frame.loc[good["id"], "index_state"] == "ready"
    assert "Indexing “abbey” failed" in str(library.status())
    monkeypatch.setattr(importer, "chunk", real)
    assert library.reindex(bad["id"])["failed"] == []


def test_status_in_words_and_data(library):
    library.add("abbey.md", ABBEY, classification="canon")
    status = library.status()
    assert status.data["semantic_enabled"] and status.data["pending_embeddings"] == 0
    assert status.data["embedding_model"] == "test-topic-embedder" and status.data["semantic_floor"] == 0.6
    assert "every passage is embedded" in str(status) and "1 source(s)" in str(status)
    library.holder["embedder"] = None
    status = library.status()
    assert "lexical only" in str(status) and status.data["pending_embeddings"] == 0


def test_html_is_escaped_and_inert(library):
    library.add("<script>alert(1)</script>.md", "# <img src=x onerror=alert(1)>\n\nText about a crypt.",
                title="<b>bold</b>")
    html = library._repr_html_()
    assert "<script>" not in html and "<b>bold" not in html and "&lt;b&gt;bold" in html
    sel_html = library.retrieve("crypt", budget_tokens=6000)._repr_html_()
    assert "<img" not in sel_html and "<script>" not in sel_html


def test_progress_bars_on_import_and_embedding(db, campaign, topic, calibrated, capsys):
    lib = Library(db, campaign, lambda: topic, progress=True)
    body = "\n\n".join(f"## Part {i}\n\n" + "The crypt stair winds down past the ossuary. " * 30 for i in range(80))
    lib.add("long.md", body)
    err = capsys.readouterr().err
    assert "indexing long.md" in err and "embedding passages" in err


def test_an_embedder_that_cannot_load_does_not_undo_the_import(db, campaign):
    def broken():
        raise RuntimeError("the embeddings extra is not installed")

    lib = Library(db, campaign, broken, progress=False)
    src = lib.add("abbey.md", ABBEY)
    assert src["index_state"] == "ready" and "could not be loaded" in src["embedding"]
    assert "not installed" in src["embedding"] and len(lib.list()) == 1
    assert "could not be loaded" in str(lib.status())
