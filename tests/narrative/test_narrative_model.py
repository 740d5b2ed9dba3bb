import copy

from engine.narrative import model


def _cast(**names):
    state = model.empty()
    for key, name in names.items():
        state["entities"][key] = {"type": "character", "name": name, "status": "active", "description": ""}
    return state


def test_empty_has_every_section():
    assert model.empty() == {"entities": {}, "possessions": {}, "facts": [], "relationships": [],
                             "threads": {}, "scene": {}}
    assert model.empty() is not model.empty()


def test_normalised_repairs_wrong_sections_and_copies():
    broken = {"entities": [], "facts": {}, "possessions": {"key": "mara"}}
    fixed = model.normalised(broken)
    assert fixed["entities"] == {} and fixed["facts"] == [] and fixed["possessions"] == {"key": "mara"}
    fixed["possessions"]["key"] = "aldric"
    assert broken["possessions"] == {"key": "mara"}
    assert model.normalised("not a document") == model.empty()


def test_keys_are_short_lower_case_slugs():
    assert all(model.is_key(k) for k in ("mara", "silver-key", "old-abbey", "alice_2", "x1"))
    assert not any(model.is_key(k) for k in ("Mara", "silver key", "", "-x", "a" * 65, None, 3))


def test_entity_helpers():
    state = _cast(mara="Mara")
    state["entities"]["key"] = {"type": "item", "name": "Silver key"}
    state["entities"]["thing"] = {"name": ""}
    state["possessions"]["key"] = "mara"
    assert model.entity(state, "mara")["name"] == "Mara"
    assert model.entity(state, "nobody") is None
    assert model.entity_name(state, "key") == "Silver key"
    assert model.entity_name(state, "thing") == "thing"
    assert model.entity_name(state, "nobody") == "nobody"
    assert list(model.entities_of_type(state, "item")) == ["key"]
    assert list(model.entities_of_type(state, "other")) == ["thing"]
    assert model.owner_of(state, "key") == "mara" and model.owner_of(state, "mara") is None


def test_fact_relationship_and_thread_helpers():
    state = model.empty()
    state["facts"] = [{"id": "a", "predicate": "p"},
                      {"id": "b", "predicate": "q", "status": "withdrawn", "invalidated_reason": "no"},
                      "garbage"]
    state["relationships"] = [{"source": "a", "target": "b", "label": "x"},
                              {"source": "a", "target": "b", "label": "y", "status": "ended"}]
    state["threads"] = {"t1": {"title": "A"}, "t2": {"title": "B", "status": "closed"}}
    assert [f["id"] for f in model.active_facts(state)] == ["a"]
    assert [f["id"] for f in model.withdrawn_facts(state)] == ["b"]
    assert [r["label"] for r in model.active_relationships(state)] == ["x"]
    assert list(model.open_threads(state)) == ["t1"]


def test_helpers_accept_malformed_documents():
    for junk in (None, [], "x", {"entities": "x", "facts": 3}):
        assert model.entity(junk, "a") is None
        assert model.active_facts(junk) == [] and model.open_threads(junk) == {}
        assert model.duplicate_names(junk) == {}


def test_duplicate_names_reports_shared_names_ignoring_case_and_spaces():
    state = _cast(alice_1="Alice", alice_2="alice ", roger="Roger")
    state["entities"]["blank"] = {"name": "  "}
    state["entities"]["nameless"] = {"type": "item"}
    before = copy.deepcopy(state)
    assert model.duplicate_names(state) == {"alice": ["alice_1", "alice_2"]}
    assert state == before


def test_duplicate_names_is_empty_for_distinct_names():
    assert model.duplicate_names(_cast(mara="Mara", roger="Roger")) == {}
    assert model.duplicate_names({"entities": {"a": "not a dict", "b": {"name": 3}}}) == {}
