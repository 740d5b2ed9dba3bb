import engine.narrative as narrative


def test_all_is_exact():
    public = {name for name in vars(narrative) if not name.startswith("_")}
    submodules = {"model", "events", "extract", "apply", "render", "leaks", "prose", "from_prose"}
    assert set(narrative.__all__) == public - submodules | {"apply"}
    assert len(narrative.__all__) == len(set(narrative.__all__))
    for name in narrative.__all__:
        assert getattr(narrative, name) is not None


def test_reply_to_prompt_round_trip():
    reply = ('Mara pockets the silver key.\n```state\n{"events": ['
             '{"type": "create_entity", "entity": "mara", "name": "Mara", "entity_type": "character"},'
             '{"type": "create_entity", "entity": "silver-key", "name": "Silver key", "entity_type": "item"},'
             '{"type": "set_possession", "item": "silver-key", "owner": "mara"},'
             '{"type": "set_possession", "item": "silver-key", "owner": "ghost"}]}\n```')
    found = narrative.split(reply)
    outcome = narrative.apply(narrative.empty(), found.events, source="narrator")
    assert found.prose == "Mara pockets the silver key."
    assert len(outcome.accepted) == 3 and len(outcome.rejected) == 1
    assert "Silver key — Mara" in narrative.render_state(outcome.state)
    assert "Mara" in "\n".join(narrative.describe_diff(narrative.diff(narrative.empty(), outcome.state)))
