"""Hybrid retrieval: absolute admission per path, then ranking, then budget."""
import json
from dataclasses import replace

import pytest
from conftest import ABBEY, CRYPT_SCENE, KILN_SCENE, OSSUARY, SHIP, SURGERY, TAVERN, TIDE_SCENE, new_campaign
from knowledge_doubles import BlindEmbedder, FailingEmbedder, GenerousEmbedder, TopicEmbedder
from sqlalchemy import text

from engine.knowledge import catch_up, render, retrieve
from engine.search import DEFAULT
from engine.search.classes import CLASS_WEIGHTS

SECRET = "# The Silver Key\n\nThe silver key to the abbey crypt lies under the altar stone of the chapel.\n"
MOOD = ("# Dark Roads\n\nFog lies on the road like wet wool; a lantern makes a small room of light that walks "
        "with you.\n")
BUDGET = 6000


def fantasy(lib):
    """Five sources of a fantasy campaign, hidden Canon among them."""
    lib.add("abbey.md", ABBEY, classification="canon")
    lib.add("tavern.md", TAVERN, classification="reference")
    lib.add("ossuary.md", OSSUARY, classification="reference")
    lib.add("hidden-key.md", SECRET, classification="canon", visibility="hidden")
    lib.add("mood.md", MOOD, classification="inspiration")


def files(selection) -> list[str]:
    return [p.filename for p in selection.passages]


def test_an_off_topic_scene_admits_nothing(library):
    fantasy(library)
    sel = library.retrieve(TIDE_SCENE, budget_tokens=BUDGET)
    r = sel.report
    assert sel.passages == () and r["used"] == []
    assert r["semantic_used"] and r["semantic_calibrated"] and r["generated"] > 0
    assert r["rejected"] == r["generated"] and r["suppressed"] == []
    static, volatile = render(sel)
    assert volatile == "" and "silver key" not in static.lower()
    assert "How to use imported knowledge" in static  # the rule stays: the campaign has sources


def test_the_old_relative_rule_would_have_admitted_everything(library, db, campaign, topic):
    """What M7-F1 was: a share-of-the-best floor always admits something."""
    fantasy(library)
    sel = library.retrieve(KILN_SCENE, budget_tokens=BUDGET)
    assert sel.passages == ()
    from engine.search.vectors import cosines, load_matrix

    with db.reading() as s:
        matrix = load_matrix(s, ("probe",), campaign, topic.model_id)
    scores = cosines(matrix.vectors, topic.embed([KILN_SCENE])[0])
    relative = max(0.02, scores.max() * 0.25)
    assert (scores >= relative).all() and (scores < 0.6).all()


def test_a_generous_uncalibrated_embedder_cannot_recreate_it(library):
    fantasy(library)
    generous = GenerousEmbedder()
    library.holder["embedder"] = generous
    library.embed_pending()
    calls = []
    generous.embed = lambda texts, _orig=generous.embed: calls.append(texts) or _orig(texts)
    for scene in (TIDE_SCENE, KILN_SCENE):
        sel = library.retrieve(scene, budget_tokens=BUDGET)
        r = sel.report
        assert sel.passages == () and not r["semantic_calibrated"] and not r["semantic_used"]
        assert r["semantic_floor"] == 0.0 and r["embedding_model"] == "generous-embedder"
        assert "generous-embedder" in r["semantic_note"] and "lexical only" in r["semantic_note"]
        assert "nomic-embed-text" in r["semantic_note"]
    assert calls == []  # no semantic call at all for an uncalibrated model
    status = library.status()
    assert not status.data["semantic_enabled"] and "no measured relevance calibration" in str(status)


def test_a_generous_embedder_under_a_calibrated_name_shows_why_the_registry_matters(library, calibrated):
    """The fixture can admit: the same embedder, wrongly registered, admits
    the off-topic file. This is exactly what a borrowed floor would do."""
    library.add("ship.md", SHIP, classification="canon")
    library.holder["embedder"] = GenerousEmbedder()
    calibrated("generous-embedder", 0.58)
    library.embed_pending()
    assert files(library.retrieve(KILN_SCENE, budget_tokens=BUDGET)) == ["ship.md"]


