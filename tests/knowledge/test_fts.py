"""The lexical index: terms, quoting, stemming, scope, and staying in step."""
from conftest import ABBEY, TAVERN, new_campaign
from sqlalchemy import text

from engine.knowledge import Library
from engine.search import lexical as fts
from engine.search.stopwords import STOP_WORDS
from engine.store import CampaignRow


def test_terms_are_distinct_meaningful_and_in_order():
    assert fts.terms("Aldric asks about Westhaven and the broken-circle, and Westhaven's gate.") == \
        ["aldric", "asks", "westhaven", "broken-circle", "westhaven's", "gate"]
    assert fts.terms("It was before the one thing, I said.") == []
    assert fts.terms("__ '-' a x9") == ["x9"]


def test_stop_words_hold_no_subjects():
    for generic in ("before", "after", "like", "one", "two", "turned", "said", "known", "things", "way"):
        assert generic in STOP_WORDS
    for subject in ("old", "north", "beneath", "asks", "abbey", "tavern", "key", "silver", "keep", "well"):
        assert subject not in STOP_WORDS


def test_quoting_neutralises_fts_syntax():
    assert fts.match_expression(["near(", 'say"x', "a*"]) == '"near(" OR "say""x" OR "a*"'


def test_search_sql_is_scoped_capped_and_best_first():
    sql = fts.search_sql()
    for needle in ("MATCH :query", "p.campaign_id = :campaign", "s.enabled = 1", "s.index_state = 'ready'",
                   "LIMIT :limit", "-bm25(knowledge_fts)"):
        assert needle in sql
    evidence = fts.evidence_sql(2)
    assert evidence.count("MATCH") == 2 and ":w0" in evidence and ":w1" in evidence and "UNION ALL" in evidence


def test_syntax_in_a_query_is_just_text(db, campaign):
    lib = Library(db, campaign, progress=False)
    lib.add("abbey.md", ABBEY)
    with db.reading() as s:
        for hostile in ['NEAR(abbey crypt)', 'abbey* OR "', "crypt) OR (x", "-abbey ^crypt"]:
            fts.search(s, campaign, fts.terms(hostile), 10)  # no syntax error


def test_porter_stemming_finds_other_forms(db, campaign):
    lib = Library(db, campaign, progress=False)
    lib.add("abbey.md", ABBEY)
    with db.reading() as s:
        hits = fts.search(s, campaign, ["crypts", "keystones"], 10)
        assert len(hits) == 1 and hits[0][1] > 0
        (pid, _), = hits
        assert fts.evidence(s, ["crypts", "keystones", "westhaven", "kiln"], [pid]) == {pid: frozenset({0, 1, 2})}


def test_headings_are_searchable(db, campaign):
    lib = Library(db, campaign, progress=False)
    lib.add("abbey.md", "# Silverkey Hall\n\nA long room of portraits.")
    with db.reading() as s:
        assert len(fts.search(s, campaign, ["silverkey"], 5)) == 1


def test_scope_campaign_enabled_and_ready(db, campaign):
    a = Library(db, campaign, progress=False)
    b = Library(db, new_campaign(db), progress=False)
    src = a.add("abbey.md", ABBEY)
    b.add("tavern.md", TAVERN)
    with db.reading() as s:
        assert len(fts.search(s, campaign, ["abbey", "taverns"], 10)) == 1
        assert len(fts.search(s, b.campaign_id, ["abbey", "taverns"], 10)) == 1
    a.disable(src["id"])
    with db.reading() as s:
        assert fts.search(s, campaign, ["abbey"], 10) == []
    a.enable(src["id"])
    with db.writing() as s:
        s.execute(text("UPDATE knowledge_sources SET index_state = 'pending'"))
    with db.reading() as s:
        assert fts.search(s, campaign, ["abbey"], 10) == []


def fts_rows(db) -> set[int]:
    with db.reading() as s:
        return set(s.execute(text("SELECT rowid FROM knowledge_fts")).scalars())


def passage_ids(db) -> set[int]:
    with db.reading() as s:
        return set(s.execute(text("SELECT id FROM knowledge_passages")).scalars())


def test_index_follows_deletes_reindex_and_campaign_deletion(db, campaign):
    lib = Library(db, campaign, progress=False)
    other = Library(db, new_campaign(db), progress=False)
    keep = other.add("tavern.md", TAVERN)
    src = lib.add("abbey.md", ABBEY * 1)
    lib.add("more.md", ABBEY + "\n\nMore about the abbey.")
    assert fts_rows(db) == passage_ids(db)
    lib.reindex()
    assert fts_rows(db) == passage_ids(db)
    lib.delete(src["id"])
    assert fts_rows(db) == passage_ids(db)
    highest = max(passage_ids(db))  # the campaign being deleted holds the newest passages
    with db.writing() as s:  # a campaign's cascade delete reaches the index through the trigger
        s.delete(s.get(CampaignRow, campaign))
    assert fts_rows(db) == passage_ids(db) and len(passage_ids(db)) == keep["passages"]
    fresh = other.add("abbey.md", ABBEY)  # ids are never reused, so no stale index row can collide
    assert min(other.passages(fresh["id"]).passage_id) > highest
    assert fts_rows(db) == passage_ids(db)


def test_a_heading_is_stemmed_word_by_word_as_the_index_stems_it():
    """Headings are stemmed through a per-word cache (a turn meets a hundred new
    headings made of words it has seen); the stems must be the stemmer's own
    for the whole heading, as the index's porter tokenizer makes them."""
    import re
    from pathlib import Path

    import snowballstemmer

    srd = (Path(__file__).parents[1] / "data" / "knowledge" / "srd5.md").read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in srd.splitlines() if line.startswith("#")][:400]
    porter = snowballstemmer.stemmer("porter")
    assert len(headings) > 100
    for heading in headings:
        whole = frozenset(porter.stemWords(re.findall(r"[^\W_]+", heading.lower())))
        assert fts._stems(heading) == whole, heading
    assert fts.in_heading("Casting Spells", ["spell", "cast", "wizard"]) == {0, 1}
