"""Recent story for a search, newest text first within a token budget."""
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context import tokens


def test_newest_text_first_and_the_oldest_that_fits_keeps_its_end():
    texts = ["alpha beta gamma delta epsilon", "one two three", "> I open the door."]
    budget = tokens.count(texts[2]) + tokens.count(texts[1]) + 2
    joined = tokens.newest_first(texts, budget)
    newest, middle, oldest = joined.split("\n\n")
    assert (newest, middle) == ("> I open the door.", "one two three")
    assert oldest and "alpha beta gamma delta epsilon".endswith(oldest)  # whole words from its end


def test_blank_texts_are_skipped_and_nothing_fits_in_nothing():
    assert tokens.newest_first(["a", "  ", "b"], 100) == "b\n\na"
    assert tokens.newest_first(["a", "b"], 0) == "" and tokens.newest_first([], 10) == ""


def test_a_word_cut_in_two_is_dropped_not_half_kept():
    long = "antidisestablishmentarianism " * 3 + "ends here"
    kept = tokens.newest_first([long], 4)
    assert kept and all(w in {"antidisestablishmentarianism", "ends", "here"} for w in kept.split())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=80), max_size=6), st.integers(min_value=0, max_value=60))
def test_never_more_than_the_budget_and_the_newest_text_leads(texts, budget):
    joined = tokens.newest_first(texts, budget)
    pieces = [t for t in texts if t.strip()]
    assert tokens.count(joined) <= budget + 2 * len(pieces)  # the separators are not budgeted
    if pieces and tokens.count(pieces[-1]) <= budget:
        assert joined.startswith(pieces[-1].strip())