def test_the_lexical_path_works_with_no_calibration(library):
    library.add("abbey.md", ABBEY, classification="canon")
    library.add("ship.md", SHIP, classification="canon")
    library.holder["embedder"] = None
    sel = library.retrieve("Aldric asks about Westhaven and the broken circle.", budget_tokens=BUDGET)
    (p,) = sel.passages
    assert p.filename == "abbey.md" and p.found_by == "lexical" and len(p.matched_terms) >= 2
    assert not sel.report["semantic_used"] and "No embedder" in sel.report["semantic_note"]
    assert any(s["name"] == "imported_canon" for s in sel.report["sections"])


def test_a_paraphrase_is_found_semantically(library):
    library.add("ossuary.md", OSSUARY, classification="reference")
    library.add("ship.md", SHIP, classification="canon")
    scene = "Aldric examines where the monks kept their skeletal remains beneath the church floor."
    sel = library.retrieve(scene, budget_tokens=BUDGET)
    (p,) = sel.passages
    assert p.filename == "ossuary.md" and p.found_by == "semantic" and p.matched_terms == ()
    assert p.cosine >= 0.6
    library.holder["embedder"] = TopicEmbedder("unmeasured-model")
    assert library.retrieve(scene, budget_tokens=BUDGET).passages == ()


def test_a_four_term_exact_match_is_found_lexically_below_the_floor(library, calibrated):
    library.add("abbey.md", ABBEY, classification="canon")
    library.holder["embedder"] = BlindEmbedder()
    calibrated(BlindEmbedder.model_id, 0.6)
    library.embed_pending()
    sel = library.retrieve("the broken circle cut into the keystone above the crypt stair", budget_tokens=BUDGET)
    (p,) = sel.passages
    assert sel.report["semantic_used"] and p.cosine is not None and p.cosine < 0.6
    assert p.found_by == p.admitted_by == "lexical" and len(p.matched_terms) >= 4 and p.semantic == p.cosine


def test_both_paths_agree(library):
    library.add("abbey.md", ABBEY, classification="canon")
    (p,) = library.retrieve(CRYPT_SCENE + " The broken circle above the stair.", budget_tokens=BUDGET).passages
    assert p.found_by == "both" and p.lexical > 0 and p.semantic > 0


@pytest.mark.parametrize(("scene", "admitted"), [
    ("Aldric waits by the door while the rain keeps falling on the roof tiles outside.", False),  # one standing name
    ("Westhaven?", True),  # one term that is the whole query
    ("Aldric Westhaven", True),  # two terms, even with a standing name among them
    ("Aldric wonders", False),  # a standing name alone is never distinctive
    ("crypt lanterns glowing dimly tonight", False),  # one term of five is not evidence
])
def test_lexical_admission_rules(library, scene, admitted):
    library.add("abbey.md", ABBEY + "\nAldric was here once.", classification="canon")
    library.holder["embedder"] = None
    assert bool(library.retrieve(scene, budget_tokens=BUDGET).passages) is admitted


def test_standing_names_passed_by_the_caller_count_as_standing(library):
    library.add("mara.md", "# Mara\n\nMara keeps the lighthouse.", classification="canon")
    library.holder["embedder"] = None
    assert library.retrieve("Mara", budget_tokens=BUDGET).passages  # one distinctive term of one
    assert library.retrieve("Mara", budget_tokens=BUDGET, standing=["Mara"]).passages == ()


def test_class_weights_order_equal_relevance(library):
    for cls, name in (("inspiration", "c.md"), ("reference", "b.md"), ("canon", "a.md")):
        library.add(name, ABBEY, classification=cls, allow_duplicate=True)
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    by_class = {p.classification: p.score for p in sel.passages}
    assert by_class["canon"] > by_class["reference"] > by_class["inspiration"]
    assert by_class["reference"] / by_class["canon"] == pytest.approx(CLASS_WEIGHTS["reference"])


def test_authority_never_rescues_irrelevance(library):
    library.add("ossuary.md", OSSUARY, classification="reference")
    library.add("ship.md", SHIP, classification="canon")
    library.add("surgery.md", SURGERY, classification="canon")
    assert files(library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)) == ["ossuary.md"]
    for cls in ("canon", "reference", "inspiration"):
        library.reclassify(1, cls)
        assert library.retrieve(KILN_SCENE, budget_tokens=BUDGET).passages == ()


