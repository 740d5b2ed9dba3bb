"""The scene query: state first, then the newest story (newest text first), capped; and its parts."""
from engine.context import tokens
from engine.knowledge import scene_query
from engine.search import DEFAULT
from engine.search import lexical as fts
from engine.search.query import QUERY_PARTS, QUERY_STORY_TEXTS, QUERY_TOKENS, query_parts


def test_state_comes_first_then_the_newest_story():
    story = [f"Turn {i} happens at the quay." for i in range(10)]
    query = scene_query(story, ["At the Old Abbey.", "Mara is here."])
    first, rest = query.split("\n", 1)
    assert first == "At the Old Abbey. Mara is here."
    assert "Turn 9" in rest and f"Turn {10 - QUERY_STORY_TEXTS}" in rest and f"Turn {9 - QUERY_STORY_TEXTS}" not in rest


def test_long_story_is_cut_to_its_newest_tokens():
    story = ["old words " * 50, "middle " * 400, "newest ending here " * 300]
    query = scene_query(story)
    assert tokens.count(query) <= QUERY_TOKENS + 2
    assert query.endswith("newest ending here") and "old words" not in query


def test_empty_inputs():
    assert scene_query([]) == "" and scene_query(["  "], ["", " "]) == ""


def test_the_newest_text_comes_first_and_its_words_make_the_term_cut():
    older = [" ".join(f"filler{t}x{i}" for i in range(80)) for t in range(3)]
    query = scene_query([*older, "> I pry open the reliquary of Saint Ostrava."], ["Mara"])
    assert query.split("\n")[1] == "> I pry open the reliquary of Saint Ostrava."
    words = fts.terms(query)[: DEFAULT.max_terms]
    assert {"reliquary", "ostrava", "mara"} <= set(words) and "filler0x0" not in words


def test_parts_are_paragraphs_newest_first_and_capped():
    query = scene_query(["First turn.\n\nIts second paragraph.", "> I look around."], ["Mara"])
    assert query_parts(query) == ["Mara\n> I look around.", "First turn.", "Its second paragraph."]
    many = "\n\n".join(f"paragraph {i}" for i in range(QUERY_PARTS + 3))
    assert query_parts(many) == [f"paragraph {i}" for i in range(QUERY_PARTS)]
    assert query_parts("") == [] and query_parts(" \n\n ") == []
