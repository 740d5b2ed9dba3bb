"""The scene query: state first, then the newest story, capped."""
from engine.context import tokens
from engine.knowledge import scene_query
from engine.knowledge.query import QUERY_STORY_TEXTS, QUERY_TOKENS


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
