from engine.narrative import apply, empty, render, render_state, split
from engine.narrative.render import (
    HEADING_ENTITIES,
    HEADING_FACTS,
    HEADING_HELD,
    HEADING_RELATIONSHIPS,
    HEADING_THREADS,
    HEADING_WITHDRAWN,
    PROMPT_ENTITIES,
    PROMPT_FACTS,
    PROMPT_HELD,
    PROMPT_RELATIONSHIPS,
    PROMPT_THREADS,
    SECTION_HEADINGS,
)


def build(events):
    outcome = apply(empty(), events, source="correction")
    assert outcome.rejected == []
    return outcome.state


def create(key, name, kind="character"):
    return {"type": "create_entity", "entity": key, "name": name, "entity_type": kind}


def section(text, heading):
    """The indented lines under one heading."""
    lines = text.split("\n")
    start = lines.index(heading) + 1
    body = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def test_an_empty_state_renders_nothing():
    assert render_state(empty()) == "" and render_state(None) == "" and render_state({"entities": 3}) == ""


def test_every_section_in_order():
    state = build([
        create("mara", "Mara"), create("aldric", "Aldric"), create("abbey", "Old Abbey", "location"),
        create("key", "Silver key", "item"),
        {"type": "update_entity", "entity": "mara", "description": "a smuggler", "status": "wounded"},
        {"type": "set_current_location", "entity": "mara", "location": "abbey"},
        {"type": "set_possession", "item": "key", "owner": "mara"},
        {"type": "add_fact", "fact_id": "vault", "subject": "mara", "predicate": "knows the code", "value": 1234},
        {"type": "add_fact", "fact_id": "bells", "predicate": "the bells are silent"},
        {"type": "withdraw_fact", "fact_id": "bells", "reason": "they rang at dawn"},
        {"type": "add_relationship", "source": "mara", "target": "aldric", "label": "trusts"},
        {"type": "open_thread", "thread": "who-rang", "title": "Who rang the bells?"},
        {"type": "set_scene", "summary": "Night in the nave", "location": "abbey", "present": ["mara", "aldric"]},
    ])
    text = render_state(state)
    assert text.split("\n")[0] == "Scene: Night in the nave (present: Mara, Aldric) (at Old Abbey)"
    assert section(text, HEADING_ENTITIES)[0] == "mara: Mara (character, wounded) — a smuggler; at Old Abbey"
    assert "aldric: Aldric (character)" in section(text, HEADING_ENTITIES)
    assert section(text, HEADING_HELD) == ["Silver key — Mara"]
    assert section(text, HEADING_FACTS) == ["vault: Mara knows the code: 1234"]
    assert section(text, HEADING_WITHDRAWN) == ["bells: the bells are silent (withdrawn: they rang at dawn)"]
    assert section(text, HEADING_RELATIONSHIPS) == ["Mara — trusts — Aldric"]
    assert section(text, HEADING_THREADS) == ["who-rang: Who rang the bells?"]
    positions = [text.index(h) for h in SECTION_HEADINGS]
    assert positions == sorted(positions)


def test_a_pasted_rendering_is_recognised_by_the_extractor():
    state = build([create("mara", "Mara"), {"type": "add_fact", "predicate": "p"},
                   {"type": "set_scene", "summary": "Dusk", "present": ["mara"]}])
    assert split(f"Mara listens.\n\n{render_state(state)}").prose == "Mara listens."


def test_headings_are_whole_lines_in_the_rendering():
    state = build([create("a", "A"), create("b", "B"), {"type": "set_possession", "item": "a", "owner": "b"}])
    lines = render_state(state).split("\n")
    assert HEADING_ENTITIES in lines and HEADING_HELD in lines


def test_caps_apply_where_documented():
    events = [create(f"e{i}", f"E{i}") for i in range(40)]
    events += [{"type": "set_possession", "item": f"e{i}", "owner": "e0"} for i in range(1, 40)]
    events += [{"type": "add_fact", "fact_id": f"f{i}", "predicate": f"fact {i}"} for i in range(40)]
    events += [{"type": "withdraw_fact", "fact_id": f"f{i}", "reason": "no"} for i in range(35)]
    events += [{"type": "add_fact", "fact_id": f"g{i}", "predicate": f"more {i}"} for i in range(40)]
    events += [{"type": "add_relationship", "source": "e0", "target": f"e{i}", "label": "knows"}
               for i in range(1, 30)]
    events += [{"type": "open_thread", "thread": f"t{i}", "title": f"T{i}"} for i in range(20)]
    events += [{"type": "set_scene", "summary": "Here", "present": ["e1", "e2"]}]
    text = render_state(build(events))
    entities = section(text, HEADING_ENTITIES)
    assert len(entities) == PROMPT_ENTITIES == 30
    assert entities[:2] == ["e1: E1 (character)", "e2: E2 (character)"]  # the scene's people stay
    assert entities[-1] == "e39: E39 (character)"  # then the newest
    assert len(section(text, HEADING_HELD)) == PROMPT_HELD == 30
    facts = section(text, HEADING_FACTS)
    assert len(facts) == PROMPT_FACTS == 30 and facts[-1] == "g39: more 39"
    withdrawn = section(text, HEADING_WITHDRAWN)
    assert len(withdrawn) == PROMPT_FACTS and withdrawn[-1].startswith("f34:")
    relationships = section(text, HEADING_RELATIONSHIPS)
    assert len(relationships) == PROMPT_RELATIONSHIPS == 20 and relationships[-1] == "E0 — knows — E29"
    threads = section(text, HEADING_THREADS)
    assert len(threads) == PROMPT_THREADS == 12 and threads[0] == "t0: T0"  # the oldest stay in sight


def test_rendering_never_mutates_and_tolerates_broken_entries():
    state = build([create("mara", "Mara")])
    state["possessions"]["ghost-item"] = "nobody"
    state["facts"].append("garbage")
    before = repr(state)
    text = render_state(state)
    assert "ghost-item — nobody" in text and repr(state) == before
    assert render.fact_line(state, {"predicate": "it rains"}) == "it rains"
