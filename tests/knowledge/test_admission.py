"""Lexical evidence weighed by rarity, heading naming, the query's own weight,
and the relative cut, on real SQLite libraries with no embedder."""
import pytest
from conftest import ABBEY, CRYPT_SCENE

from engine.knowledge import Library
from engine.search import DEFAULT
from engine.search.admission import idf, lexical_admits, lexical_evidence, weigh

CAP_TERMS, COMMON_SHARE, HEADING_WEIGHT = DEFAULT.cap_terms, DEFAULT.common_share, DEFAULT.heading_weight
LEXICAL_MAX_REQUIRED, MIN_LIBRARY = DEFAULT.lexical_max_required, DEFAULT.min_library
NAMED_COMMON_SHARE = DEFAULT.named_common_share
RELATIVE_CUT = DEFAULT.relative_cut


BUDGET = 6000


@pytest.fixture
def lexical(db, campaign):
    return Library(db, campaign, lambda: None, progress=False)


def _rules_like(n: int) -> str:
    """n sections that all say "check" and "roll" (like a rules reference),
    each with one word of its own, and one section about grappling."""
    sections = [f"## Rule {i}\n\nMake a check and roll a die for the {word} of the day."
                for i, word in enumerate(f"thing{i}" for i in range(n))]
    sections.append("## Grappling\n\nTo grapple a creature, make a check contested by its escape.")
    return "\n\n".join(sections)


def test_idf_is_larger_for_rarer_words_and_never_negative():
    assert idf(1, 3000) > idf(10, 3000) > idf(300, 3000) > idf(3000, 3000) >= 0


def test_a_word_in_most_passages_weighs_nothing_and_a_named_one_twice():
    n = 3000
    weights = weigh([int(0.10 * n), 3, 0], n, ["check", "grapple", "latte"], standing=())
    assert weights.values[0] == 0.0  # over COMMON_SHARE: like a stop word for this library
    assert weights.values[1] == pytest.approx(idf(3, n))
    assert lexical_evidence({1}, weights, in_heading={1}) == pytest.approx(HEADING_WEIGHT * idf(3, n))
    # A word the library never uses weighs the most in the query's own weight.
    assert weights.query == pytest.approx(idf(3, n) + idf(0, n))
    assert COMMON_SHARE < NAMED_COMMON_SHARE


def test_a_heading_names_a_moderately_common_word_but_not_a_very_common_one():
    n = 3000
    weights = weigh([int(0.06 * n), int(0.10 * n)], n, ["holding", "checks"], standing=())
    assert lexical_evidence({0}, weights, in_heading={0}) > 0  # "Bag of Holding"
    assert lexical_evidence({1}, weights, in_heading={1}) == 0  # "Intelligence Checks"


def test_standing_names_count_only_beside_other_evidence():
    weights = weigh([2, 2], 3000, ["aldric", "crypt"], standing={"aldric"})
    assert lexical_evidence({0}, weights) == 0
    assert lexical_evidence({0, 1}, weights) == pytest.approx(2 * idf(2, 3000))


def test_the_cap_on_the_bar_grows_with_the_words_a_long_scene_holds():
    n = 3000
    short = weigh([5] * CAP_TERMS, n, [f"w{i}" for i in range(CAP_TERMS)], standing=())
    long = weigh([5] * 3 * CAP_TERMS, n, [f"w{i}" for i in range(3 * CAP_TERMS)], standing=())
    assert short.weighed == CAP_TERMS and short.required == LEXICAL_MAX_REQUIRED
    # three times the words: three times the chance overlap, three times the cap
    assert long.weighed == 3 * CAP_TERMS and long.required == pytest.approx(3 * LEXICAL_MAX_REQUIRED)
    # common words, unknown words and standing names are not weighed words
    mixed = weigh([int(0.5 * n), 0, 5, 5], n, ["check", "latte", "aldric", "crypt"], standing={"aldric"})
    assert mixed.weighed == 1


def test_the_newest_paragraph_is_weighed_on_its_own():
    n = 3000
    words = ["grapple"] + [f"story{i}" for i in range(29)]  # the reader's line, then 29 words of story
    frequencies = [3] + [60] * 29
    whole = weigh(frequencies, n, words, standing=())
    lead = weigh(frequencies, n, words, standing=(), only={0})
    assert (whole.weighed, lead.weighed) == (30, 1) and lead.query == pytest.approx(idf(3, n))
    named = lexical_evidence({0}, whole, in_heading={0})  # a "Grappling" heading
    assert not lexical_admits(named, whole)  # thirty words: chance overlap, so a high bar
    assert lexical_admits(lexical_evidence({0}, lead, in_heading={0}), lead)  # the line alone: a scene's bar
    assert lexical_evidence({5}, lead) == 0  # story words are not the newest paragraph's evidence


def test_a_small_library_measures_rarity_against_a_floor_of_passages():
    assert weigh([1], 1, ["westhaven"], ()).values[0] == pytest.approx(idf(1, MIN_LIBRARY))


def test_shared_common_words_no_longer_admit_an_everyday_scene(lexical):
    lexical.add("rules.md", _rules_like(60))
    assert lexical.retrieve("She makes a check of her phone and rolls her eyes at the day.",
                            budget_tokens=BUDGET).passages == ()


def test_a_rare_word_a_heading_names_is_found(lexical):
    lexical.add("rules.md", _rules_like(60))
    (p,) = lexical.retrieve("The orc tries to grapple me.", budget_tokens=BUDGET).passages
    assert "## Grappling" in p.text and p.evidence >= 2 * idf(1, MIN_LIBRARY) * 0.99


def _record(pid, evidence, cosine, cls="reference", always=False):
    from engine.search.results import Retrieved

    return Retrieved(pid, 1, "t", "f.md", cls, False, "", pid, "text", 1, always=always, evidence=evidence,
                     cosine=cosine)


def test_the_weak_tail_is_cut_on_relevance_not_authority():
    from engine.search.fusion import cut, normalise, rank

    ranked = rank(normalise([_record(1, 20.0, 0.5, "canon"), _record(2, 20.0, 0.5, "inspiration"),
                             _record(3, 0.0, 0.5 * RELATIVE_CUT, "canon"), _record(4, 0.0, 0.0, "canon", True)]))
    kept, weak = cut(ranked)
    # As relevant as the best, though of lower authority: kept. Far below: cut. Always-in-force: never cut.
    assert {r.passage_id for r in kept} == {1, 2, 4} and [r.passage_id for r in weak] == [3]


def test_the_report_lists_what_was_cut(lexical):
    lexical.add("abbey.md", ABBEY, classification="canon")
    sel = lexical.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert "below_cut" in sel.report and "scored far below the best" in sel.report["summary"]