def test_near_repeats_are_suppressed_within_a_class_only(library):
    a = library.add("abbey.md", ABBEY, classification="canon")
    library.add("abbey-copy.md", ABBEY + "\nCopied from the wiki.", classification="canon")
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert [p.filename for p in sel.passages if p.filename.startswith("abbey")] in (["abbey.md"], ["abbey-copy.md"])
    (dup,) = sel.report["suppressed"]
    assert dup["duplicate_of"] in {p.passage_id for p in sel.passages}
    library.reclassify(a["id"], "reference")
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert {p.filename for p in sel.passages} == {"abbey.md", "abbey-copy.md"}
    assert sel.report["suppressed"] == []


def test_exact_repeats_are_suppressed_without_vectors(library):
    library.add("abbey.md", ABBEY, classification="canon")
    library.add("again.md", ABBEY, classification="canon", allow_duplicate=True)
    library.holder["embedder"] = None
    sel = library.retrieve("Westhaven broken circle", budget_tokens=BUDGET)
    assert len(sel.passages) == 1 and len(sel.report["suppressed"]) == 1


def test_disabled_sources_are_not_searched_and_not_framed(library):
    src = library.add("abbey.md", ABBEY, classification="canon")
    library.disable(src["id"])
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert sel.passages == () and sel.report["generated"] == 0
    assert render(sel) == ("", "")


def test_campaigns_are_isolated(library, db):
    library.add("abbey.md", ABBEY, classification="canon")
    other = new_campaign(db)
    sel = retrieve(db, other, CRYPT_SCENE, embedder=library.embedder, budget_tokens=BUDGET)
    assert sel.passages == () and sel.report["generated"] == 0 and render(sel) == ("", "")
    assert files(library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)) == ["abbey.md"]


def test_excluded_passages_are_left_out(library):
    library.add("abbey.md", ABBEY, classification="canon")
    (p,) = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).passages
    assert library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, exclude=[p.passage_id]).passages == ()


def test_a_precomputed_query_vector_skips_the_embedding_call(library, db, campaign, topic):
    library.add("abbey.md", ABBEY, classification="canon")
    vector = topic.embed([CRYPT_SCENE])[0]
    before = topic.calls
    sel = retrieve(db, campaign, CRYPT_SCENE, embedder=topic, budget_tokens=BUDGET, query_vector=vector)
    assert topic.calls == before and files(sel) == ["abbey.md"]


def test_each_paragraph_of_a_scene_is_searched_on_its_own(library, topic):
    library.add("abbey.md", ABBEY, classification="canon")
    alone = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).passages[0]
    calls = topic.calls
    sel = library.retrieve(f"{TIDE_SCENE}\n\n{CRYPT_SCENE}", budget_tokens=BUDGET)
    (abbey,) = [p for p in sel.passages if p.filename == "abbey.md"]
    assert abbey.cosine == pytest.approx(alone.cosine)  # its best part, not the blend of both
    assert topic.calls == calls + 1  # both parts in one embedding call


def test_always_in_force_canon_is_static_and_capped(library):
    rules = library.add("rules.md", "# World Rules\n\nIron burns the fae. The dead do not speak.",
                        classification="canon", always_include=True)
    sel = library.retrieve(KILN_SCENE, budget_tokens=BUDGET)
    (p,) = sel.passages
    assert p.always and p.found_by == "always" and p.admitted_by == ""
    static, volatile = render(sel)
    assert "ALWAYS IN FORCE" in static and "Iron burns the fae." in static and volatile == ""
    assert sel.report["used"][0]["found_by"] == "always"
    tight = library.retrieve(KILN_SCENE, budget_tokens=BUDGET, context_tokens=100)
    assert tight.passages == () and tight.report["dropped"][0]["reason"].startswith("over the always")
    library.disable(rules["id"])
    assert library.retrieve(KILN_SCENE, budget_tokens=BUDGET).passages == ()


def test_a_model_switch_re_embeds_instead_of_mixing(library, db, calibrated):
    fantasy(library)
    second = TopicEmbedder("second-model")
    calibrated("second-model", 0.6)
    library.holder["embedder"] = second
    with db.reading() as s:
        assert set(s.execute(text("SELECT DISTINCT model FROM knowledge_embeddings")).scalars()) == \
            {"test-topic-embedder"}
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert not sel.report["semantic_used"] and "have been embedded" in sel.report["semantic_note"]
    assert all(p.semantic == 0 for p in sel.passages)
    assert library.status().data["pending_embeddings"] > 0
    assert second.calls == 0
    outcome = catch_up(db, library.campaign_id, second)
    assert outcome.embedded == 5 and outcome.remaining == 0 and not outcome.error
    with db.reading() as s:
        assert set(s.execute(text("SELECT DISTINCT model FROM knowledge_embeddings")).scalars()) == {"second-model"}
        assert s.execute(text("SELECT count(*) FROM knowledge_embeddings")).scalar() == 5
    assert library.status().data["pending_embeddings"] == 0
    assert library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report["semantic_used"]


def test_an_embedder_failure_costs_neither_the_import_nor_retrieval(library, db):
    library.holder["embedder"] = FailingEmbedder()
    src = library.add("abbey.md", ABBEY, classification="canon")
    assert src["index_state"] == "ready" and src["embed_state"] == "failed"
    assert "ConnectionError: connection refused" in src["embed_detail"] and "failed" in src["embedding"]
    status = library.status()
    assert status.data["failed_embedding"][0]["id"] == src["id"] and "connection refused" in str(status)
    sel = library.retrieve("Aldric asks about Westhaven and the broken circle.", budget_tokens=BUDGET)
    assert files(sel) == ["abbey.md"] and sel.passages[0].found_by == "lexical"
    library.holder["embedder"] = TopicEmbedder()
    assert library.embed_pending().embedded == 1
    assert library.list().loc[src["id"], "embed_state"] == "ok"


def test_catch_up_is_bounded_and_resumable(library, db):
    library.holder["embedder"] = None
    for i in range(5):
        library.add(f"n{i}.md", f"# Note {i}\n\nA distinct note number {i} about crypts.")
    topic = TopicEmbedder()
    first = catch_up(db, library.campaign_id, topic, limit=2)
    assert (first.embedded, first.remaining) == (2, 3) and "remain pending" in first.words
    assert sorted(library.list().embed_state) == ["ok", "ok", "pending", "pending", "pending"]
    assert catch_up(db, library.campaign_id, topic, limit=None).remaining == 0


def test_reindex_keeps_vectors_of_unchanged_passages(library, db, topic):
    library.add("abbey.md", ABBEY, classification="canon")
    before = topic.calls
    result = library.reindex()
    assert result["sources"] == 1 and result["embedded"] == 0 and topic.calls == before
    assert library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report["semantic_used"]
    result = library.reindex(semantic=True)
    assert result["embedded"] == 1 and result["semantic"]


def test_the_report_is_json_and_complete(library):
    fantasy(library)
    sel = library.retrieve(CRYPT_SCENE + " Westhaven broken circle", budget_tokens=BUDGET)
    report = json.loads(json.dumps(sel.report))
    for key in ("used", "dropped", "suppressed", "terms", "considered", "generated", "rejected", "semantic_floor",
                "semantic_calibrated", "embedding_model", "semantic_used", "semantic_note", "scan_truncated",
                "budget", "spent", "protected_tokens", "summary", "sections"):
        assert key in report, key
    assert report["generated"] >= len(report["used"]) and report["semantic_floor"] == 0.6
    for used in report["used"]:
        for key in ("passage_id", "source_id", "title", "filename", "classification", "visibility", "heading",
                    "passage", "found_by", "admitted_by", "lexical", "semantic", "cosine", "score",
                    "matched_terms", "cost", "text", "rendered", "prompt_tokens"):
            assert key in used, key
        assert used["found_by"] in {"lexical", "semantic", "both", "always"}
    assert "passage(s) used" in report["summary"]


def test_the_vector_cache_sees_every_change(library, db, topic, monkeypatch):
    """Cached vectors are checked against the stored rows on every turn."""
    from engine.search import vectors


    a = library.add("abbey.md", ABBEY, classification="canon")
    library.add("ossuary.md", OSSUARY, classification="reference")
    assert len(library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0)).passages) == 2
    reads_before = []
    real = vectors._read
    vectors._read = lambda s, ids: reads_before.append(len(ids)) or real(s, ids)
    try:
        library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))
        assert reads_before == []  # warm: nothing re-read
        library.disable(a["id"])
        assert files(library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))) == ["ossuary.md"]
        library.enable(a["id"])
        assert reads_before == []  # enabling is a filter, not a reload
        library.reindex(semantic=True)  # every vector replaced by a new row
        sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))
        assert reads_before == [2] and len(sel.passages) == 2
        library.delete(a["id"])
        assert files(library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))) == ["ossuary.md"]
        assert reads_before == [2]  # a deletion needs no read at all
    finally:
        vectors._read = real
